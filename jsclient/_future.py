"""A ``concurrent.futures.Future`` whose standard state is made only when something needs it.

``publish_async`` makes one future per message. A stock ``Future`` allocates
a ``Condition`` (and its ``RLock``) when it is made and takes it when it is
completed: about 3 µs per message, more than the rest of a publish. Most of
these futures are never waited on one by one: they complete on a library
thread and are read after ``publish_async_complete()``.

So a :class:`LazyFuture` keeps its outcome in fields of its own and does not
call ``Future.__init__`` until it must. It interprets no private part of
``concurrent.futures``: its own methods implement the public ``Future`` API.
The helpers ``concurrent.futures.wait()`` and ``as_completed()``, and any
``Future`` method it does not override, read the stock future's own state,
whatever it is called: the names are taken at import from a stock instance
(``vars(Future())``), and for each the class gets a small descriptor that,
on first access, runs ``Future.__init__`` and replays the outcome through the
public ``set_result``/``set_exception``. From then on the stock machinery does
the work. A new Python that renames or adds stock state changes nothing
here. (A ``__getattr__`` would do the same, but its mere presence stops
CPython from specialising attribute access on the class: every read of a
field on the ack path would take the slow path.)

Done callbacks run on ``runner`` (given at construction; the client's
user-callback thread) when the future completes on a library thread, never
on the thread that completed it, which may be the socket reader. A callback
added to a future that is already done runs at once in the adding thread, as
with a stock future.

Completing and making the stock state are claimed under one module lock, held
for a few assignments (and, when the stock state is made of a done future,
for its ``set_result``, which has nothing to wake yet), never across a
callback; so exactly one of two racing completers wins, and a waiter that
makes the stock state either sees the outcome or is woken by it. The outcome
is read under the same lock: nothing relies on the GIL or on the order in
which another thread's stores become visible.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound="LazyFuture[Any]")
Runner = Callable[..., None]

_lock = threading.Lock()
#: The lock completions take: state handed between a future's completer and
#: another thread (a reply token) is read and written under it too.
completion_lock = _lock
_log = logging.getLogger("concurrent.futures")


class _Stock:
    """The stock Future's field ``name``: made (by ``Future.__init__``) on first access."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        d = obj.__dict__
        try:
            return d[self.name]
        except KeyError:
            obj._make_real()
            return d[self.name]

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = value

    def __delete__(self, obj: Any) -> None:
        del obj.__dict__[self.name]


def _call(fn: Callable[[Any], object], fut: Any) -> None:
    try:
        fn(fut)
    except Exception:
        _log.exception("exception calling callback for %r", fut)


class LazyFuture(Future[T]):
    """A Future whose stock state is made on first need; see the module docstring.

    It cannot be cancelled: its outcome is the library's to decide (a
    cancelled publish would leak its place in the window).
    """

    __slots__ = ("_lz_cbs", "_lz_done", "_lz_exc", "_lz_real", "_lz_runner", "_lz_value")

    def __init__(self, runner: Runner | None = None) -> None:  # no Future.__init__: lazy
        self._lz_done = False
        self._lz_value: Any = None
        self._lz_exc: BaseException | None = None
        self._lz_cbs: list[Callable[[Any], object]] | None = None
        self._lz_real = False
        self._lz_runner = runner

    def _make_real(self) -> None:
        with _lock:
            if self._lz_real:
                return
            Future.__init__(self)
            self._lz_real = True
            if self._lz_done:
                if self._lz_exc is None:
                    Future.set_result(self, self._lz_result())
                else:
                    Future.set_exception(self, self._lz_exc)

    def _lz_result(self) -> Any:
        """The result as the completer stored it; a subclass that stores a cheaper
        form (the plain publish ack's fields) builds the value here, once.
        Called under the module lock, after ``_lz_done``."""
        return self._lz_value

    # -- completing --------------------------------------------------------

    def _complete(self, value: Any, exc: BaseException | None) -> bool:
        """Finish the future; False if it was finished already."""
        with _lock:
            if self._lz_done:
                return False
            self._lz_value = value
            self._lz_exc = exc
            self._lz_done = True
            real = self._lz_real
            cbs = self._lz_cbs
            self._lz_cbs = None
        if real:  # waiters of the stock state, and callbacks added since it was made
            if exc is None:
                Future.set_result(self, value)
            else:
                Future.set_exception(self, exc)
        if cbs:
            self._run(cbs)
        return True

    @staticmethod
    def complete_all(futures: list[F]) -> list[F]:
        """Complete every pending future of ``futures`` with a None result, claiming
        them all in one critical section; returns the ones this call completed."""
        claimed: list[F] = []
        cbs: list[tuple[F, list[Callable[[Any], object]]]] = []
        with _lock:
            for f in futures:
                if f._lz_done:
                    continue
                f._lz_done = True
                if f._lz_cbs:
                    cbs.append((f, f._lz_cbs))
                    f._lz_cbs = None
                # Last, not under an if: a loop body that ends with an if is
                # an interrupt outside the with on 3.13+ (test_interrupt_cover).
                claimed.append(f)
        for f in claimed:
            if f._lz_real:
                Future.set_result(f, None)
        for f, fns in cbs:
            f._run(fns)
        return claimed

    def _run(self, cbs: list[Callable[[Any], object]]) -> None:
        run = self._lz_runner
        for fn in cbs:
            if run is None:
                _call(fn, self)
            else:
                run(_call, fn, self)

    def try_set_result(self, result: T | None) -> bool:
        """Complete with a result unless already done; True if this call completed it."""
        return self._complete(result, None)

    def try_set_exception(self, exc: BaseException) -> bool:
        """Complete with an error unless already done; True if this call completed it."""
        return self._complete(None, exc)

    def set_result(self, result: T) -> None:
        if not self._complete(result, None):
            raise InvalidStateError(f"already finished: {self!r}")

    def set_exception(self, exception: BaseException | None) -> None:
        if not self._complete(None, exception):
            raise InvalidStateError(f"already finished: {self!r}")

    # -- the public Future API -------------------------------------------------

    def done(self) -> bool:
        return self._lz_done

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return False

    def set_running_or_notify_cancel(self) -> bool:
        if self._lz_done:
            raise RuntimeError("future already finished")
        return True

    def result(self, timeout: float | None = None) -> T:
        if self._lz_done:
            with _lock:  # the outcome as its completer wrote it, whatever the memory model
                exc = self._lz_exc
                value: T = self._lz_result()
            if exc is not None:
                raise exc
            return value
        self._make_real()
        return Future.result(self, timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._lz_done:
            with _lock:
                return self._lz_exc
        self._make_real()
        return Future.exception(self, timeout)

    def add_done_callback(self, fn: Callable[[Future[T]], object]) -> None:
        with _lock:
            if not self._lz_done:
                if not self._lz_real:
                    if self._lz_cbs is None:
                        self._lz_cbs = []
                    self._lz_cbs.append(fn)
                    return
                real_pending = True
            else:
                real_pending = False
        if real_pending:
            run = self._lz_runner
            if run is None:
                Future.add_done_callback(self, fn)
            else:
                Future.add_done_callback(self, lambda f: run(_call, fn, f))
            return
        _call(fn, self)

    def __repr__(self) -> str:
        if not self._lz_done:
            return f"<{type(self).__name__} at {id(self):#x} state=pending>"
        if self._lz_exc is not None:
            return (
                f"<{type(self).__name__} at {id(self):#x} state=finished raised {self._lz_exc!r}>"
            )
        with _lock:
            value = self._lz_result()
        return f"<{type(self).__name__} at {id(self):#x} state=finished returned {value!r}>"


# The stock Future's fields, whatever this Python calls them.
for _name in vars(Future()):
    setattr(LazyFuture, _name, _Stock(_name))
del _name
