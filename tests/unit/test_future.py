"""LightFuture behaves as a concurrent.futures.Future for every standard helper."""

from __future__ import annotations

import concurrent.futures as cf
import sys
import threading
from collections.abc import Iterator

import pytest

from jsclient._future import LightFuture


def _later(delay: float, fn: object) -> None:
    threading.Timer(delay, fn).start()  # type: ignore[arg-type]


def test_result_blocks_until_set_from_another_thread() -> None:
    f: LightFuture[int] = LightFuture()
    _later(0.05, lambda: f.set_result(1))
    assert f.result(timeout=2) == 1
    assert f.done() and f._cond is not None  # the waiter made the condition


def test_no_condition_when_nobody_waits() -> None:
    f: LightFuture[int] = LightFuture()
    f.set_result(5)
    assert f._cond is None and f.result() == 5 and f.done()
    assert f._w is None and f._cbs is None  # nor waiter or callback lists


def test_wait_and_as_completed_see_results_and_errors() -> None:
    f: LightFuture[int] = LightFuture()
    g: LightFuture[int] = LightFuture()
    _later(0.05, lambda: f.set_result(1))
    _later(0.1, lambda: g.set_exception(ValueError("boom")))
    done, not_done = cf.wait([f, g], timeout=2)
    assert done == {f, g} and not not_done
    assert isinstance(g.exception(), ValueError)
    h: LightFuture[int] = LightFuture()
    _later(0.02, lambda: h.set_result(3))
    assert [x.result() for x in cf.as_completed([h], timeout=2)] == [3]


def test_timeout_and_double_completion() -> None:
    f: LightFuture[int] = LightFuture()
    with pytest.raises(cf.TimeoutError):
        f.result(timeout=0.01)
    assert f.try_set_result(1) and not f.try_set_result(2)
    with pytest.raises(cf.InvalidStateError):
        f.set_exception(ValueError())
    assert f.result() == 1


def test_done_callbacks_run_once_before_and_after_completion() -> None:
    f: LightFuture[int] = LightFuture()
    seen: list[int] = []
    f.add_done_callback(lambda fut: seen.append(fut.result()))
    f.set_result(7)
    f.add_done_callback(lambda fut: seen.append(fut.result() * 10))
    assert seen == [7, 70]


@pytest.fixture
def fast_switching() -> Iterator[None]:
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # let threads interleave between any two bytecodes
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def test_racing_completers_exactly_one_wins(fast_switching: None) -> None:
    futs: list[LightFuture[int]] = [LightFuture() for _ in range(3000)]
    wins: list[list[int]] = [[], [], []]
    start = threading.Barrier(3)

    def complete(k: int) -> None:
        start.wait()
        for i, f in enumerate(futs):
            ok = f.try_set_result(k) if k < 2 else f.try_set_exception(ValueError(k))
            if ok:
                wins[k].append(i)

    threads = [threading.Thread(target=complete, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    won = sorted(wins[0] + wins[1] + wins[2])
    assert won == list(range(len(futs)))  # each future completed by exactly one thread
    for k in range(2):
        assert all(futs[i].result() == k for i in wins[k])
    assert all(isinstance(futs[i].exception(), ValueError) for i in wins[2])


def test_callbacks_added_while_completing_run_exactly_once(fast_switching: None) -> None:
    futs: list[LightFuture[int]] = [LightFuture() for _ in range(3000)]
    calls = [0] * len(futs)
    start = threading.Barrier(2)

    def add() -> None:
        start.wait()
        for i, f in enumerate(futs):
            f.add_done_callback(lambda _f, i=i: calls.__setitem__(i, calls[i] + 1))

    def complete() -> None:
        start.wait()
        for f in futs:
            f.set_result(1)

    threads = [threading.Thread(target=add), threading.Thread(target=complete)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert calls == [1] * len(futs)
