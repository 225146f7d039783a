"""The library's own threads in ``_threads.py`` are bounded and outlive user code (issue 32).

- A cancelled timer leaves the scheduler's heap (it used to stay there, with
  its function and arguments, until its deadline): the heap is bounded by the
  live timers.
- The callback runner and the timer thread go on after a callback raises a
  BaseException (``SystemExit``, ``KeyboardInterrupt``); they used to die, and
  every later callback queued forever.
"""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest
from _js import eventually, wait_for

from jsclient._threads import _COMPACT_MIN, CallbackRunner, Scheduler


@pytest.fixture
def sched() -> Any:
    s = Scheduler("test-timers")
    yield s
    s.stop()


def test_cancelled_timers_leave_the_heap(sched: Scheduler) -> None:
    handles = [sched.call_later(3600, print, i) for i in range(20_000)]
    for h in handles:
        h.cancel()
    assert sched.heap_size <= _COMPACT_MIN


def test_heap_is_bounded_by_live_timers(sched: Scheduler) -> None:
    # 1000 live timers, and 50 000 made and cancelled among them.
    live = [sched.call_later(3600, print, i) for i in range(1000)]
    for _ in range(50):
        batch = [sched.call_later(3600, print, i) for i in range(1000)]
        for h in batch:
            h.cancel()
        assert sched.heap_size <= 2 * len(live) + _COMPACT_MIN + 1
    assert sched.heap_size <= 2 * len(live) + _COMPACT_MIN + 1
    for h in live:
        h.cancel()
    assert sched.heap_size <= _COMPACT_MIN


def test_cancel_lets_go_of_the_payload_at_once(sched: Scheduler) -> None:
    class Payload:
        pass

    p = Payload()
    ref = weakref.ref(p)
    h = sched.call_later(3600, print, p)
    del p
    h.cancel()
    gc.collect()
    assert ref() is None


def test_cancels_from_threads_keep_live_timers_running(sched: Scheduler) -> None:
    ran: list[int] = []
    lock = threading.Lock()

    def mark(i: int) -> None:
        with lock:
            ran.append(i)

    # The doomed are due well after the threads cancel them (on a loaded
    # machine making 8,000 timers alone can take longer than 50 ms); the kept
    # ones come due while the cancels (and the heap's compactions) go on.
    doomed = [sched.call_later(2.0 + (i % 50) / 1000, mark, -1) for i in range(8000)]
    kept = [sched.call_later(0.05 + (i % 50) / 1000, mark, i) for i in range(200)]

    def cancel(part: list[Any]) -> None:
        for h in part:
            h.cancel()

    threads = [threading.Thread(target=cancel, args=(doomed[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    eventually(lambda: len(ran) >= len(kept), 10.0, "the live timers to run")
    assert wait_for(lambda: sched.heap_size == 0, 5.0)
    assert sorted(ran) == list(range(200))  # none of the cancelled ones ran
    assert sched._dead == 0  # the count of cancelled entries matches the heap


@pytest.mark.parametrize("exc", [SystemExit, KeyboardInterrupt, GeneratorExit])
def test_timer_thread_survives_base_exception(sched: Scheduler, exc: type) -> None:
    def boom() -> None:
        raise exc()

    ran = threading.Event()
    sched.call_later(0, boom)
    sched.call_later(0.01, ran.set)
    assert ran.wait(5.0)
    assert sched._thread.is_alive()


@pytest.mark.parametrize("exc", [SystemExit, KeyboardInterrupt, GeneratorExit])
def test_callback_runner_survives_base_exception(exc: type) -> None:
    runner = CallbackRunner("test-callbacks")
    try:

        def boom() -> None:
            raise exc()

        ran = threading.Event()
        runner.submit(boom)
        runner.submit(ran.set)
        assert ran.wait(5.0)
        assert runner.thread.is_alive()
    finally:
        runner.stop()
