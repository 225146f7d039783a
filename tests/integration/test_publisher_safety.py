"""The managed publisher (jsclient.jetstream.publish.publisher) under what users do to it.

Each test pins a defect of issue 38:

- flight ids (the Nats-Msg-Ids with retries on) restarted at ``<prefix>-1`` in
  every Publisher, so a restarted process (or a second one with the same
  prefix) had its messages dropped by the stream's duplicate window, reported
  as acked;
- a KeyboardInterrupt into a runner on the user's thread lost flights (their
  futures never completed, not even after ``stop()``) and wedged the
  restarted runner;
- a listener raising a BaseException killed the flights runner;
- ``drain()`` with no runner running waited forever;
- the queue had no bound.
"""

from __future__ import annotations

import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from _js import eventually, raise_in, wait_for

from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.jetstream.publish.publisher import (
    Flight,
    Publisher,
    PublisherClosedError,
    PublisherListener,
    PublisherNotRunningError,
    RetryConfig,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def js(nc: Client) -> JetStream:
    j = nc.jetstream()
    j.create_stream(name="S", subjects=["s.>"], storage="memory")
    return j


def _messages(js: JetStream, stream: str = "S") -> int:
    return js.stream(stream).info().state.messages


# -- ids -----------------------------------------------------------------------


def test_a_restarted_publisher_with_the_same_prefix_loses_nothing(js: JetStream) -> None:
    # Within the stream's duplicate window (2 minutes by default), as after a
    # process restart: the ids of run 2 must not repeat those of run 1.
    acks = []
    for _ in range(2):
        with Publisher(js, id_prefix="orders-svc", retry=RetryConfig()) as pub:
            futs = [pub.publish_async("s.a", b"%d" % i) for i in range(3)]
        acks += [f.result(5).publish_ack_future.result(5) for f in futs]
        assert (pub.acked_count, pub.failed_count) == (3, 0)
    assert _messages(js) == 6
    assert not any(a.duplicate for a in acks) and len({a.seq for a in acks}) == 6
    stored = [(js.stream("S").get_msg(seq).headers or {})["Nats-Msg-Id"] for seq in range(1, 7)]
    assert len(set(stored)) == 6 and all(i.startswith("orders-svc-") for i in stored)


def test_an_explicit_msg_id_is_kept_so_a_restart_is_deduplicated(js: JetStream) -> None:
    # The documented way to de-duplicate across restarts: a stable msg_id per
    # message, sent on every attempt.
    acks = []
    for _ in range(2):
        with Publisher(js, id_prefix="orders-svc", retry=RetryConfig()) as pub:
            fut = pub.publish_async("s.a", b"order 17", msg_id="order-17")
        acks.append(fut.result(5).publish_ack_future.result(5))
    assert _messages(js) == 1
    assert acks[0].seq == acks[1].seq == 1 and acks[1].duplicate and not acks[0].duplicate
    assert (js.stream("S").get_msg(1).headers or {})["Nats-Msg-Id"] == "order-17"


# -- interrupts ----------------------------------------------------------------


class _Interrupted:
    """A thread that runs a runner, is interrupted (KeyboardInterrupt) inside it,
    and runs it again, as a user's worker thread would.

    Interrupts are checked on a loop's backward jump, which CPython may place
    outside a ``try`` written around the loop; so the runner is called from a
    function inside the ``try``, and ``interrupt()`` raises only while the
    thread is inside that call.

    CPython drops an asynchronous exception that fires while the thread runs
    a ``gc.callbacks`` function, a ``__del__`` or a weakref callback (Python
    code the collector runs for whoever triggered it), reporting it to
    ``sys.unraisablehook`` instead: in a full run, hypothesis's gc callback
    swallowed one. The runner never saw it, so ``interrupt()`` raises again
    (``_swallowed``); the fixture ``interrupted`` installs that hook.
    """

    def __init__(self, run: Callable[[], None], name: str) -> None:
        self._run_once = run
        self._armed = False
        self.handled = threading.Semaphore(0)
        self.swallowed = threading.Semaphore(0)  # dropped by CPython on the way
        self.interrupts = 0
        self.lost = 0
        self.returned = threading.Event()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()

    def _inside(self) -> None:
        self._armed = True
        self._run_once()

    def _main(self) -> None:
        while True:
            try:
                self._inside()
                self._armed = False
                self.returned.set()
                return
            except KeyboardInterrupt:
                self._armed = False
                self.interrupts += 1
                self.handled.release()

    def interrupt(self, wait: float = 10.0) -> bool:
        deadline = time.monotonic() + wait
        while not self._armed:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0002)
        raise_in(self.thread, KeyboardInterrupt)
        deadline = time.monotonic() + wait
        while not self.handled.acquire(timeout=0.02):
            if self.swallowed.acquire(blocking=False):
                # Never reached the runner (still armed: nothing handled it).
                self.lost += 1
                raise_in(self.thread, KeyboardInterrupt)
            elif time.monotonic() > deadline:
                return False
        return True

    def state(self) -> str:
        """For a failed ``interrupt()``: where the thread is."""
        frame = sys._current_frames().get(self.thread.ident or 0)
        where = "".join(traceback.format_stack(frame)[-4:]) if frame is not None else "-"
        return (
            f"alive={self.thread.is_alive()} armed={self._armed} "
            f"returned={self.returned.is_set()} lost={self.lost}\n{where}"
        )


_INTERRUPTED: list[_Interrupted] = []


def _swallowed(unraisable: Any, previous: Callable[[Any], object]) -> None:
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        me = threading.get_ident()
        for target in _INTERRUPTED:
            if target.thread.ident == me:
                target.swallowed.release()
                return
    previous(unraisable)


@pytest.fixture
def interrupted(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Interrupted]]:
    """``_Interrupted`` with the hook that finds interrupts CPython swallowed."""
    previous = sys.unraisablehook
    monkeypatch.setattr(sys, "unraisablehook", lambda u: _swallowed(u, previous))

    class Tracked(_Interrupted):
        def __init__(self, run: Callable[[], None], name: str) -> None:
            super().__init__(run, name)
            _INTERRUPTED.append(self)

    yield Tracked
    _INTERRUPTED.clear()


@pytest.mark.parametrize("victim", ["publish", "flights"])
def test_interrupted_runners_lose_no_flight(
    js: JetStream, victim: str, interrupted: type[_Interrupted]
) -> None:
    n = 100_000
    pub = Publisher(js, max_in_flight=1000, refill_allowed_at=500, wait_timeout=3.0, max_queued=n)
    futs = [pub.publish_async("s.a", b"m%d" % i) for i in range(n)]
    runs = {"publish": pub.publish_runner, "flights": pub.flights_runner}
    other = threading.Thread(
        target=runs["flights" if victim == "publish" else "publish"], name="other", daemon=True
    )
    other.start()
    target = interrupted(runs[victim], f"user-{victim}")
    rng = random.Random(38)
    progress = []
    t0 = time.monotonic()
    # Frequent thread switches: interrupts land all over the runner's code,
    # not only where it waits.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        while pub.acked_count < n * 9 // 10 and time.monotonic() - t0 < 4.0:
            if rng.random() < 0.05:
                time.sleep(rng.uniform(0, 0.001))
            if len(progress) % 50 == 49:
                # A stretch without interrupts: without a GIL, on a busy machine,
                # back-to-back interrupts can cut every batch's write short.
                time.sleep(0.02)
            assert target.interrupt(), f"the interrupt was not handled: {target.state()}"
            progress.append(pub.acked_count)
    finally:
        sys.setswitchinterval(switch)
    assert target.interrupts >= 20, target.interrupts
    # Each restarted runner went on: acks kept coming between interrupts.
    assert progress[-1] > progress[len(progress) // 2] > 0, progress[::10]
    pub.drain(timeout=30)
    assert target.returned.wait(5)  # the runner returned by itself ...
    target.thread.join(5)  # ... and its thread ends (just after: set() comes first)
    assert not target.thread.is_alive()
    other.join(5)
    # Every future completed: published and acked, or failed.
    assert all(f.done() for f in futs)
    ok = [f for f in futs if f.exception() is None and f.publish_ack_future.exception() is None]
    assert len(ok) + pub.failed_count + pub.timed_out_count == n
    assert len(ok) >= n // 2, (len(ok), pub.failed_count, pub.timed_out_count)
    # The only failure is an ack timeout: a batch whose write an interrupt cut
    # short is waited for (acked if it went out), or an ack slowed by the load.
    for f in futs:
        exc = f.exception() or f.publish_ack_future.exception()
        assert exc is None or isinstance(exc, errors.TimeoutError), exc
    # What succeeded is stored, each message once: nothing was put back after
    # it was written (no Nats-Msg-Id here to drop a second copy).
    seqs = {f.result().publish_ack_future.result().seq for f in ok}
    assert len(seqs) == len(ok) and len(ok) <= _messages(js) <= n
    assert (pub.in_flight, pub.queued) == (0, 0)


def test_stop_after_interrupts_completes_every_future(
    js: JetStream, interrupted: type[_Interrupted]
) -> None:
    n = 5_000
    pub = Publisher(js, max_in_flight=20, max_queued=n)
    futs = [pub.publish_async("s.a", b"x") for _ in range(n)]
    pub_t = interrupted(pub.publish_runner, "user-publish")
    fl_t = interrupted(pub.flights_runner, "user-flights")
    for i in range(60):
        t = pub_t if i % 2 else fl_t
        assert t.interrupt(), t.state()
        time.sleep(0.001)
    pub.stop()
    assert pub_t.returned.wait(5) and fl_t.returned.wait(5)
    assert wait_for(lambda: all(f.done() for f in futs), timeout=10)
    for f in futs:
        if f.exception() is None:
            f.publish_ack_future.exception(5)  # completes too (acked, or abandoned)
        else:
            # Abandoned by stop(); or timed out: an interrupt inside a batch's write
            # leaves its unwritten flights to their ack clocks (wait_timeout, 5 s),
            # which a slow run (3.13t, GIL off) can reach before stop().
            assert isinstance(f.exception(), PublisherClosedError | errors.PublishAckTimeoutError)
    assert pub.acked_count + pub.failed_count + pub.timed_out_count == n


def test_stop_while_the_runners_move_flights_fails_each_unsettled_one_once(
    js: JetStream,
) -> None:
    """stop() at random moments of full-speed runners: the flights it fails are found
    wherever they are (queue, batch, window, replies), so every message is counted once:
    acked, or failed with PublisherClosedError."""
    rng = random.Random(46)
    for _ in range(15):
        n = 2_000
        pub = Publisher(js, max_in_flight=50, max_queued=n).start()
        futs = [pub.publish_async("s.a", b"x") for _ in range(n)]
        time.sleep(rng.uniform(0.0, 0.03))
        pub.stop()
        assert wait_for(lambda futs=futs: all(f.done() for f in futs), timeout=10)
        acks = [f.publish_ack_future for f in futs if f.exception() is None]
        closed = [f for f in futs if f.exception() is not None]
        assert all(isinstance(f.exception(), PublisherClosedError) for f in closed)
        for a in acks:
            a.exception(5)  # done: acked, or failed when stop() came first
        assert pub.acked_count + pub.failed_count + pub.timed_out_count == n
        assert pub.acked_count == sum(1 for a in acks if a.exception() is None)


# -- listener and callbacks ----------------------------------------------------


class _Fatal(BaseException):
    """Not an Exception: what a buggy listener (or a landed interrupt) raises."""


def test_listener_and_done_callbacks_raising_base_exceptions(
    js: JetStream, caplog: pytest.LogCaptureFixture
) -> None:
    class Fatal(PublisherListener):
        def published(self, flight: Flight) -> None:
            raise _Fatal("published")

        def acked(self, flight: Flight) -> None:
            raise _Fatal("acked")

    pub = Publisher(js, listener=Fatal(), max_in_flight=5)
    futs = [pub.publish_async("s.a", b"%d" % i) for i in range(50)]

    def boom(_: Future[Flight]) -> None:
        raise _Fatal("done callback")

    for f in futs[:10]:
        f.add_done_callback(boom)
    with pub:
        pass
    assert [f.result(5).publish_ack_future.result(5).seq for f in futs] == list(range(1, 51))
    assert pub.acked_count == 50
    assert len([r for r in caplog.records if "publisher listener" in r.getMessage()]) >= 100
    assert len([r for r in caplog.records if "done callback" in r.getMessage()]) == 10


# -- drain ---------------------------------------------------------------------


def test_drain_without_runners_raises(js: JetStream) -> None:
    pub = Publisher(js)
    futs = [pub.publish_async("s.a", b"x") for _ in range(5)]
    t0 = time.monotonic()
    with pytest.raises(PublisherNotRunningError, match="publish runner") as info:
        pub.drain()  # no timeout: it used to wait forever
    assert time.monotonic() - t0 < 5
    assert isinstance(info.value, errors.JetStreamError)
    # Only the flights runner: still nothing publishes.
    flights = threading.Thread(target=pub.flights_runner, name="flights-only", daemon=True)
    flights.start()
    with pytest.raises(PublisherNotRunningError, match="publish runner"):
        pub.drain()
    # The publisher went on draining: with the publish runner it finishes.
    threading.Thread(target=pub.publish_runner, name="publish-late", daemon=True).start()
    pub.drain(timeout=10)
    assert all(f.result(1).publish_ack_future.result(1) for f in futs)
    flights.join(5)
    # Nothing to do: no runner needed.
    Publisher(js).drain(timeout=1)


def test_drain_names_the_cause_when_a_runner_died(js: JetStream) -> None:
    pub = Publisher(js)
    died: list[BaseException] = []

    def user_thread() -> None:
        try:
            pub.publish_runner()
        except KeyboardInterrupt as exc:  # the user's code let it end the runner
            died.append(exc)

    t = threading.Thread(target=user_thread, name="dies", daemon=True)
    t.start()
    threading.Thread(target=pub.flights_runner, name="flights", daemon=True).start()

    def both_run() -> bool:
        with pub._lock:  # as the library reads them: the runners register under it
            return pub._live_runners() == {"publish", "flights"}

    assert wait_for(both_run)
    raise_in(t, KeyboardInterrupt)
    t.join(5)
    assert died
    fut = pub.publish_async("s.a", b"x")
    with pytest.raises(PublisherNotRunningError) as info:
        pub.drain(timeout=20)
    assert isinstance(info.value.__cause__, KeyboardInterrupt)
    threading.Thread(target=pub.publish_runner, name="again", daemon=True).start()
    pub.drain(timeout=10)
    assert fut.result(1).publish_ack_future.result(1).seq == 1


# -- the queue bound -----------------------------------------------------------


def test_a_full_queue_blocks_then_raises(js: JetStream) -> None:
    pub = Publisher(js, max_queued=10, stall_wait=0.3)
    for i in range(10):
        pub.publish_async("s.a", b"%d" % i)
    t0 = time.monotonic()
    with pytest.raises(errors.TooManyStalledMsgsError):
        pub.publish_async("s.a", b"one too many")
    assert time.monotonic() - t0 >= 0.25  # it waited for room first
    assert pub.queued == 10
    # A waiting publish goes on once the runners take from the queue.
    waiting = Publisher(js, max_queued=10, stall_wait=20)
    for i in range(10):
        waiting.publish_async("s.b", b"%d" % i)
    got: list[Flight] = []
    t = threading.Thread(target=lambda: got.append(waiting.publish_async("s.b", b"late")))
    t.start()
    time.sleep(0.2)
    assert not got and t.is_alive()
    waiting.start()
    t.join(10)
    assert got and got[0].result(5).publish_ack_future.result(5)
    waiting.drain(timeout=10)
    # stop() wakes a waiting publish with PublisherClosedError.
    out: list[BaseException] = []

    def blocked() -> None:
        try:
            pub.publish_async("s.a", b"waits")
        except BaseException as exc:
            out.append(exc)

    t = threading.Thread(target=blocked)
    t.start()
    time.sleep(0.1)
    pub.stop()
    t.join(5)
    assert len(out) == 1 and isinstance(out[0], PublisherClosedError)


def test_a_large_burst_completes_with_the_runners_running(js: JetStream) -> None:
    pub = Publisher(js, stall_wait=10.0)  # the default bound: max(4000, 4 * max_in_flight)
    assert pub.max_queued == 4000
    n = 30_000
    with pub:
        futs = [pub.publish_async("s.a", b"%d" % i) for i in range(n)]
        assert pub.queued <= 4000
    assert pub.acked_count == n and _messages(js) == n
    assert eventually(lambda: all(f.done() for f in futs))


def test_bad_queue_arguments(js: JetStream) -> None:
    with pytest.raises(ValueError):
        Publisher(js, max_queued=-1)
    with pytest.raises(ValueError):
        Publisher(js, stall_wait=-1)
    assert Publisher(js, max_in_flight=2000).max_queued == 8000
    unbounded = Publisher(js, max_queued=0)
    for _ in range(5000):
        unbounded.publish_async("s.a", b"x")
    assert unbounded.queued == 5000
    unbounded.stop()
