"""The async publish paths' one flow-control window (``jsclient.jetstream.publish.window``)."""

from __future__ import annotations

import threading
import time

import pytest

from jsclient.jetstream.publish.window import Window


class _Owner:
    """A pending set and its window, as publish_async keeps them."""

    def __init__(self, limit: int, resume_at: int) -> None:
        self.pending: set[int] = set()
        self.window = Window(limit, resume_at, self.pending.__len__)

    def fill(self, n: int) -> None:
        self.pending.update(range(len(self.pending), len(self.pending) + n))

    def ack(self, n: int = 1) -> None:
        for _ in range(n):
            self.pending.pop()
            self.window.released()


def test_full_and_resumable_follow_the_count() -> None:
    o = _Owner(4, 1)
    assert not o.window.full() and o.window.resumable()
    o.fill(3)
    assert not o.window.full() and o.window.full(adding=2)
    o.fill(1)
    assert o.window.full() and not o.window.resumable()
    o.ack(3)
    assert o.window.resumable()


def test_no_limit_is_never_full() -> None:
    o = _Owner(0, 0)
    o.fill(10_000)
    assert not o.window.full()


def test_bad_marks_are_refused() -> None:
    for limit, resume_at in ((4, 5), (4, -1), (-1, 0)):
        with pytest.raises(ValueError, match="resume_at"):
            Window(limit, resume_at, lambda: 0)


def test_a_full_window_resumes_at_its_mark_not_on_the_first_ack() -> None:
    o = _Owner(8, 2)
    o.fill(8)
    resumed_at: list[int] = []

    def sender() -> None:
        assert o.window.wait_room(time.monotonic() + 10)
        resumed_at.append(len(o.pending))

    t = threading.Thread(target=sender)
    t.start()
    for _ in range(5):
        o.ack()
        time.sleep(0.02)
        assert not resumed_at  # 7, 6, ...3 left: still above the mark
    o.ack()
    t.join(5)
    assert resumed_at == [2]


def test_waits_end_at_their_deadline() -> None:
    o = _Owner(2, 0)
    o.fill(2)
    t0 = time.monotonic()
    assert not o.window.wait_room(t0 + 0.1)
    assert not o.window.wait_below(0, t0 + 0.2)
    assert 0.15 <= time.monotonic() - t0 < 2


def test_wait_for_empty_and_interruption() -> None:
    o = _Owner(10, 5)
    o.fill(3)
    moved = threading.Event()
    got: list[bool] = []

    def drainer() -> None:
        got.append(o.window.wait_below(0, None, moved.is_set))

    t = threading.Thread(target=drainer)
    t.start()
    time.sleep(0.05)
    moved.set()
    o.window.wake_all()  # as a disconnect does
    t.join(5)
    assert got == [False] and len(o.pending) == 3
    t = threading.Thread(target=lambda: got.append(o.window.wait_below(0, None)))
    t.start()
    o.ack(3)
    t.join(5)
    assert got == [False, True]


def test_released_without_waiters_takes_no_lock() -> None:
    o = _Owner(4, 1)
    o.fill(2)
    with o.window._lock:  # held by someone else: released() must not block
        done = threading.Event()
        threading.Thread(target=lambda: (o.ack(), done.set())).start()
        assert done.wait(2)


def test_an_ack_above_every_waiters_mark_takes_no_lock() -> None:
    """A waiter publishes its mark (``wake_at``) before it reads the count; while
    the count stays above it, released() wakes nobody and takes no lock, and
    the ack that reaches it still wakes the waiter."""
    o = _Owner(8, 2)
    o.fill(8)
    assert o.window.wake_at == -1
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(o.window.wait_room(time.monotonic() + 10)))
    t.start()
    deadline = time.monotonic() + 5
    while o.window.wake_at != 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert o.window.wake_at == 2 and o.window._signal.waiting
    with o.window._lock:  # held here: an ack above the mark must not block
        done = threading.Event()
        threading.Thread(target=lambda: (o.ack(5), done.set())).start()
        assert done.wait(2)
    assert len(o.pending) == 3 and t.is_alive()
    o.ack()  # reaches the mark: the waiter wakes
    t.join(5)
    assert got == [True] and o.window.wake_at == -1
