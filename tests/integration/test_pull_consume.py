"""consume() and messages() against a real nats-server: refills, statuses, heartbeats, restarts."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from _js import publish_stored, wait_for

import jsclient
from jsclient import errors
from jsclient.api import ConsumerInfo
from jsclient.jetstream.consume.consumer import Consumer
from jsclient.jetstream.context import JetStream
from jsclient.server import NatsServer


@pytest.fixture
def js(nc: jsclient.Client) -> JetStream:
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    return js


def _publish(nc: jsclient.Client, n: int, subject: str = "s.a", payload: bytes = b"x") -> None:
    publish_stored(nc, subject, (payload + b"%d" % i for i in range(n)))


class _Collector:
    def __init__(self, ack: bool = True) -> None:
        self.seqs: list[int] = []
        self.threads: set[str] = set()
        self.errors: list[BaseException] = []
        self.ack = ack

    def __call__(self, msg: jsclient.Msg) -> None:
        self.threads.add(threading.current_thread().name)
        self.seqs.append(msg.metadata.sequence.stream)
        if self.ack:
            msg.ack()


def test_consume_delivers_in_order_on_a_dispatcher_thread(
    nc: jsclient.Client, js: JetStream
) -> None:
    _publish(nc, 50)
    c = js.create_consumer("S", durable_name="d")
    got = _Collector()
    cc = c.consume(got, max_messages=10)  # 30 s expiry: refills cannot be waiting for it
    assert wait_for(lambda: len(got.seqs) == 50, 3.0)
    assert got.seqs == list(range(1, 51))
    (thread,) = got.threads
    assert thread.startswith("jsclient-consume-d-") and thread.rsplit("-", 1)[1].isdigit()
    other = js.create_consumer("S", durable_name="d2").consume(lambda m: None)
    assert other._thread.name.startswith("jsclient-consume-d2-")  # numbered apart
    assert other._thread.name.rsplit("-", 1)[1] != thread.rsplit("-", 1)[1]
    other.stop()
    assert not cc.closed
    stats = c.stats()
    assert stats["delivered"] == 50 and stats["pulls_outstanding"] >= 1
    assert stats["pending_messages"] > 0 and stats["last_heartbeat_age"] < 3.0
    t0 = time.monotonic()
    cc.stop()
    assert cc.wait(2.0) and cc.closed and cc.error is None
    assert time.monotonic() - t0 < 1.5


def test_consume_with_max_messages_one_does_not_stall(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 20)
    c = js.create_consumer("S", durable_name="d")
    got = _Collector()
    cc = c.consume(got, max_messages=1)
    assert wait_for(lambda: len(got.seqs) == 20, 3.0)
    cc.stop()


def test_consume_by_bytes(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 30, payload=b"b" * 100)
    c = js.create_consumer("S", durable_name="d")
    got = _Collector()
    cc = c.consume(got, max_bytes=1024)
    assert wait_for(lambda: len(got.seqs) == 30, 3.0)
    assert got.seqs == list(range(1, 31))
    cc.stop()


def test_consume_validation(js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    cases: list[dict[str, Any]] = [
        {"max_messages": 10, "max_bytes": 100},
        {"max_messages": 10, "threshold_messages": 11},
        {"max_bytes": 100, "threshold_bytes": 200},
        {"threshold_bytes": 10},
        {"expires": 0.5},
        {"heartbeat": 0.1},
        {"expires": 2.0, "heartbeat": 1.5},
        {"max_messages": 0},
    ]
    for kwargs in cases:
        with pytest.raises(ValueError):
            c.consume(lambda m: None, **kwargs)
        with pytest.raises(ValueError):
            c.messages(**kwargs)
    with pytest.raises(TypeError):
        c.consume("not callable")  # type: ignore[arg-type]


def test_stop_is_prompt_and_drops_the_buffer(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 20)
    c = js.create_consumer("S", durable_name="d")
    gate = threading.Event()
    seen: list[int] = []

    def slow(msg: jsclient.Msg) -> None:
        seen.append(1)
        gate.wait(5)

    cc = c.consume(slow, max_messages=20)
    assert wait_for(lambda: len(seen) == 1)
    t0 = time.monotonic()
    cc.stop()
    assert time.monotonic() - t0 < 0.2
    assert not cc.closed  # the callback in progress is still running
    gate.set()
    assert cc.wait(2.0)
    assert len(seen) == 1


def test_drain_delivers_the_buffer_then_ends(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 20)
    c = js.create_consumer("S", durable_name="d")
    gate = threading.Event()
    got: list[int] = []

    def slow(msg: jsclient.Msg) -> None:
        got.append(msg.metadata.sequence.stream)
        gate.wait(5)

    cc = c.consume(slow, max_messages=20)
    assert wait_for(lambda: len(got) == 1)
    time.sleep(0.3)  # the rest arrives in the buffer
    cc.drain()
    gate.set()
    assert cc.wait(3.0)
    assert got == list(range(1, 21))
    assert cc.error is None


def test_deleted_consumer_ends_consume(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    errs: list[BaseException] = []
    cc = c.consume(lambda m: m.ack(), error_cb=errs.append)
    time.sleep(0.2)
    js.delete_consumer("S", "d")
    assert cc.wait(3.0) and cc.closed
    assert isinstance(cc.error, errors.ConsumerDeletedError)
    assert wait_for(lambda: any(isinstance(e, errors.ConsumerDeletedError) for e in errs))


def test_push_consumer_ends_consume_and_messages(js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="push", deliver_subject="deliver.here")
    errs: list[BaseException] = []
    cc = c.consume(lambda m: None, error_cb=errs.append)
    assert cc.wait(3.0)
    assert isinstance(cc.error, errors.ConsumerIsPushBasedError)
    with c.messages() as it, pytest.raises(errors.ConsumerIsPushBasedError):
        it.next(timeout=3.0)
    with pytest.raises(errors.MsgIteratorClosedError):
        it.next(timeout=1.0)


def test_request_limit_warning_goes_to_error_cb(nc: jsclient.Client, js: JetStream) -> None:
    cfg = {"durable_name": "d", "ack_policy": "explicit", "max_batch": 5}
    resp = js._api_request("CONSUMER.CREATE.S.d", {"stream_name": "S", "config": cfg})
    c = Consumer(js, "S", ConsumerInfo.from_response(resp))
    errs: list[BaseException] = []
    cc = c.consume(lambda m: None, max_messages=10, error_cb=errs.append)
    assert wait_for(lambda: len(errs) > 0, 3.0)
    assert isinstance(errs[0], errors.StatusError)
    assert (errs[0].status, errs[0].description) == (409, "Exceeded MaxRequestBatch of 5")
    assert not cc.closed  # a warning, not the end
    cc.stop()


def test_consume_recovers_once_max_waiting_has_room(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d", max_waiting=1)
    holder = c.fetch(1, expires=5.0, heartbeat=0)  # takes the only waiting slot
    time.sleep(0.1)
    errs: list[BaseException] = []
    got = _Collector()
    cc = c.consume(got, expires=2.0, heartbeat=0.5, error_cb=errs.append)
    # nats-server 2.15 drops a refused pull that asked for heartbeats without the
    # 409 Exceeded MaxWaiting it sends otherwise: either way the consume hears of it.
    assert wait_for(lambda: len(errs) > 0, 3.0)
    assert isinstance(errs[0], errors.NoHeartbeatError | errors.StatusError)
    assert not cc.closed
    _publish(nc, 3)
    assert [m.metadata.sequence.stream for m in holder] == [1]
    # Once the slot is free, the missed-heartbeat recovery pulls again.
    assert wait_for(lambda: got.seqs == [2, 3], 5.0)
    cc.stop()


def test_missing_heartbeats_warn_when_the_server_stops(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url, reconnect_wait=0.1, max_reconnect_attempts=-1)
    try:
        js = nc.jetstream()
        js.create_stream(name="S", subjects=["s.>"])
        c = js.create_consumer("S", durable_name="d")
        errs: list[BaseException] = []
        cc = c.consume(lambda m: None, expires=2.0, heartbeat=0.5, error_cb=errs.append)
        time.sleep(1.2)  # heartbeats keep it quiet meanwhile
        assert errs == []
        nats_server.stop()
        t0 = time.monotonic()
        assert wait_for(lambda: any(isinstance(e, errors.NoHeartbeatError) for e in errs), 3.0)
        assert time.monotonic() - t0 < 1.5 + 0.5  # within 3 x heartbeat (+ scheduling)
        time.sleep(1.2)
        # One warning per outage, not one per interval (a graceful stop also
        # sends "409 Server Shutdown", passed on as a StatusError warning).
        assert [e for e in errs if not isinstance(e, errors.StatusError)] == [errs[-1]]
        assert not cc.closed
        cc.stop()
    finally:
        nc.close()


def test_messages_raise_no_heartbeat_and_keep_going(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url, reconnect_wait=0.1, max_reconnect_attempts=-1)
    try:
        js = nc.jetstream()
        js.create_stream(name="S", subjects=["s.>"], storage="file")
        c = js.create_consumer("S", durable_name="d")
        with c.messages(expires=2.0, heartbeat=0.5) as it:
            nats_server.kill()
            with pytest.raises(errors.NoHeartbeatError):
                it.next(timeout=3.0)
            nats_server.start()
            assert wait_for(lambda: nc.is_connected, 5.0)
            _publish(nc, 1)
            assert it.next(timeout=5.0).data == b"x0"
    finally:
        nc.close()


def test_consume_survives_a_server_restart(nats_server: NatsServer) -> None:
    total = 300
    nc = jsclient.connect(nats_server.url, reconnect_wait=0.1, max_reconnect_attempts=-1)
    try:
        js = nc.jetstream()
        js.create_stream(name="S", subjects=["s.>"], storage="file")
        _publish(nc, total)
        c = js.create_consumer("S", durable_name="d", ack_wait=2.0)
        deliveries: list[tuple[int, bool]] = []  # (stream seq, ack confirmed)

        def cb(msg: jsclient.Msg) -> None:
            seq = msg.metadata.sequence.stream
            try:
                msg.ack_sync(timeout=1.0)
            except errors.Error:
                deliveries.append((seq, False))  # unconfirmed: it may come again
                return
            deliveries.append((seq, True))
            time.sleep(0.002)

        cc = c.consume(cb, max_messages=20, expires=2.0, heartbeat=0.5, error_cb=lambda e: None)
        assert wait_for(lambda: len(deliveries) >= 50)
        nats_server.restart()
        assert len(deliveries) < total  # the restart came mid-stream
        everything = set(range(1, total + 1))
        assert wait_for(lambda: {s for s, _ in deliveries} == everything, 20.0), "lost messages"
        # Unconfirmed acks may still be redelivered (after ack_wait): let them settle.
        assert wait_for(lambda: c.info().num_ack_pending == 0, 10.0)
        confirmed: set[int] = set()
        for seq, ok in list(deliveries):
            assert seq not in confirmed, f"message {seq} came again after its ack was confirmed"
            if ok:
                confirmed.add(seq)
        assert c.stats()["reconnects"] >= 1
        assert not cc.closed
        cc.stop()
    finally:
        nc.close()


def test_messages_iterator(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 5)
    c = js.create_consumer("S", durable_name="d")
    with c.messages(max_messages=2) as it:
        seqs = []
        for msg in it:
            seqs.append(msg.metadata.sequence.stream)
            msg.ack()
            if len(seqs) == 5:
                break
        assert seqs == [1, 2, 3, 4, 5]
        t0 = time.monotonic()
        with pytest.raises(errors.TimeoutError):
            it.next(timeout=0.3)
        assert time.monotonic() - t0 < 1.0
    assert it.closed
    with pytest.raises(errors.MsgIteratorClosedError):
        it.next()
    assert list(it) == []


def test_messages_stop_wakes_a_blocked_next(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    it = c.messages()
    outcome: list[BaseException] = []

    def reader() -> None:
        try:
            it.next(timeout=10.0)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    it.stop()
    t.join(2.0)
    assert time.monotonic() - t0 < 0.5
    assert isinstance(outcome[0], errors.MsgIteratorClosedError)


def test_messages_drain_returns_the_buffer_first(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 5)
    c = js.create_consumer("S", durable_name="d")
    it = c.messages(max_messages=10)
    first = it.next(timeout=2.0)
    assert wait_for(lambda: c.stats()["delivered"] >= 1)
    time.sleep(0.2)  # the other four wait in the buffer
    it.drain()
    rest = list(it)
    assert [m.metadata.sequence.stream for m in [first, *rest]] == [1, 2, 3, 4, 5]
    assert it.closed


def test_messages_deleted_consumer_raises(js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    with c.messages() as it:
        deleter = threading.Timer(0.2, js.delete_consumer, ("S", "d"))
        deleter.start()
        with pytest.raises(errors.ConsumerDeletedError):
            it.next(timeout=5.0)
        deleter.join(5.0)
        assert isinstance(it.error, errors.ConsumerDeletedError)
        with pytest.raises(errors.MsgIteratorClosedError):
            it.next(timeout=1.0)


def test_connection_close_ends_consume(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    errs: list[BaseException] = []
    cc = c.consume(lambda m: None, error_cb=errs.append)
    nc.close()
    assert cc.wait(3.0)
    assert isinstance(cc.error, errors.ConnectionClosedError)
    assert errs == []


def test_hundred_thousand_messages_each_once(nc: jsclient.Client, js: JetStream) -> None:
    total = 100_000
    payload = b"0123456789abcdef"
    for i in range(total):
        nc.publish("s.bulk", payload)
        if i % 20_000 == 19_999:
            nc.flush(10)
    nc.flush(10)
    assert wait_for(lambda: js.stream("S").info().state.messages == total, 20.0)
    c = js.create_consumer("S", durable_name="bulk", max_ack_pending=-1)
    seen = bytearray(total + 1)
    count = [0]
    done = threading.Event()

    def cb(msg: jsclient.Msg) -> None:
        seen[msg.metadata.sequence.stream] += 1
        msg.ack()
        count[0] += 1
        if count[0] == total:
            done.set()

    cc = c.consume(cb, max_messages=1000)
    assert done.wait(30.0), f"only {count[0]} of {total}"
    nc.flush(10)
    cc.stop()
    assert cc.wait(2.0)
    assert seen[1:] == b"\x01" * total
    assert wait_for(lambda: c.info().num_ack_pending == 0, 5.0)
