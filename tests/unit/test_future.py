"""LazyFuture behaves as a concurrent.futures.Future for every standard helper,
and relies on nothing of the stock Future but its public API."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import inspect
import sys
import threading
from collections.abc import Iterator

import pytest

import jsclient._future as future_mod
from jsclient._future import LazyFuture


def _later(delay: float, fn: object) -> None:
    threading.Timer(delay, fn).start()  # type: ignore[arg-type]


def test_result_blocks_until_set_from_another_thread() -> None:
    f: LazyFuture[int] = LazyFuture()
    _later(0.05, lambda: f.set_result(1))
    assert f.result(timeout=2) == 1
    assert f.done() and f._lz_real  # the waiter made the stock state


def test_no_condition_when_nobody_waits() -> None:
    f: LazyFuture[int] = LazyFuture()
    f.set_result(5)
    assert f.result() == 5 and f.done() and f.exception() is None
    assert not f._lz_real and "_condition" not in vars(f)  # no stock state was made


def test_wait_and_as_completed_see_results_and_errors() -> None:
    f: LazyFuture[int] = LazyFuture()
    g: LazyFuture[int] = LazyFuture()
    _later(0.05, lambda: f.set_result(1))
    _later(0.1, lambda: g.set_exception(ValueError("boom")))
    done, not_done = cf.wait([f, g], timeout=2)
    assert done == {f, g} and not not_done
    assert isinstance(g.exception(), ValueError)
    h: LazyFuture[int] = LazyFuture()
    _later(0.02, lambda: h.set_result(3))
    assert [x.result() for x in cf.as_completed([h], timeout=2)] == [3]


def test_timeout_and_double_completion() -> None:
    f: LazyFuture[int] = LazyFuture()
    with pytest.raises(cf.TimeoutError):
        f.result(timeout=0.01)
    assert f.try_set_result(1) and not f.try_set_result(2)
    with pytest.raises(cf.InvalidStateError):
        f.set_exception(ValueError())
    assert f.result() == 1


def test_done_callbacks_run_once_before_and_after_completion() -> None:
    f: LazyFuture[int] = LazyFuture()
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
    futs: list[LazyFuture[int]] = [LazyFuture() for _ in range(3000)]
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
    futs: list[LazyFuture[int]] = [LazyFuture() for _ in range(3000)]
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


def test_relies_on_no_private_part_of_concurrent_futures() -> None:
    # The stock Future's own state, whatever it is called in this Python: a
    # LazyFuture never names or interprets any of it (a new Python may rename
    # it), nor imports the private module that holds it. Its only contact
    # with it: a descriptor per name found on a stock instance, which makes
    # the stock state with Future.__init__ on first access.
    stock_state = set(vars(cf.Future()))
    assert stock_state  # e.g. _condition, _state, _result, _waiters ...
    assert not set(LazyFuture.__slots__) & stock_state
    for name in stock_state:
        assert isinstance(vars(LazyFuture)[name], future_mod._Stock)
    own = {n for n, v in vars(LazyFuture).items() if not isinstance(v, future_mod._Stock)}
    assert not own & stock_state
    src = inspect.getsource(future_mod)
    assert "_base" not in src
    for name in stock_state:
        assert f".{name}" not in src and f'"{name}"' not in src, name


def test_stock_helpers_see_a_future_completed_before_they_looked() -> None:
    f: LazyFuture[int] = LazyFuture()
    f.set_result(8)
    assert not f._lz_real
    done, _ = cf.wait([f], timeout=0)  # reads the stock state: made now, already finished
    assert done == {f} and f._lz_real
    assert list(cf.as_completed([f], timeout=0)) == [f]
    g: LazyFuture[int] = LazyFuture()
    g.set_exception(KeyError("k"))
    assert cf.wait([g], timeout=0).done == {g} and isinstance(g.exception(), KeyError)


def test_callbacks_run_on_the_runner_when_completed_elsewhere() -> None:
    ran: list[tuple[str, int]] = []
    queued: list[tuple[object, ...]] = []

    def runner(fn: object, *args: object) -> None:
        queued.append((fn, *args))

    f: LazyFuture[int] = LazyFuture(runner)
    f.add_done_callback(lambda fut: ran.append((threading.current_thread().name, fut.result())))
    t = threading.Thread(target=f.set_result, args=(4,), name="completer")
    t.start()
    t.join(5)
    assert ran == [] and len(queued) == 1  # handed to the runner, not run by the completer
    fn, *args = queued[0]
    fn(*args)  # type: ignore[operator]
    assert ran == [(threading.current_thread().name, 4)]
    # Once done, a new callback runs at once in the adding thread, as with a stock future.
    f.add_done_callback(lambda fut: ran.append(("now", fut.result())))
    assert ran[-1] == ("now", 4)


def test_callbacks_after_the_stock_state_exists_still_go_to_the_runner() -> None:
    queued: list[object] = []
    f: LazyFuture[int] = LazyFuture(lambda fn, *a: queued.append(fn))
    cf.wait([f], timeout=0.01)  # makes the stock state
    assert f._lz_real
    f.add_done_callback(lambda fut: None)
    f.set_result(1)
    assert len(queued) == 1 and f.result() == 1


def test_cannot_be_cancelled() -> None:
    f: LazyFuture[int] = LazyFuture()
    assert not f.cancel() and not f.cancelled() and not f.running()
    f.set_result(2)
    assert not f.cancel() and f.result() == 2


def test_asyncio_can_await_it() -> None:
    f: LazyFuture[int] = LazyFuture()

    async def main() -> int:
        _later(0.02, lambda: f.set_result(9))
        return await asyncio.wrap_future(f)

    assert asyncio.run(main()) == 9
