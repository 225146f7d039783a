"""Small thread helpers shared by a connection: timers, callback runners, safe signals.

The threads are named, stop cleanly, and never wait without a timeout. User
callbacks (error_cb, disconnected_cb, ...) run on a callback runner, never on
the socket reader thread; an exception from a callback, any BaseException
(``SystemExit`` too), is logged, not propagated: the thread goes on.

Interrupt safety: ``threading.Event`` and ``threading.Condition`` enter their
lock in Python code (``Condition.__enter__``), so an exception raised into a
thread right there (a ``KeyboardInterrupt`` in the main thread) can leave the
lock held for good, and every later ``set()`` blocks forever, on a library
thread too; ``Condition.wait`` takes its lock back in a Python function, at
whose start an interrupt leaves it released under the waiter's ``with``.
Whatever a user's thread may call here takes locks only with a ``with`` on a
plain lock, whose enter and exit are C calls that the interpreter pairs, and
waits on a waiter lock of its own that it takes the lock back after in C
(:meth:`Signal.wait_locked`). The interpreter raises an interrupt after a
call returns and on a loop's jump back, never before a call: so the waits'
steps are ordered that each call's effect is undone by the ``finally`` that
covers its return.

:class:`Signal` is the library's one wait primitive, built that way: a flag
(``set``/``clear``/``is_set``/``wait``, for Event; ``take``, the auto-reset
wait of one thread) and a condition on a plain lock (``wait_for(ready,
timeout)``, ``notify``) that waiters wait on in slices of at most
``_IDLE_WAIT``. It counts its waiters, so a ``set``/``notify`` with nobody
waiting reads one attribute and takes no lock. :class:`Wake` is a Signal
whose ``wait`` is ``take`` (the runners' wake-ups); the Scheduler waits on one too.
"""

from __future__ import annotations

import heapq
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from jsclient import _impl

log = logging.getLogger("jsclient")

_allocate_lock = threading.Lock

#: The longest single wait of a library loop (a handler thread, a subscription
#: taker, a request-many iterator) before it looks at its state again: every
#: wait is sliced into waits of at most this, so none is unbounded.
WAIT_SLICE = 1.0

_IDLE_WAIT = 1.0


def remaining(deadline: float | None, cap: float | None) -> float | None:
    """Seconds left until ``deadline`` (monotonic; None = no deadline), at most ``cap``."""
    if deadline is None:
        return cap
    left = max(0.0, deadline - time.monotonic())
    return left if cap is None else min(left, cap)


class WeakRegistry:
    """A weak set that threads change while another lists it (``snapshot()``).

    A ``weakref.WeakSet`` iterated by one thread while another adds or
    discards raises "Set changed size during iteration" (seen without a GIL,
    possible with one): its changes and its listing go under one lock here.
    Entries whose object died leave by themselves, as in a WeakSet.
    """

    __slots__ = ("_lock", "_set")

    def __init__(self) -> None:
        self._set: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, item: Any) -> None:
        with self._lock:
            self._set.add(item)

    def discard(self, item: Any) -> None:
        with self._lock:
            self._set.discard(item)

    def snapshot(self) -> list[Any]:
        """The live members now, as a list (the set may change right after)."""
        with self._lock:
            return list(self._set)

    def __len__(self) -> int:
        with self._lock:
            return len(self._set)


class Signal:
    """A flag and a condition on one plain lock: the library's wait primitive.

    As a flag (``threading.Event``'s ``set``/``clear``/``is_set``/``wait``):
    ``wait`` returns once it is set; ``take`` (one waiting thread) also clears
    it, so each ``set`` wakes one ``take`` (an auto-reset event). As a
    condition: a thread changes state (under ``lock`` or not) and calls
    :meth:`notify`; waiters call :meth:`wait_for` with a predicate, checked
    under ``lock``. Waits sleep in slices of at most ``_IDLE_WAIT``, so a
    notify lost to an interrupt in the notifying thread delays a waiter by one
    slice at most. ``waiting`` counts the threads in a wait: registered under
    the lock before they check their predicate, so a notifier that changed the
    state first and then reads no waiter lets go of nobody.
    """

    __slots__ = ("_set", "_waiters", "_wake", "lock", "waiting")

    def __init__(self, lock: threading.Lock | None = None) -> None:
        self.lock = threading.Lock() if lock is None else lock
        # The condition's waiters (under ``lock``): one held lock each, which a
        # notify releases (not a threading.Condition: see the module).
        self._waiters: list[threading.Lock] = []
        self.waiting = 0
        self._set = False
        # The auto-reset side: a lock used as a binary semaphore, released by
        # ``set`` and acquired by ``take``, so that waking a taker is one C call
        # and a take one C-level wait (no Condition: the flusher and the
        # publisher's runners wake this way for every batch).
        self._wake = threading.Lock()
        self._wake.acquire()

    # -- condition ---------------------------------------------------------------

    def notify(self) -> None:
        """Wake every waiter to check its predicate again (any thread; not holding ``lock``)."""
        if self.waiting:
            with self.lock:
                self._notify_all()

    def notify_locked(self) -> None:
        """:meth:`notify` for a thread holding ``lock``."""
        if self.waiting:
            self._notify_all()

    def _notify_all(self) -> None:
        # The list is swapped first: an interrupt part-way leaves the rest to
        # wake at the end of their slice, and no waiter is released twice.
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            w.release()

    def wait_for(self, ready: Callable[[], bool], timeout: float | None) -> bool:
        """Wait until ``ready()`` (called under ``lock``), at most ``timeout``
        seconds (None: no limit); True if it is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            self.waiting += 1
            try:
                while True:  # not `while not ready()`: see tests/unit/test_interrupt_cover.py
                    if ready():
                        return True
                    left = _IDLE_WAIT if deadline is None else deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._wait(min(left, _IDLE_WAIT))
            finally:
                self.waiting -= 1

    def wait_locked(self, timeout: float) -> None:
        """For a thread holding ``lock`` with a loop of its own: wait once for a
        notify, at most ``timeout`` seconds (and one slice)."""
        self.waiting += 1
        try:
            self._wait(min(timeout, _IDLE_WAIT))
        finally:
            self.waiting -= 1

    def _wait(self, timeout: float) -> None:
        """(Holding ``lock``) let go of it, wait for a notify or ``timeout``, and
        hold it again, whatever is raised into the thread meanwhile."""
        waiter = _allocate_lock()
        waiter.acquire()
        # An interrupt at the append's return: the lock is still held (the
        # caller's with lets go of it) and the stale waiter is released by
        # the next notify.
        self._waiters.append(waiter)
        try:
            self.lock.release()  # an interrupt at its return: the finally takes it back
            waiter.acquire(True, timeout)
        finally:
            self.lock.acquire()  # first, and in C: held again before anything can raise
            try:
                self._waiters.remove(waiter)  # timed out or interrupted: not notified
            except ValueError:
                pass

    # -- flag ----------------------------------------------------------------------

    def set(self) -> None:
        self._set = True
        try:
            self._wake.release()  # wakes a take (one C call)
        except RuntimeError:
            pass  # already set
        if self.waiting:
            with self.lock:
                self._notify_all()

    def clear(self) -> None:
        self._set = False
        self._wake.acquire(False)

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until set, at most ``timeout`` seconds (None: no limit); True if it is."""
        return self._set or self.wait_for(self.is_set, timeout)

    def take(self, timeout: float | None) -> bool:
        """Wait until set and clear it (one waiting thread), at most ``timeout``
        seconds (None: no limit, in slices); True if it was set."""
        wake = self._wake
        if timeout is None:
            while not wake.acquire(timeout=_IDLE_WAIT):
                pass
        elif not wake.acquire(timeout=max(0.0, timeout)):
            return False
        self._set = False
        return True


class Wake(Signal):
    """A :class:`Signal` whose ``wait`` is :meth:`~Signal.take`: one thread
    waits and each ``set`` wakes it once (an auto-reset event)."""

    __slots__ = ()

    def wait(self, timeout: float | None = None) -> bool:
        return self.take(timeout)


def _noop(*args: Any) -> None:
    pass


#: A heap with fewer cancelled entries than this is never rebuilt.
_COMPACT_MIN = 64


class TimerHandle:
    """What :meth:`Scheduler.call_later` returns; ``cancel()`` stops it from running."""

    __slots__ = ("_sched", "args", "cancelled", "fn", "when")

    def __init__(
        self, when: float, fn: Callable[..., Any], args: tuple[Any, ...], sched: Scheduler | None
    ) -> None:
        self.when = when
        self.fn = fn
        self.args = args
        self.cancelled = False
        self._sched = sched  # None once out of the heap (run, running, or dropped)

    def cancel(self) -> None:
        """Stop it from running and let go of its function and arguments (any thread)."""
        sched = self._sched
        if sched is None:
            self.cancelled = True
        else:
            sched._cancel(self)


class Scheduler:
    """One thread running timed calls in deadline order (ping, heartbeats, deadlines).

    Timed functions must be short: they run one after another on this thread.
    A cancelled timer lets go of its function and arguments at once, and its
    heap entry is dropped when it reaches the top or when cancelled entries
    are more than half the heap (the heap is then rebuilt, which costs each
    cancel O(1) amortised): the heap is bounded by the live timers, not by
    how many were made (``publish_async(..., ack_timeout=30)`` makes one per
    publish, and its ack cancels it).
    """

    def __init__(self, name: str) -> None:
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._lock = threading.Lock()
        self._signal = Signal(self._lock)  # waited on with _lock held (see module)
        self._seq: Iterator[int] = _impl.writer.Counter(0)
        self._dead = 0  # cancelled entries still in the heap
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def heap_size(self) -> int:
        """Entries in the heap: live timers, and cancelled ones not dropped yet."""
        return len(self._heap)

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        handle = TimerHandle(time.monotonic() + max(0.0, delay), fn, args, self)
        with self._lock:
            heapq.heappush(self._heap, (handle.when, next(self._seq), handle))
            if self._heap[0][2] is handle:
                self._signal.notify_locked()
        return handle

    def _cancel(self, handle: TimerHandle) -> None:
        # Under the lock, which nothing holds across a call or a wait: a few
        # assignments, and now and then a rebuild of the heap.
        with self._lock:
            if handle.cancelled:
                return
            handle.cancelled = True
            if handle._sched is None:
                return  # taken off the heap meanwhile: running or run
            handle._sched = None
            handle.fn = _noop
            handle.args = ()
            if self._stopped:
                return  # the heap was cleared
            self._dead += 1
            heap = self._heap
            if self._dead > _COMPACT_MIN and 2 * self._dead > len(heap):
                heap[:] = [e for e in heap if not e[2].cancelled]
                heapq.heapify(heap)
                self._dead = 0

    def stop(self, timeout: float = 2.0) -> None:
        with self._lock:
            self._stopped = True
            self._heap.clear()
            self._dead = 0
            self._signal.notify_locked()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        heap = self._heap  # changed in place only
        while True:
            with self._lock:
                if self._stopped:
                    return
                if not heap:
                    self._signal.wait_locked(_IDLE_WAIT)
                    continue
                when, _, handle = heap[0]
                if handle.cancelled:  # dropped now, not at its deadline
                    heapq.heappop(heap)
                    self._dead -= 1
                    continue
                delay = when - time.monotonic()
                if delay > 0:
                    self._signal.wait_locked(delay)
                    continue
                heapq.heappop(heap)
                handle._sched = None
                fn, args = handle.fn, handle.args
            try:
                fn(*args)
            except BaseException:  # the timer thread outlives any timed call
                log.exception("jsclient: timer callback %r failed", fn)


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
            except BaseException:  # SystemExit, KeyboardInterrupt from user code too
                log.exception("jsclient: callback %r raised", fn)
