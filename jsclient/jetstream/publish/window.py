"""The flow-control window of every async publish path.

``JetStream.publish_async``, the managed :class:`~jsclient.jetstream.publish.publisher.Publisher`
and the Spark sink each keep at most ``limit`` publishes waiting for their
acks. When the window is full, sending holds until the window has drained to
``resume_at`` (a mark below the limit: resuming on every single ack would
cost a thread switch per message) or, for a bounded wait, until a deadline.

:class:`Window` is that rule and its waiting, once. The owner keeps the
count (the length of its pending dict or in-flight set, or sent - done) and
calls :meth:`Window.released` after the count went down; that costs no lock
unless a thread waits. Every wait is bounded: by its deadline, and in slices
of at most :data:`WAIT_SLICE` so that a wake-up lost to a race costs a slice,
never a hang.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from jsclient._threads import Signal

__all__ = ["WAIT_SLICE", "Window"]

#: The longest single wait; every wait re-checks its condition at least this often.
WAIT_SLICE = 0.5


class Window:
    """At most ``limit`` outstanding (0: no limit); a full window resumes at ``resume_at``.

    ``count`` returns the number outstanding; the owner changes it and calls
    :meth:`released` after every decrease (any thread).
    """

    __slots__ = ("_count", "_lock", "_signal", "_targets", "limit", "resume_at", "wake_at")

    def __init__(self, limit: int, resume_at: int, count: Callable[[], int]) -> None:
        if limit < 0 or not 0 <= resume_at <= max(0, limit):
            raise ValueError(f"window: need 0 <= resume_at <= limit, got {resume_at}, {limit}")
        self.limit = limit
        self.resume_at = resume_at
        self._count = count
        self._lock = threading.Lock()
        # The library's wait primitive on that lock; its ``waiting`` counts the
        # threads in a wait (read without the lock by released()).
        self._signal = Signal(self._lock)
        self._targets: list[int] = []  # the count each waiting thread waits for
        # The highest of those targets, -1 with no waiter: the owner reads it
        # without the lock, so an ack that wakes nobody takes no lock.
        self.wake_at = -1

    # -- the rule ----------------------------------------------------------------

    def full(self, adding: int = 1) -> bool:
        """True when ``adding`` more would not fit."""
        return 0 < self.limit < self._count() + adding

    def resumable(self) -> bool:
        """True once a full window has drained to ``resume_at``."""
        return self._count() <= self.resume_at

    # -- waiting -------------------------------------------------------------------

    def wait_room(self, deadline: float) -> bool:
        """A sender found the window full: wait until it drained to ``resume_at``.

        False at ``deadline`` (the window may have room by then without having
        reached the mark; the caller decides with :meth:`full`).
        """
        return self.wait_below(self.resume_at, deadline)

    def wait_below(
        self,
        target: int,
        deadline: float | None,
        interrupted: Callable[[], bool] | None = None,
    ) -> bool:
        """Wait until at most ``target`` are outstanding; False at ``deadline``
        (None: none) or as soon as ``interrupted()`` turns true."""
        count = self._count
        signal = self._signal
        with self._lock:
            # An interrupt is raised at a call's return or a loop's jump: after
            # the append, inside the try. The finally undoes the count first,
            # since an interrupt at the remove's return skips what follows.
            try:
                signal.waiting += 1  # registered before the count is read (see released())
                self._targets.append(target)
                # Before the count is read: an owner that finds the old mark
                # took its count before this thread reads it.
                self.wake_at = max(self._targets)
                while True:  # the test inside: see tests/unit/test_interrupt_cover.py
                    if count() <= target:
                        return True
                    if interrupted is not None and interrupted():
                        return False
                    left = WAIT_SLICE if deadline is None else deadline - time.monotonic()
                    if left <= 0:
                        return False
                    signal.wait_locked(min(left, WAIT_SLICE))
            finally:
                signal.waiting -= 1
                targets = self._targets
                targets.remove(target)
                self.wake_at = max(targets) if targets else -1

    # -- the owner's side ----------------------------------------------------------

    def released(self) -> None:
        """The count went down: wake the waiters whose target it reached.

        Removing first and then reading ``waiting`` (the owner's order) pairs
        with a waiter that registers and then reads the count: one of the two
        sees the other. A waiter sets ``wake_at`` after it registers and
        before it reads the count, so an owner that reads a count above that
        mark (most acks of a stalled window) needs no lock: the waiter reads
        a count no higher. The owner of a hot path makes the same test inline.
        """
        if self._signal.waiting and self._count() <= self.wake_at:
            with self._lock:
                targets = self._targets
                if targets and self._count() <= max(targets):
                    self._signal.notify_locked()

    def wake_all(self) -> None:
        """Wake every waiter to re-check (an interruption such as a disconnect)."""
        self._signal.notify()
