"""``jsclient._threads.Signal``: the library's one wait primitive (a flag, an
auto-reset wake-up and a condition on a plain lock), and ``_handoff.next_item``,
the one loop that takes from a queue of routed batches."""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections import deque
from typing import Any

import pytest
from _js import eventually, raise_in

from jsclient import _threads
from jsclient._handoff import next_item, wait_into
from jsclient._threads import Signal, Wake


class Interrupt(Exception):
    pass


def _waiter(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            out.append(exc)

    t = threading.Thread(target=run, name="signal-test-waiter", daemon=True)
    t.start()
    return t, out


def test_flag_wakes_every_waiter_and_stays_set() -> None:
    s = Signal()
    waiters = [_waiter(lambda: s.wait(10)) for _ in range(3)]
    eventually(lambda: s.waiting == 3, 5, "three waiters")
    s.set()
    for t, out in waiters:
        t.join(5)
        assert out == [True]
    assert s.is_set() and s.wait(0) and s.waiting == 0
    s.clear()
    assert not s.is_set()
    t0 = time.monotonic()
    assert s.wait(0.05) is False
    assert time.monotonic() - t0 < 2


def test_take_is_an_auto_reset_wake() -> None:
    s = Signal()
    assert s.take(0.01) is False
    s.set()
    s.set()  # two sets before a take wake it once
    assert s.take(0) is True
    assert s.take(0.01) is False
    t, out = _waiter(lambda: s.take(10))
    time.sleep(0.05)  # most likely in its take by now; either order must wake it
    s.set()
    t.join(5)
    assert out == [True] and not s.is_set()
    s.set()
    s.clear()  # a clear takes back a set nobody took
    assert s.take(0.01) is False


def test_wake_is_a_signal_whose_wait_takes() -> None:
    w = Wake()
    assert isinstance(w, Signal)
    w.set()
    assert w.wait(0) is True and w.wait(0.01) is False  # Wake.wait is take


def test_wait_for_a_predicate_and_notify() -> None:
    lock = threading.Lock()
    s = Signal(lock)
    state = {"n": 0}
    t, out = _waiter(lambda: s.wait_for(lambda: state["n"] >= 3, 10))
    for _ in range(3):
        eventually(lambda: s.waiting == 1, 5, "the waiter")
        with lock:
            state["n"] += 1
            s.notify_locked()
    t.join(5)
    assert out == [True] and s.waiting == 0
    assert s.wait_for(lambda: False, 0.02) is False


def test_notify_with_no_waiter_takes_no_lock() -> None:
    s = Signal()
    with s.lock:  # a notify that took the lock would block here for good
        s.notify()
        s.set()
    assert s.is_set()


def _inside(t: threading.Thread, name: str) -> bool:
    frame = sys._current_frames().get(t.ident or 0)
    while frame is not None:
        if frame.f_code.co_name == name and frame.f_code.co_filename == _threads.__file__:
            return True
        frame = frame.f_back
    return False


def test_a_waiter_interrupted_leaves_the_lock_free() -> None:
    s = Signal()
    t, out = _waiter(lambda: s.wait_for(lambda: False, 30))
    eventually(lambda: _inside(t, "_wait"), 5, "the waiter in Signal._wait")
    time.sleep(0.1)  # into the C call that waits
    raise_in(t, Interrupt)
    s.notify()  # it runs Python code again only when woken (or at its slice's end)
    t.join(10)
    assert not t.is_alive() and isinstance(out[0], Interrupt)
    assert s.waiting == 0
    assert s.lock.acquire(timeout=1)
    s.lock.release()


# -- next_item -------------------------------------------------------------------


def test_next_item_moves_a_routed_batch_into_local() -> None:
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()
    held: deque[Any] = deque()
    local: deque[Any] = deque()
    q.put((["a", "b", "c"], 3))
    q.put("control")
    assert next_item(q, held, local, 0) == "a"
    assert list(local) == ["b", "c"]
    assert next_item(q, held, local, 0) == "b"
    assert next_item(q, held, local, 0) == "c"
    assert next_item(q, held, local, 0) == "control"
    with pytest.raises(queue.Empty):
        next_item(q, held, local, 0)
    t0 = time.monotonic()
    with pytest.raises(queue.Empty):
        next_item(q, held, local, 0.05)
    assert time.monotonic() - t0 >= 0.04


def test_next_item_without_local_returns_batches_whole() -> None:
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()
    held: deque[Any] = deque()
    q.put((["a", "b"], 2))
    assert next_item(q, held, None, 0) == (["a", "b"], 2)


def test_what_an_interrupted_wait_took_comes_next() -> None:
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()
    held: deque[Any] = deque()
    local: deque[Any] = deque()
    q.put((["x", "y"], 2))
    wait_into(q, held, 1.0)  # the wait returned; the interrupt came before its caller took it
    q.put("later")
    assert next_item(q, held, local, 0) == "x"
    assert next_item(q, held, local, 0) == "y"
    assert next_item(q, held, local, 0) == "later"


class _TakenUnder(deque):  # type: ignore[type-arg]
    """A deque that another taker empties between the caller's test and its pop,
    ``races`` times: what several threads taking from one subscription do."""

    def __init__(self, races: int) -> None:
        super().__init__()
        self.races = races

    def popleft(self) -> Any:
        if self.races:
            self.races -= 1
            self.clear()
            raise IndexError("pop from an empty deque")
        return super().popleft()


def test_next_item_looks_again_when_another_taker_empties_local() -> None:
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()
    local = _TakenUnder(races=1)
    local.append("taken by the other thread")
    q.put("next")
    assert next_item(q, deque(), local, 0) == "next"


def test_next_item_waits_again_when_another_taker_got_what_it_waited_for() -> None:
    # The wait put an item in ``held``; another thread popped it first. The loop
    # waits again for what is left of the timeout, not for a new full timeout.
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()
    held = _TakenUnder(races=1)
    threading.Timer(0.05, q.put, ("first",)).start()
    t0 = time.monotonic()
    with pytest.raises(queue.Empty):
        next_item(q, held, deque(), 0.5)
    took = time.monotonic() - t0
    assert 0.45 <= took < 1.0
    threading.Timer(0.05, q.put, ("second",)).start()
    assert next_item(q, held, deque(), 5) == "second"


def test_threads_taking_from_one_queue_each_get_distinct_items() -> None:
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()
    held: deque[Any] = deque()
    local: deque[Any] = deque()
    total = 20000
    got: list[Any] = []
    errors: list[BaseException] = []

    def taker() -> None:
        try:
            while True:
                try:
                    item = next_item(q, held, local, 0.2)
                except queue.Empty:
                    return
                got.append(item)
        except BaseException as exc:
            errors.append(exc)

    takers = [threading.Thread(target=taker, name=f"take-{k}") for k in range(4)]
    for t in takers:
        t.start()
    for i in range(0, total, 2):
        q.put(([i, i + 1], 2))  # one routed batch of two, as the reader puts them
    for t in takers:
        t.join(10)
    assert not errors
    assert sorted(got) == list(range(total))
