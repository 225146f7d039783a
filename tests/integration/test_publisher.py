"""The managed publisher (jsclient.jetstream.publish.publisher) against a real server.

Runners on user threads, an executor and start(); hold/refill seen through the
listener; per-flight timeouts with the server down; retries across a restart
without duplicates; expectation failures; drain and stop.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import pytest
from _js import wait_for

from jsclient import errors
from jsclient.api import PubAck
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.jetstream.publish.publisher import (
    Flight,
    Publisher,
    PublisherClosedError,
    PublisherError,
    PublisherListener,
    PublisherNotRunningError,
    RetryConfig,
)
from jsclient.server import NatsServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def js(nc: Client) -> JetStream:
    j = nc.jetstream()
    j.create_stream(name="S", subjects=["s.>"], storage="memory")
    return j


class Recorder(PublisherListener):
    """Every callback, in order, with the publisher's in_flight at that moment."""

    def __init__(self) -> None:
        self.pub: Publisher | None = None
        self.lock = threading.Lock()
        self.events: list[tuple[str, Any]] = []
        self.timeouts: list[tuple[Flight, float]] = []
        self.retry_errors: list[BaseException | None] = []
        self.threads: set[str] = set()

    def _add(self, kind: str, value: Any) -> None:
        with self.lock:
            self.events.append((kind, value))
            self.threads.add(threading.current_thread().name)

    def published(self, flight: Flight) -> None:
        assert self.pub is not None
        self._add("published", self.pub.in_flight)

    def acked(self, flight: Flight) -> None:
        self._add("acked", flight)

    def completed_exceptionally(self, flight: Flight) -> None:
        self._add("failed", flight)

    def timeout(self, flight: Flight) -> None:
        with self.lock:
            self.timeouts.append((flight, time.monotonic() - flight.publish_time))
        self._add("timeout", flight)

    def retrying(self, flight: Flight) -> None:
        with self.lock:
            self.retry_errors.append(flight.error)
        self._add("retrying", flight)

    def paused(self, in_flight: int, max_in_flight: int, refill_allowed_at: int) -> None:
        self._add("paused", in_flight)

    def resumed(self, in_flight: int, max_in_flight: int, refill_allowed_at: int) -> None:
        self._add("resumed", in_flight)

    def of(self, kind: str) -> list[Any]:
        with self.lock:
            return [v for k, v in self.events if k == kind]


def _publisher(js: JetStream, **kwargs: Any) -> tuple[Publisher, Recorder]:
    rec = Recorder()
    pub = Publisher(js, listener=rec, **kwargs)
    rec.pub = pub
    return pub, rec


def _publish_n(pub: Publisher, n: int, subject: str = "s.a") -> list[Future[Flight]]:
    return [pub.publish_async(subject, b"m%d" % i) for i in range(n)]


def _acks(futs: list[Future[Flight]], timeout: float = 20.0) -> list[PubAck]:
    return [f.result(timeout).publish_ack_future.result(timeout) for f in futs]


# -- runners -----------------------------------------------------------------


def test_runners_on_plain_threads(js: JetStream) -> None:
    pub, rec = _publisher(js, id_prefix="P")
    futs = _publish_n(pub, 300)  # queued before any runner runs
    threads = [
        threading.Thread(target=pub.publish_runner, name="user-publish"),
        threading.Thread(target=pub.flights_runner, name="user-flights"),
    ]
    for t in threads:
        t.start()
    acks = _acks(futs)
    assert sorted(a.seq for a in acks) == list(range(1, 301))
    flights = [f.result() for f in futs]
    # <id_prefix>-<the publisher's own NUID>-<n>: unique across publishers and restarts
    base = f"P-{pub._id_base.split('-', 1)[1]}"
    assert len(base) == 2 + 22
    assert [f.id for f in flights] == [f"{base}-{i}" for i in range(1, 301)]
    assert flights[7].body == b"m7" and flights[7].subject == "s.a" and flights[7].attempts == 1
    pub.drain(timeout=10)
    for t in threads:
        t.join(5)
        assert not t.is_alive()
    assert rec.threads == {"user-publish", "user-flights"}
    assert len(rec.of("published")) == len(rec.of("acked")) == 300
    assert (pub.acked_count, pub.failed_count, pub.timed_out_count) == (300, 0, 0)
    assert (pub.in_flight, pub.queued, pub.held) == (0, 0, False)
    assert js.stream("S").info().state.messages == 300


def test_runners_on_executor(js: JetStream) -> None:
    pub, rec = _publisher(js, max_in_flight=20)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="exec") as pool:
        runs = [pool.submit(pub.publish_runner), pool.submit(pub.flights_runner)]
        futs = _publish_n(pub, 500)
        pub.drain(timeout=20)
        wait(runs, timeout=5)
        assert all(r.done() and r.exception() is None for r in runs)
    assert all(f.result(0).publish_ack_future.done() for f in futs)
    assert pub.acked_count == 500 and len(rec.of("acked")) == 500
    assert all(name.startswith("exec") for name in rec.threads)
    # A second runner of the same kind is refused.
    pub2 = Publisher(js)
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(pub2.flights_runner)
        time.sleep(0.05)
        with pytest.raises(PublisherError):
            pub2.flights_runner()
        pub2.stop()
        assert first.result(5) is None


def test_start_and_context_manager(js: JetStream) -> None:
    with Publisher(js, id_prefix="ctx") as pub:
        names = {t.name for t in threading.enumerate()}
        assert {"jsclient-publisher-ctx", "jsclient-flights-ctx"} <= names
        futs = _publish_n(pub, 100)
    # drained on exit: every future done, threads gone, no new messages
    assert all(f.done() and f.result().publish_ack_future.done() for f in futs)
    assert not {"jsclient-publisher-ctx", "jsclient-flights-ctx"} & {
        t.name for t in threading.enumerate()
    }
    with pytest.raises(PublisherClosedError):
        pub.publish_async("s.a", b"late")
    assert isinstance(PublisherClosedError(), errors.JetStreamError)
    pub2 = Publisher(js).start()
    try:
        with pytest.raises(PublisherError):
            pub2.start()
        assert pub2.publish_async("s.b", b"x").result(5).publish_ack_future.result(5).seq == 101
    finally:
        pub2.drain(timeout=5)


# -- hold / refill -------------------------------------------------------------


def test_hold_and_refill_seen_by_listener(js: JetStream) -> None:
    pub, rec = _publisher(js, max_in_flight=10, refill_allowed_at=3)
    futs = _publish_n(pub, 400)
    pub.start()
    _acks(futs)
    pub.drain(timeout=10)
    events = [(k, v) for k, v in rec.events if k in ("published", "paused", "resumed")]
    seen = [v for k, v in events if k == "published"]
    # never more than max_in_flight awaiting acks (a fast ack may leave before its report)
    assert len(seen) == 400 and max(seen) == 10
    assert rec.of("paused") and rec.of("resumed")
    state = "running"
    for kind, value in events:
        if kind == "paused":
            assert state == "running" and value == 10
            state = "held"
        elif kind == "resumed":
            assert state == "held" and value <= 3
            state = "running"
        else:
            assert state == "running", "published while held"


def test_default_refill_is_a_full_sawtooth(js: JetStream) -> None:
    pub, rec = _publisher(js, max_in_flight=5)
    futs = _publish_n(pub, 50)
    pub.start()
    _acks(futs)
    pub.drain(timeout=10)
    # In flight when each publish is reported: never over max_in_flight (acks
    # that beat their report under load may make every count lower).
    assert max(rec.of("published")) <= 5
    # A full sawtooth: held at 5, lifted only once all 5 are acked.
    assert set(rec.of("paused")) <= {5}
    assert set(rec.of("resumed")) <= {0}


class _FakeStream:
    """A stand-in stream on a core subject: a thread that answers each publish
    with a PubAck, ``delay`` seconds after the previous answer, in order.
    ``silent`` lists the (1-based) publishes it never answers."""

    def __init__(self, nc: Client, subject: str, delay: float, silent: tuple[int, ...] = ()):
        self.nc = nc
        self.sub = nc.subscribe(subject)
        nc.flush()
        self.delay = delay
        self.silent = silent
        self.seq = 0
        self.got = 0  # publishes received
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="fake-stream", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        got = 0
        while not self.stop.is_set():
            try:
                m = self.sub.next_msg(timeout=0.1)
            except errors.TimeoutError:
                continue
            except errors.Error:
                return
            got += 1
            self.got = got
            if got in self.silent:
                continue
            time.sleep(self.delay)
            self.seq += 1
            self.nc.publish(m.reply, b'{"stream":"S","seq":%d}' % self.seq)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sub.unsubscribe()


def test_refill_threshold_with_acks_one_by_one(nc: Client) -> None:
    fake = _FakeStream(nc, "fake.>", delay=0.001)
    try:
        pub, rec = _publisher(nc.jetstream(), max_in_flight=10, refill_allowed_at=3)
        futs = _publish_n(pub, 60, "fake.x")
        with pub:
            pass
        assert [f.result(0).publish_ack_future.result(0).seq for f in futs] == list(range(1, 61))
        resumed = rec.of("resumed")
        assert len(resumed) >= 5 and set(resumed) <= {0, 1, 2, 3} and 3 in resumed
        assert max(rec.of("published")) == 10 and set(rec.of("paused")) == {10}
    finally:
        fake.close()


# -- timeouts ------------------------------------------------------------------


def test_per_flight_timeout_with_server_down(nats_server: NatsServer, nc: Client) -> None:
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"], storage="memory")
    nats_server.stop()
    deadline = time.monotonic() + 5
    while nc.is_connected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not nc.is_connected
    pub, rec = _publisher(js, wait_timeout=0.5, max_in_flight=20, refill_allowed_at=10)
    pub.start()
    futs = []
    for i in range(40):  # staggered publish times, two windows
        futs.append(pub.publish_async("s.a", b"%d" % i))
        time.sleep(0.005)
    for f in futs:
        with pytest.raises(errors.TimeoutError):
            f.result(10).publish_ack_future.result(10)
    with pytest.raises(TimeoutError):  # the builtin catches it too
        futs[0].result().publish_ack_future.result()
    pub.drain(timeout=5)
    assert pub.timed_out_count == 40 and len(rec.timeouts) == 40 and not rec.of("acked")
    assert all(f.timed_out and isinstance(f.error, errors.TimeoutError) for f, _ in rec.timeouts)
    delays = [d for _, d in rec.timeouts]
    # each timed out on its own clock: not before wait_timeout, and not after
    # wait_timeout + poll_time (+ scheduling margin), whatever came before it
    assert min(delays) >= 0.5
    assert max(delays) <= 0.5 + 0.1 + 0.15, delays


def test_timeouts_and_acks_are_not_head_of_line(nc: Client) -> None:
    fake = _FakeStream(nc, "fake.>", delay=0.0, silent=(1,))  # the first ack never comes
    try:
        pub, rec = _publisher(nc.jetstream(), wait_timeout=1.0, max_in_flight=100)
        t0 = time.monotonic()
        pub.start()
        futs = _publish_n(pub, 20, "fake.x")
        acked = [f.result(5).publish_ack_future.result(5) for f in futs[1:]]
        took = time.monotonic() - t0
        assert len(acked) == 19 and took < 0.5, took  # not held up by the silent first flight
        with pytest.raises(errors.TimeoutError):
            futs[0].result().publish_ack_future.result(5)
        ((flight, delay),) = rec.timeouts
        assert flight.id.endswith("-1") and 1.0 <= delay <= 1.0 + 0.1 + 0.15
        pub.drain(timeout=5)
    finally:
        fake.close()


# -- retries -------------------------------------------------------------------


def test_retries_across_restart_without_duplicates(nats_server: NatsServer, nc: Client) -> None:
    js = nc.jetstream()
    js.create_stream(name="F", subjects=["f.>"], storage="file")
    n = 3000
    retry = RetryConfig(attempts=10, backoff=(0.2,))
    pub, rec = _publisher(js, retry=retry, max_in_flight=100, refill_allowed_at=50)
    futs = _publish_n(pub, n, "f.x")
    pub.start()
    # Killed, not stopped: a graceful stop may ack all that is in flight first.
    # Restart again (at most twice more) until some publish was caught.
    for at in (300, 1100, 1900):
        deadline = time.monotonic() + 10
        while (pub.acked_count < at or pub.in_flight < 50) and time.monotonic() < deadline:
            time.sleep(0.001)
        nats_server.restart(down_time=0.5, kill=True)  # with 50..100 publishes in flight
        if pub.retried_count:
            break
    pub.drain(timeout=40)
    acks = _acks(futs, timeout=1)  # none failed
    counts = (pub.acked_count, pub.failed_count, pub.timed_out_count)
    assert counts == (n, 0, 0), counts
    # the flights in flight at the disconnect failed and were published again
    retried = rec.of("retrying")
    assert pub.retried_count == len(retried) >= 1
    assert all(f.attempts >= 2 and f.ack is not None and f.error is None for f in retried)
    # lost with the connection, or (just after the restart) a stream not back yet
    assert any(isinstance(e, errors.PublishDisconnectedError) for e in rec.retry_errors)
    assert all(
        isinstance(e, (errors.PublishDisconnectedError, errors.NoStreamResponseError))
        for e in rec.retry_errors
    ), rec.retry_errors
    state = js.stream("F").info().state
    assert (state.messages, state.last_seq) == (n, n)
    # every flight maps to its own stored message (a duplicate ack names the first copy)
    assert len({a.seq for a in acks}) == n


def test_ack_timeouts_while_disconnected_are_retried(nats_server: NatsServer, nc: Client) -> None:
    js = nc.jetstream()
    js.create_stream(name="F", subjects=["f.>"], storage="file")
    nats_server.stop(keep_store=True)  # same port and store on start()
    deadline = time.monotonic() + 5
    while nc.is_connected and time.monotonic() < deadline:
        time.sleep(0.01)
    retry = RetryConfig(attempts=50, backoff=(0.1,))
    pub, rec = _publisher(js, retry=retry, wait_timeout=0.3)
    pub.start()
    futs = _publish_n(pub, 5, "f.x")
    time.sleep(1.0)  # every attempt sits in the reconnect buffer and times out
    assert pub.acked_count == 0 and pub.timed_out_count == 0
    nats_server.start()
    pub.drain(timeout=20)
    _acks(futs, timeout=1)
    retried = rec.of("retrying")
    assert len(retried) >= 5 and {f.id for f in retried} == {f.result().id for f in futs}
    # the ack timeouts themselves were retried: each flight's first retry is
    # a timeout of an attempt that was never sent (withdrawn from the reconnect
    # buffer, so not stored); once reconnected, a server still recovering its
    # stream may answer 503 or more slowly than wait_timeout (a busy machine)
    first: dict[int, BaseException | None] = {}
    for flight, exc in zip(retried, rec.retry_errors, strict=True):
        first.setdefault(flight.id, exc)
    assert len(first) == 5
    assert all(
        isinstance(e, errors.PublishAckTimeoutError) and e.sent is False and "never sent" in str(e)
        for e in first.values()
    ), first
    assert all(
        isinstance(e, (errors.PublishAckTimeoutError, errors.NoStreamResponseError))
        for e in rec.retry_errors
    ), rec.retry_errors
    assert all(f.result().attempts >= 2 for f in futs)
    # the attempts that timed out never left: one copy each reached the stream
    assert js.stream("F").info().state.messages == 5


def test_a_late_disconnect_event_leaves_buffered_sends_alone(
    nats_server: NatsServer, nc: Client
) -> None:
    # The library hears of a lost socket on its events thread, a moment after
    # the connection state changed. Sends made in that moment went to the
    # reconnect buffer, not to the lost socket: their acks are not lost, and
    # the event must not fail them (it did, and they were sent twice).
    js = nc.jetstream()
    js.create_stream(name="F", subjects=["f.>"], storage="file")
    nats_server.stop(keep_store=True)
    assert wait_for(lambda: not nc.is_connected)
    pub, rec = _publisher(js, retry=RetryConfig(attempts=5, backoff=(0.1,)), wait_timeout=10.0)
    pub.start()
    futs = _publish_n(pub, 3, "f.x")
    assert all(f.result(5).attempts == 1 for f in futs)  # written (into the buffer)
    assert wait_for(lambda: pub._on_conn_event in nc._listeners)  # the flights runner listens
    nc._notify("disconnected")  # that loss's event, arriving after the sends
    time.sleep(0.3)  # the events thread has run it (a retry would be due by now)
    assert rec.of("retrying") == [] and pub.in_flight == 3
    nats_server.start()
    assert sorted(a.seq for a in _acks(futs, timeout=10)) == [1, 2, 3]
    pub.drain(timeout=10)
    assert all(f.result().attempts == 1 for f in futs) and rec.of("retrying") == []
    assert js.stream("F").info().state.messages == 3


def test_ack_timeout_with_msg_ids_is_retried(nc: Client) -> None:
    # The stand-in stream drops the first publish (as a stream leader stepping
    # down does): with retries on, every flight carries a Nats-Msg-Id, so its
    # ack timeout is retried like a 503 instead of failing the message.
    fake = _FakeStream(nc, "fake.>", delay=0.0, silent=(1,))
    try:
        retry = RetryConfig(attempts=3, backoff=(0.05,), probe_after=None)
        pub, rec = _publisher(nc.jetstream(), wait_timeout=0.5, retry=retry)
        with pub:
            fut = pub.publish_async("fake.x", b"dropped once")
        flight = fut.result(5)
        assert flight.publish_ack_future.result(5).seq == 1
        assert flight.attempts == 2 and not flight.timed_out and flight.error is None
        assert pub.timed_out_count == 0 and not rec.timeouts
        # a timeout of a send that went out: the outcome was unknown
        assert [(type(e), e.sent) for e in rec.retry_errors] == [
            (errors.PublishAckTimeoutError, True)
        ]
        assert fake.got == 2
    finally:
        fake.close()


def test_stall_is_probed_and_everything_waiting_is_resent(nc: Client) -> None:
    # The stand-in stream drops the first five publishes (a leader that died
    # with them) and answers from then on. Without probing they would wait out
    # wait_timeout (10 s); the probe re-sends the oldest once nothing has
    # answered for probe_after, and its ack re-sends the other four at once.
    fake = _FakeStream(nc, "fake.>", delay=0.0, silent=(1, 2, 3, 4, 5))
    try:
        retry = RetryConfig(attempts=2, probe_after=0.2)
        pub, rec = _publisher(nc.jetstream(), wait_timeout=10.0, retry=retry)
        t0 = time.monotonic()
        with pub:
            futs = _publish_n(pub, 5, "fake.x")
        took = time.monotonic() - t0
        acks = _acks(futs, timeout=1)
        assert sorted(a.seq for a in acks) == [1, 2, 3, 4, 5]
        assert took < 2.0, took  # one probe interval and a round trip, not wait_timeout
        # re-sends within the first attempt: no retry, no timeout
        assert all(f.result().attempts == 1 for f in futs) and not rec.of("retrying")
        assert pub.timed_out_count == 0 and fake.got == 10
    finally:
        fake.close()


def test_no_probe_without_retries(nc: Client) -> None:
    fake = _FakeStream(nc, "fake.>", delay=0.0, silent=(1,))
    try:
        pub, _ = _publisher(nc.jetstream(), wait_timeout=0.6)
        with pub:
            fut = pub.publish_async("fake.x", b"dropped")
        with pytest.raises(errors.TimeoutError):
            fut.result(5).publish_ack_future.result(5)
        assert fake.got == 1  # never sent again: without a Nats-Msg-Id it is not safe
    finally:
        fake.close()


def test_ack_timeout_without_retries_still_times_out(nc: Client) -> None:
    fake = _FakeStream(nc, "fake.>", delay=0.0, silent=(1,))
    try:
        pub, _ = _publisher(nc.jetstream(), wait_timeout=0.3)
        with pub:
            fut = pub.publish_async("fake.x", b"dropped")
        with pytest.raises(errors.TimeoutError):
            fut.result(5).publish_ack_future.result(5)
        assert pub.timed_out_count == 1 and fake.got == 1
    finally:
        fake.close()


def test_retry_sends_flight_id_as_msg_id(js: JetStream) -> None:
    with Publisher(js, id_prefix="R", retry=RetryConfig()) as pub:
        a = pub.publish_async("s.a", b"1")
        b = pub.publish_async("s.a", b"2", msg_id="mine")
        c = pub.publish_async("s.a", b"3", headers={"Nats-Msg-Id": "hdr"})
    with Publisher(js, id_prefix="N") as plain:
        d = plain.publish_async("s.a", b"4")
    stream = js.stream("S")
    seqs = [f.result().publish_ack_future.result().seq for f in (a, b, c, d)]
    ids = [(stream.get_msg(s).headers or {}).get("Nats-Msg-Id") for s in seqs]
    assert ids[1:] == ["mine", "hdr", None] and ids[0] == a.result().id
    assert ids[0].startswith("R-") and ids[0].endswith("-1") and len(ids[0]) == 2 + 22 + 2


def test_no_stream_is_retried_then_fails(js: JetStream) -> None:
    cfg = RetryConfig(attempts=2, backoff=(0.05,))
    pub, rec = _publisher(js, retry=cfg)
    with pub:
        fut = pub.publish_async("nowhere.a", b"x")
    flight = fut.result()
    with pytest.raises(errors.NoStreamResponseError):
        flight.publish_ack_future.result(0)
    assert flight.attempts == 2 and not flight.expectation_failed and not flight.timed_out
    assert rec.of("retrying") == [flight] and rec.of("failed") == [flight]
    assert pub.failed_count == 1 and pub.retried_count == 1


def test_expectation_failure_is_reported_and_not_retried(js: JetStream) -> None:
    js.publish("s.a", b"first")
    pub, rec = _publisher(js, retry=RetryConfig(attempts=5, backoff=(0.01,)))
    with pub:
        bad = pub.publish_async("s.a", b"x", expected_last_seq=99)
        stream_bad = pub.publish_async("s.a", b"y", expected_stream="OTHER")
        good = pub.publish_async("s.b", b"z", expected_stream="S")
    assert good.result().publish_ack_future.result().seq == 2
    for fut, err in (
        (bad, errors.WrongLastSequenceError),
        (stream_bad, errors.StreamNotMatchError),
    ):
        flight = fut.result()  # it was published
        with pytest.raises(err):
            flight.publish_ack_future.result(0)
        assert flight.expectation_failed and flight.attempts == 1
        assert isinstance(flight.error, err)
        assert flight.options in ({"expected_last_seq": 99}, {"expected_stream": "OTHER"})
    assert pub.retried_count == 0 and not rec.of("retrying")
    assert sorted(f.id for f in rec.of("failed")) == sorted(
        (bad.result().id, stream_bad.result().id)
    )


# -- drain / stop / errors -----------------------------------------------------


def test_drain_waits_for_everything_and_then_refuses(js: JetStream) -> None:
    pub, rec = _publisher(js, max_in_flight=7)
    futs = _publish_n(pub, 250)
    with pytest.raises(PublisherNotRunningError):
        pub.drain()  # nothing runs the loops yet: an error, not a wait forever
    with pytest.raises(PublisherClosedError):
        pub.publish_async("s.a", b"refused while draining")
    pub.start()
    pub.drain(timeout=10)
    assert all(f.done() and f.result().publish_ack_future.done() for f in futs)
    assert pub.acked_count == 250 and len(rec.of("acked")) == 250
    with pytest.raises(PublisherClosedError):
        pub.publish_async("s.a", b"after drain")


def test_stop_abandons_and_refuses(js: JetStream) -> None:
    pub = Publisher(js)
    queued = _publish_n(pub, 5)
    pub.stop()
    for f in queued:
        with pytest.raises(PublisherClosedError):
            f.result(1)
    with pytest.raises(PublisherClosedError):
        pub.publish_async("s.a", b"after stop")
    with pytest.raises(PublisherClosedError):
        pub.start()

    running = Publisher(js, poll_time=0.05).start()
    assert running.publish_async("s.a").result(5).publish_ack_future.result(5).seq == 1
    t0 = time.monotonic()
    running.stop()
    assert time.monotonic() - t0 < 1.0
    assert not any(t.name.startswith("jsclient-publisher-") for t in threading.enumerate())
    # a runner called after stop returns at once
    running.publish_runner()
    running.flights_runner()


def test_stop_while_held_publishes_nothing_more(nc: Client) -> None:
    # The stand-in stream never answers: the window fills and stays full, and
    # the next batch waits (encoded, not written) for room that never comes.
    fake = _FakeStream(nc, "fake.>", delay=0.0, silent=tuple(range(1, 100)))
    try:
        pub, rec = _publisher(nc.jetstream(), max_in_flight=5, wait_timeout=30)
        futs = _publish_n(pub, 20, "fake.x")
        pub.start()
        deadline = time.monotonic() + 5
        while not rec.of("paused") and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # time to encode the next batch
        assert rec.of("paused") == [5] and pub.in_flight == 5 and pub.queued < 15
        pub.stop()
        published = [f for f in futs if f.done() and f.exception() is None]
        assert len(published) == 5 and published == futs[:5]
        for f in futs[5:]:
            with pytest.raises(PublisherClosedError):
                f.result(1)
        for f in futs:
            with pytest.raises(PublisherClosedError):
                f.publish_ack_future.result(1)
        nc.flush()
        time.sleep(0.1)
        assert fake.sub.delivered == 5  # nothing was written after the window filled
        assert not len(nc._mux)  # no reply waiter left behind
        assert pub.failed_count == 20 and pub.in_flight == pub.queued == 0
    finally:
        fake.close()


def test_futures_cannot_be_cancelled(js: JetStream) -> None:
    pub = Publisher(js)
    fut = pub.publish_async("s.a", b"x")
    assert not fut.cancel()  # queued: its fate is the publisher's
    with pub:
        pass
    flight = fut.result(0)
    assert not flight.publish_ack_future.cancel()
    assert flight.publish_ack_future.result(0).seq == 1 and flight.ack is not None


def test_listener_exceptions_never_kill_a_runner(
    js: JetStream, caplog: pytest.LogCaptureFixture
) -> None:
    class Boom(PublisherListener):
        calls = 0

        def published(self, flight: Flight) -> None:
            Boom.calls += 1
            raise RuntimeError("listener bug")

        acked = published

        def paused(self, in_flight: int, max_in_flight: int, refill_allowed_at: int) -> None:
            raise ValueError("listener bug")

        def resumed(self, in_flight: int, max_in_flight: int, refill_allowed_at: int) -> None:
            raise ValueError("listener bug")

    with Publisher(js, listener=Boom(), max_in_flight=3) as pub:
        futs = _publish_n(pub, 30)
    assert len(_acks(futs)) == 30 and Boom.calls == 60
    logged = [r for r in caplog.records if "publisher listener" in r.getMessage()]
    assert len(logged) >= 60 and all(r.exc_info for r in logged)


def test_bad_arguments(js: JetStream) -> None:
    with pytest.raises(ValueError):
        Publisher(js, max_in_flight=0)
    with pytest.raises(ValueError):
        Publisher(js, max_in_flight=5, refill_allowed_at=5)
    with pytest.raises(ValueError):
        Publisher(js, wait_timeout=0)
    with pytest.raises(ValueError):
        RetryConfig(attempts=0)
    with pytest.raises(ValueError):
        RetryConfig(backoff=())
    pub = Publisher(js)
    with pytest.raises(TypeError):
        pub.publish_async("s.a", b"x", ack_timeout=1.0)
    assert len(pub.id_prefix) == 22 and RetryConfig().attempts == 2
    # short capped waits, shortened by up to 20 % jitter
    assert 0.08 <= RetryConfig().delay(1) <= 0.1 and 0.4 <= RetryConfig().delay(99) <= 0.5
    assert RetryConfig(jitter=0).delay(2) == 0.25 and RetryConfig(jitter=0).delay(99) == 0.5
    with pytest.raises(ValueError):
        RetryConfig(jitter=1.5)
    with pytest.raises(ValueError):
        RetryConfig(probe_after=0)
    pub.stop()
