"""Ordered consumers against a real nats-server: config, order, resets, old instances."""

from __future__ import annotations

import threading
import time

import pytest
from _js import publish_stored, wait_for

import jsclient
from jsclient import errors
from jsclient.jetstream.consume.ordered import OrderedConsumer, OrderedConsumerBusyError
from jsclient.jetstream.context import JetStream
from jsclient.server import NatsServer


@pytest.fixture
def js(nc: jsclient.Client) -> JetStream:
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    return js


def _publish(nc: jsclient.Client, n: int, subject: str = "s.a") -> None:
    publish_stored(nc, subject, (b"m%d" % i for i in range(n)))


def _seq(msg: jsclient.Msg) -> int:
    return msg.metadata.sequence.stream


def test_server_side_config(js: JetStream) -> None:
    oc = js.ordered_consumer("S", name_prefix="ord", filter_subjects="s.b")
    assert isinstance(oc, OrderedConsumer)
    assert oc.name == "ord_1" and oc.stream_name == "S"
    cfg = oc.info().config
    assert str(getattr(cfg.ack_policy, "value", cfg.ack_policy)) == "none"
    assert cfg.mem_storage is True and cfg.num_replicas == 1
    assert cfg.inactive_threshold == 300.0
    assert cfg.filter_subject == "s.b"
    assert oc.cached_info is not None and oc.cached_info.name == "ord_1"


def test_fetch_and_next_in_order_with_filters(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 3, "s.a")
    _publish(nc, 3, "s.b")
    oc = js.ordered_consumer("S", filter_subjects=["s.b"])
    assert [_seq(m) for m in oc.fetch(2, expires=1.0)] == [4, 5]
    assert _seq(oc.next(timeout=1.0)) == 6
    with pytest.raises(errors.TimeoutError):
        oc.next(timeout=0.3)
    starting = js.ordered_consumer("S", deliver_policy="by_start_sequence", opt_start_seq=5)
    assert [_seq(m) for m in starting.fetch(10, expires=0.5)] == [5, 6]


def test_fetch_resets_after_the_consumer_is_deleted(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 6)
    oc = js.ordered_consumer("S")
    assert [_seq(m) for m in oc.fetch(3, expires=1.0)] == [1, 2, 3]
    first = oc.name
    js.delete_consumer("S", first)
    assert [_seq(m) for m in oc.fetch(3, expires=1.0)] == [4, 5, 6]
    assert oc.name != first


def test_unread_batch_is_not_delivered_out_of_order(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 6)
    oc = js.ordered_consumer("S")
    batch = oc.fetch(4, expires=1.0)
    assert _seq(next(batch)) == 1
    # The rest of that batch is abandoned; the next fetch resumes right after 1.
    assert [_seq(m) for m in oc.fetch(5, expires=1.0)] == [2, 3, 4, 5, 6]
    assert list(batch) == []


def test_consume_resets_after_a_deleted_consumer(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 10)
    oc = js.ordered_consumer("S")
    seqs: list[int] = []
    cc = oc.consume(lambda m: seqs.append(_seq(m)), max_messages=5)
    assert wait_for(lambda: len(seqs) == 10)
    first = oc.name
    js.delete_consumer("S", first)
    time.sleep(0.2)
    _publish(nc, 10)
    assert wait_for(lambda: len(seqs) == 20, 5.0)
    assert seqs == list(range(1, 21))
    assert oc.name != first
    cc.stop()
    assert cc.wait(2.0)


def test_gap_and_old_instance_messages(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 5)
    oc = js.ordered_consumer("S", name_prefix="gap")
    with oc.messages(max_messages=10) as it:
        assert [_seq(it.next(timeout=2.0)) for _ in range(5)] == [1, 2, 3, 4, 5]
        feed = it._source.feed  # type: ignore[attr-defined]

        def inject(reply: str) -> None:  # as the reader thread hands a batch over
            feed.q.put(([jsclient.Msg(nc, "s.a", reply, b"x", None, 50, feed.sid)], 1))

        # A message of a replaced instance is dropped without a reset ...
        inject("$JS.ACK.S.gap_0.1.3.3.1700000000000000000.0")
        # ... while a consumer-sequence gap (9 where 6 was due) forces one.
        inject("$JS.ACK.S.gap_1.1.9.9.1700000000000000000.0")
        _publish(nc, 3)
        got = [_seq(it.next(timeout=5.0)) for _ in range(3)]
        assert got == [6, 7, 8]
        assert oc.name == "gap_2"


def test_messages_survive_a_deleted_consumer(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 3)
    oc = js.ordered_consumer("S")
    with oc.messages() as it:
        assert [_seq(it.next(timeout=2.0)) for _ in range(3)] == [1, 2, 3]
        js.delete_consumer("S", oc.name)
        _publish(nc, 3)
        assert [_seq(it.next(timeout=5.0)) for _ in range(3)] == [4, 5, 6]


def test_one_operation_at_a_time(js: JetStream) -> None:
    oc = js.ordered_consumer("S")
    cc = oc.consume(lambda m: None)
    with pytest.raises(OrderedConsumerBusyError):
        oc.fetch(1)
    with pytest.raises(OrderedConsumerBusyError):
        oc.messages()
    cc.stop()
    assert cc.wait(2.0)
    with oc.messages():
        pass
    assert list(oc.fetch_no_wait(1)) == []


def test_reset_gives_up_after_max_attempts(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 2)
    oc = js.ordered_consumer("S", max_reset_attempts=1)
    errs: list[BaseException] = []
    seqs: list[int] = []
    cc = oc.consume(lambda m: seqs.append(_seq(m)), error_cb=errs.append)
    assert wait_for(lambda: len(seqs) == 2)
    js.delete_stream("S")  # its consumers go too, and no new one can be made
    assert cc.wait(5.0)
    assert isinstance(cc.error, errors.StreamNotFoundError)


def test_ordered_consume_keeps_order_across_a_restart(nats_server: NatsServer) -> None:
    reconnected = threading.Event()
    nc = jsclient.connect(
        nats_server.url,
        reconnect_wait=0.1,
        max_reconnect_attempts=-1,
        reconnected_cb=reconnected.set,
    )
    try:
        js = nc.jetstream()
        js.create_stream(name="S", subjects=["s.>"], storage="file")
        _publish(nc, 20)
        oc = js.ordered_consumer("S")
        seqs: list[int] = []
        lock = threading.Lock()

        def cb(msg: jsclient.Msg) -> None:
            with lock:
                seqs.append(_seq(msg))

        cc = oc.consume(cb, expires=2.0, heartbeat=0.5, error_cb=lambda e: None)
        assert wait_for(lambda: len(seqs) == 20)
        nats_server.restart()
        assert reconnected.wait(5.0)
        _publish(nc, 10)
        assert wait_for(lambda: len(seqs) == 30, 15.0), seqs[-5:]
        assert seqs == list(range(1, 31))
        cc.stop()
    finally:
        nc.close()
