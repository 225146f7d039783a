"""A ``concurrent.futures.Future`` that creates its Condition only when someone waits.

``publish_async`` makes one future per message, and the stock ``Future``
allocates a ``Condition`` and an ``RLock`` for each. Most of these futures are
never waited on one by one: they are completed by the reader thread and read
after ``publish_async_complete()``. So here the condition is made lazily, the
first time a caller needs it (``result()``, ``exception()``, ``wait()``,
``as_completed()``, ``add_done_callback()``).

Why completing without the condition is safe: ``_complete`` stores the
outcome and sets ``_state`` before it looks for a condition. A waiter creates
the condition first and checks ``_state`` while holding it. So either the
completer sees the condition and notifies it, or the waiter sees FINISHED.
Creating the condition is serialised by one module lock, because two waiters
may race to create it. Completing is claimed under another module lock (held
for a few assignments, never across a callback), so exactly one of two racing
completers wins.

Done callbacks need no condition either: each callback is *claimed* by
removing it from ``_done_callbacks`` (a single atomic list operation), by the
completer (``pop``) or by an ``add_done_callback`` that sees the future
finished after appending (``remove``), so each runs exactly once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures._base import FINISHED, PENDING
from typing import Any, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound="LightFuture[Any]")

_create_lock = threading.Lock()
_claim_lock = threading.Lock()
_log = logging.getLogger("concurrent.futures")


class LightFuture(Future[T]):
    """A Future whose Condition is allocated on first wait."""

    def __init__(self) -> None:  # deliberately not calling Future.__init__
        self._state = PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._w: list[Any] | None = None  # waiters of wait()/as_completed(), made on demand
        self._cbs: list[Any] | None = None  # done callbacks, made on demand
        self._cond: threading.Condition | None = None

    # Future's own methods (and concurrent.futures.wait) use these two lists;
    # most futures never need them, so they are made on first use: two fewer
    # allocations (and objects for the garbage collector) per future.
    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        w = self._w
        if w is None:
            with _create_lock:
                w = self._w
                if w is None:
                    w = self._w = []
        return w

    @property
    def _done_callbacks(self) -> list[Any]:
        cbs = self._cbs
        if cbs is None:
            with _create_lock:
                cbs = self._cbs
                if cbs is None:
                    cbs = self._cbs = []
        return cbs

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            with _create_lock:
                cond = self._cond
                if cond is None:
                    cond = self._cond = threading.Condition()
        return cond

    def _complete(self, result: Any, exc: BaseException | None) -> bool:
        """Finish the future; False if it was already finished."""
        # The claim is one short critical section on a module lock, so that two
        # completers racing (a reply and a timeout, say) cannot both win.
        with _claim_lock:
            if self._state == FINISHED:
                return False
            self._result = result
            self._exception = exc
            self._state = FINISHED
        cond = self._cond  # read after FINISHED was set: see the module docstring
        if cond is not None:
            with cond:
                self._notify(cond)
        self._run_callbacks()
        return True

    @staticmethod
    def complete_all(futures: list[F]) -> list[F]:
        """Complete every pending future of ``futures`` with a None result, claiming
        them all in one critical section; returns the ones this call completed."""
        claimed = []
        with _claim_lock:
            for f in futures:
                if f._state != FINISHED:
                    f._state = FINISHED
                    claimed.append(f)
        for f in claimed:
            cond = f._cond
            if cond is not None:
                with cond:
                    f._notify(cond)
            if f._cbs:
                f._run_callbacks()
        return claimed

    def _notify(self, cond: threading.Condition) -> None:
        for waiter in self._w or ():
            if self._exception is None:
                waiter.add_result(self)
            else:
                waiter.add_exception(self)
        cond.notify_all()

    def _run_callbacks(self) -> None:
        callbacks = self._cbs  # None: nobody added one before FINISHED was set
        while callbacks:
            try:
                fn = callbacks.pop(0)
            except IndexError:
                return
            try:
                fn(self)
            except Exception:
                _log.exception("exception calling callback for %r", self)

    def add_done_callback(self, fn: Callable[[Future[T]], object]) -> None:
        if self._state != FINISHED:
            self._done_callbacks.append(fn)
            if self._state != FINISHED:
                return
            try:
                self._done_callbacks.remove(fn)  # claim it back from the completer
            except ValueError:
                return  # the completer claimed it and runs it
        try:
            fn(self)
        except Exception:
            _log.exception("exception calling callback for %r", self)

    def set_result(self, result: T) -> None:
        if not self._complete(result, None):
            from concurrent.futures import InvalidStateError

            raise InvalidStateError(f"{self._state}: {self!r}")

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._complete(None, exception):
            from concurrent.futures import InvalidStateError

            raise InvalidStateError(f"{self._state}: {self!r}")

    def try_set_result(self, result: T | None) -> bool:
        """Complete with a result unless already done; True if this call completed it."""
        return self._complete(result, None)

    def try_set_exception(self, exc: BaseException) -> bool:
        """Complete with an error unless already done; True if this call completed it."""
        return self._complete(None, exc)

    def done(self) -> bool:
        return self._state == FINISHED or super().done()

    def result(self, timeout: float | None = None) -> T:
        if self._state == FINISHED:
            if self._exception is not None:
                raise self._exception
            value: T = self._result
            return value
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == FINISHED:
            return self._exception
        return super().exception(timeout)
