"""Interrupts raised into threads blocked in each public waiting call.

An exception raised into a thread from outside (``KeyboardInterrupt`` in the
main thread; here ``PyThreadState_SetAsyncExc``, which reaches any thread) is
delivered as the blocking call returns to Python code. The library's rule
(``jsclient._handoff``): a wait moves what it got into a place the object
owns in the same C call, and locks are entered only with ``with`` on a plain
lock. Each test blocks a thread in one call, interrupts it, makes the data it
waited for arrive at that moment, and then checks that the next call hands
that data out (nothing lost) and that the connection still works.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from _js import eventually, raise_in, wait_for

import jsclient
from jsclient import errors
from jsclient.jetstream.publish.window import Window


class Interrupt(Exception):
    """Raised into a thread from outside, as KeyboardInterrupt is."""


class Blocked:
    """A thread running ``call`` once, recording what it returned or raised."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.interrupted = False
        self._call = call
        self.thread = threading.Thread(target=self._run, name="blocked-caller", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            try:
                self.result = self._call()
            except BaseException as exc:
                self.error = exc
        except Interrupt:
            pass  # a second one (see finish) that came as the first was handled
        finally:
            self.done.set()

    def wait_blocked(self, *names: str) -> None:
        """Wait until the thread is inside a function called one of ``names``."""

        def inside() -> bool:
            frame = sys._current_frames().get(self.thread.ident or 0)
            while frame is not None:
                if frame.f_code.co_name in names:
                    return True
                frame = frame.f_back
            return False

        eventually(inside, 10, f"the thread to block in {names}")
        time.sleep(0.1)  # into the C call that waits

    def interrupt(self) -> None:
        raise_in(self.thread, Interrupt)
        self.interrupted = True

    def finish(self, timeout: float = 10.0) -> None:
        """Wait for the call to return. CPython drops an interrupt that lands in
        a garbage-collector callback (hypothesis installs one in a full run) as
        "unraisable": a call still waiting a second later gets another."""
        deadline = time.monotonic() + timeout
        while not self.done.wait(1.0):
            assert time.monotonic() < deadline, "the interrupted call did not return"
            if self.interrupted:
                raise_in(self.thread, Interrupt)
        self.thread.join(timeout)


@pytest.fixture
def js(nc: jsclient.Client) -> Any:
    js = nc.jetstream()
    js.create_stream(name="INT", subjects=["int.>"])
    return js


def _interrupted_while(
    blocked: Blocked, names: tuple[str, ...], arrive: Callable[[], None]
) -> None:
    """Interrupt ``blocked`` once it waits in ``names``, then make its data arrive."""
    blocked.wait_blocked(*names)
    blocked.interrupt()
    arrive()
    blocked.finish()


def test_next_msg_keeps_the_batch_it_was_interrupted_with(nc: jsclient.Client) -> None:
    sub = nc.subscribe("int.core")
    nc.flush()
    for round_ in range(3):
        b = Blocked(lambda: sub.next_msg(timeout=30))

        def arrive(r: int = round_) -> None:
            nc.publish("int.core", b"m%d" % r)
            nc.flush()

        _interrupted_while(b, ("_take", "next_msg"), arrive)
        # The interrupt is delivered as the wait returns with the message...
        if b.error is not None:
            assert isinstance(b.error, Interrupt)
            # ...and the message is still there for the next call.
            assert sub.next_msg(timeout=5).data == b"m%d" % round_
        else:  # the message won the race with the interrupt
            assert b.result.data == b"m%d" % round_
            time.sleep(0.2)  # let the pending interrupt land in the thread's tail
    nc.publish("int.core", b"after")
    assert sub.next_msg(timeout=5).data == b"after"
    assert sub.pending_msgs == 0


def test_iterating_a_subscription_loses_nothing(nc: jsclient.Client) -> None:
    sub = nc.subscribe("int.iter")
    nc.flush()
    b = Blocked(lambda: next(iter(sub)))
    _interrupted_while(b, ("_take",), lambda: nc.publish("int.iter", b"x"))
    if b.error is not None:
        assert isinstance(b.error, Interrupt)
        assert next(iter(sub)).data == b"x"


def test_messages_next_keeps_the_message(js: Any, nc: jsclient.Client) -> None:
    c = js.create_consumer("INT", durable_name="m", filter_subject="int.m", ack_wait=30)
    with c.messages(max_messages=10) as it:
        for i in range(3):
            b = Blocked(lambda: it.next(timeout=30))
            _interrupted_while(b, ("next",), lambda i=i: js.publish("int.m", b"%d" % i) and None)
            msg = b.result if b.error is None else it.next(timeout=5)
            if b.error is not None:
                assert isinstance(b.error, Interrupt)
            assert msg.data == b"%d" % i
            msg.ack()
        js.publish("int.m", b"after")
        assert it.next(timeout=5).data == b"after"


def test_fetch_iteration_keeps_the_message(js: Any) -> None:
    c = js.create_consumer("INT", durable_name="f", filter_subject="int.f", ack_wait=30)
    batch = c.fetch(2, expires=20)
    it = iter(batch)
    b = Blocked(lambda: next(it))
    _interrupted_while(b, ("__next__", "_next_slow"), lambda: js.publish("int.f", b"one") and None)
    got = [b.result] if b.error is None else []
    if b.error is not None:
        assert isinstance(b.error, Interrupt)
    js.publish("int.f", b"two")
    got += list(it)
    assert [m.data for m in got] == [b"one", b"two"]


def test_legacy_fetch_gives_back_what_it_collected(js: Any) -> None:
    psub = js.pull_subscribe("int.p", "legacy", stream="INT")
    b = Blocked(lambda: psub.fetch(5, timeout=20))
    _interrupted_while(b, ("_pull", "_take"), lambda: js.publish("int.p", b"a") and None)
    if b.error is not None:
        assert isinstance(b.error, Interrupt)
        msgs = psub.fetch(5, timeout=5)
    else:
        msgs = b.result
    assert [m.data for m in msgs] == [b"a"]
    js.publish("int.p", b"b")
    assert [m.data for m in psub.fetch(5, timeout=5)] == [b"b"]


def test_kv_watcher_next_keeps_the_entry(js: Any) -> None:
    kv = js.create_key_value(bucket="INTKV")
    with kv.watch() as w:
        assert w.next(timeout=5) is None  # nothing at the start
        for i in range(3):
            b = Blocked(lambda: w.next(timeout=30))
            _interrupted_while(
                b, ("_next", "_next_batch"), lambda i=i: kv.put("k", b"%d" % i) and None
            )
            entry = b.result if b.error is None else w.next(timeout=5)
            if b.error is not None:
                assert isinstance(b.error, Interrupt)
            assert (entry.key, entry.value) == ("k", b"%d" % i)
        kv.put("k", b"after")
        assert w.next(timeout=5).value == b"after"


def _lossy_js(nc: jsclient.Client, window: int, ack_timeout: float) -> Any:
    """A context whose publishes to ``int.lost`` never get an ack (a core
    subscriber takes them and never answers), so its window fills up."""
    nc.subscribe("lost.>")  # swallows; answers nothing
    nc.flush()
    return nc.jetstream(
        publish_async_max_pending=window,
        publish_async_timeout=ack_timeout,
        publish_async_stall_wait=30.0,
    )


def test_publish_async_waiting_for_room_can_be_interrupted(nc: jsclient.Client, js: Any) -> None:
    ljs = _lossy_js(nc, 3, 2.0)
    futs = [ljs.publish_async("lost.a", b"x") for _ in range(3)]
    b = Blocked(lambda: ljs.publish_async("lost.a", b"y"))
    _interrupted_while(b, ("wait_below", "wait_room"), lambda: None)
    assert isinstance(b.error, Interrupt)
    # The window is not wedged: the lost acks time out, room comes back, and
    # the context publishes and completes again.
    for f in futs:
        with pytest.raises(errors.TimeoutError):
            f.result(timeout=15)
    ljs.publish_async_complete(timeout=15)
    assert ljs.publish_async("int.ok", b"z").result(timeout=10).seq >= 1
    assert js.publish("int.ok", b"sync").seq >= 2


def test_publish_async_complete_can_be_interrupted(nc: jsclient.Client) -> None:
    ljs = _lossy_js(nc, 10, 1.5)
    futs = [ljs.publish_async("lost.b", b"x") for _ in range(4)]
    b = Blocked(lambda: ljs.publish_async_complete())
    _interrupted_while(b, ("wait_below", "complete"), lambda: None)
    assert isinstance(b.error, Interrupt)
    ljs.publish_async_complete(timeout=15)  # ends: every future failed by its timeout
    assert all(isinstance(f.exception(timeout=0), errors.TimeoutError) for f in futs)
    assert ljs.publish_async_pending == 0


def test_window_lock_survives_interrupts_anywhere_in_a_wait() -> None:
    """Interrupts at random points of a tight wait loop never leave the lock held."""
    count = [1]
    w = Window(1, 0, lambda: count[0])
    stop = threading.Event()
    entered = threading.Event()
    caught = [0]

    inside = threading.Event()
    returned = threading.Event()
    handled = threading.Semaphore(0)

    def loop() -> None:
        inside.set()
        entered.set()
        while not stop.is_set():
            w.wait_below(0, time.monotonic() + 0.0005)

    # The harness's own loop: an interrupt on its jump back to `try` would end
    # the thread, so the next one is raised only once the thread is back in
    # loop().
    def run() -> None:
        while True:
            try:
                loop()
                returned.set()  # not ended by another error (a lock released twice)
                return
            except Interrupt:
                inside.clear()
                caught[0] += 1
                handled.release()

    t = threading.Thread(target=run, name="window-waiter", daemon=True)
    t.start()
    assert entered.wait(5)
    for _ in range(300):
        raise_in(t, Interrupt)
        # (Not handled within 0.2 s: CPython dropped it in a gc callback.)
        handled.acquire(timeout=0.2)
        assert inside.wait(5)
        time.sleep(0.0005)
    stop.set()
    t.join(10)
    assert not t.is_alive() and returned.is_set()
    assert caught[0] > 0
    # Nothing is left held or registered: the owner's side does not block.
    assert w._lock.acquire(timeout=2), "an interrupt left the window's lock held"
    w._lock.release()
    assert w._signal.waiting == 0 and w._targets == []
    count[0] = 0
    w.released()
    assert w.wait_below(0, time.monotonic() + 1)


def test_connection_works_after_interrupts(nc: jsclient.Client, js: Any) -> None:
    """Many interrupts into a thread blocked in next_msg: every message is still
    delivered exactly once, in order."""
    sub = nc.subscribe("int.many")
    nc.flush()
    got: list[bytes] = []
    interrupts = 0
    for i in range(20):
        b = Blocked(lambda: sub.next_msg(timeout=30))
        b.wait_blocked("_take")
        b.interrupt()
        nc.publish("int.many", b"%d" % i)
        nc.flush()
        b.finish()
        if b.error is None:
            got.append(b.result.data)
            time.sleep(0.1)  # the interrupt lands in the thread's tail
        else:
            interrupts += 1
            assert isinstance(b.error, Interrupt)
            got.append(sub.next_msg(timeout=5).data)
    while True:
        try:
            got.append(sub.next_msg(timeout=0.5).data)
        except errors.TimeoutError:
            break
    assert got == [b"%d" % i for i in range(20)]
    assert interrupts > 0
    assert wait_for(lambda: nc.is_connected)
    assert nc.request("$JS.API.INFO", b"", timeout=5).data


def test_publisher_publish_async_waiting_for_queue_room(js: Any) -> None:
    """The managed publisher's queue is full (no runner yet): the waiting
    publish takes the interrupt; what was queued is all published later."""
    pub = jsclient.Publisher(js, max_queued=5, stall_wait=30.0)
    flights = [pub.publish_async("int.pub", b"%d" % i) for i in range(5)]
    b = Blocked(lambda: pub.publish_async("int.pub", b"late"))
    _interrupted_while(b, ("wait_below", "_wait_for_room"), lambda: None)
    assert isinstance(b.error, Interrupt)
    assert pub.queued == 5
    pub.start()
    try:
        acks = [f.result(10).publish_ack_future.result(10) for f in flights]
        assert [a.seq for a in acks] == [1, 2, 3, 4, 5]
        assert pub.publish_async("int.pub", b"after").result(10).publish_ack_future.result(10)
    finally:
        pub.drain(timeout=10)
