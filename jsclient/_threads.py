"""Small thread helpers shared by a connection: one timer thread, one callback thread.

Both are named, stop cleanly, and never wait without a timeout. User callbacks
(error_cb, disconnected_cb, ...) run on the callback thread, never on the
socket reader thread; an exception from a callback is logged, not propagated.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("jsclient")

_IDLE_WAIT = 1.0


def remaining(deadline: float | None, cap: float | None) -> float | None:
    """Seconds left until ``deadline`` (monotonic; None = no deadline), at most ``cap``."""
    if deadline is None:
        return cap
    left = max(0.0, deadline - time.monotonic())
    return left if cap is None else min(left, cap)


class TimerHandle:
    """What :meth:`Scheduler.call_later` returns; ``cancel()`` stops it from running."""

    __slots__ = ("args", "cancelled", "fn", "when")

    def __init__(self, when: float, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.when = when
        self.fn = fn
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    """One thread running timed calls in deadline order (ping, heartbeats, deadlines).

    Timed functions must be short: they run one after another on this thread.
    """

    def __init__(self, name: str) -> None:
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._cond = threading.Condition(threading.Lock())
        self._seq = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        handle = TimerHandle(time.monotonic() + max(0.0, delay), fn, args)
        with self._cond:
            heapq.heappush(self._heap, (handle.when, next(self._seq), handle))
            if self._heap[0][2] is handle:
                self._cond.notify()
        return handle

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                if not self._heap:
                    self._cond.wait(_IDLE_WAIT)
                    continue
                when, _, handle = self._heap[0]
                delay = when - time.monotonic()
                if delay > 0:
                    self._cond.wait(min(delay, _IDLE_WAIT))
                    continue
                heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            try:
                handle.fn(*handle.args)
            except Exception:
                log.exception("jsclient: timer callback %r failed", handle.fn)


class CallbackRunner:
    """Runs callbacks in order on its own thread, off the socket reader."""

    _STOP = object()

    def __init__(self, name: str) -> None:
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        if not self._stopped:
            self._q.put((fn, args))

    def stop(self, timeout: float = 2.0) -> None:
        """Run what is queued, then end the thread (waits up to ``timeout``)."""
        if self._stopped:
            return
        self._stopped = True
        self._q.put(self._STOP)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            try:
                item = self._q.get(timeout=_IDLE_WAIT)
            except queue.Empty:
                continue
            if item is self._STOP:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("jsclient: callback %r raised", fn)
