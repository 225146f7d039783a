"""LightFuture behaves as a concurrent.futures.Future for every standard helper."""

from __future__ import annotations

import concurrent.futures as cf
import threading

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
