"""consume(keepalive=...) and messages(keepalive=...): +WPI while a message is worked on.

With ``ack_wait`` 1 s and 2.5 s of work per message, a message without
keep-alive is delivered again while its handler still runs; with it, each
message is delivered exactly once (``num_delivered`` 1, no redeliveries).
"""

from __future__ import annotations

import threading
import time

import pytest
from _js import eventually, publish_stored

import jsclient
from jsclient.jetstream.consume.keepalive import interval_for
from jsclient.jetstream.context import JetStream

WORK = 2.5  # seconds per message, well past ack_wait
ACK_WAIT = 1.0


@pytest.fixture
def js(nc: jsclient.Client) -> JetStream:
    js = nc.jetstream()
    js.create_stream(name="KA", subjects=["ka.>"])
    return js


def _consumer(js: JetStream, name: str) -> jsclient.jetstream.consume.consumer.Consumer:
    return js.create_consumer("KA", durable_name=name, ack_policy="explicit", ack_wait=ACK_WAIT)


class _Slow:
    """A slow handler that records (payload, num_delivered) per run."""

    def __init__(self) -> None:
        self.runs: list[tuple[bytes, int]] = []
        self.lock = threading.Lock()

    def __call__(self, msg: jsclient.Msg) -> None:
        with self.lock:
            self.runs.append((msg.data, msg.metadata.num_delivered))
        time.sleep(WORK)
        msg.ack()


def test_consume_keepalive_one_delivery(nc: jsclient.Client, js: JetStream) -> None:
    # The second message waits in the buffer while the first is handled: it is
    # kept alive there too.
    publish_stored(nc, "ka.a", [b"0", b"1"])
    c = _consumer(js, "ka")
    slow = _Slow()
    cc = c.consume(slow, keepalive=True)
    try:
        eventually(lambda: len(slow.runs) == 2, 15, "both messages")
        eventually(lambda: c.info().num_ack_pending == 0, 10, "the acks")
    finally:
        cc.stop()
    assert slow.runs == [(b"0", 1), (b"1", 1)]
    info = c.info()
    # Deliveries so far: one per message (a redelivery would be a third).
    assert info.num_redelivered == 0 and info.delivered.consumer_seq == 2, info


def test_consume_without_keepalive_redelivers(nc: jsclient.Client, js: JetStream) -> None:
    # The control: the same handler without keep-alive sees the message again.
    publish_stored(nc, "ka.a", [b"0"])
    c = _consumer(js, "nokeep")
    runs: list[int] = []

    def slow(msg: jsclient.Msg) -> None:
        runs.append(msg.metadata.num_delivered)
        time.sleep(WORK)
        msg.ack()

    cc = c.consume(slow, max_messages=1)
    try:
        eventually(lambda: c.info().num_redelivered >= 1, 10, "a redelivery")
    finally:
        cc.stop()


def test_messages_keepalive_one_delivery(nc: jsclient.Client, js: JetStream) -> None:
    publish_stored(nc, "ka.a", [b"0", b"1"])
    c = _consumer(js, "kam")
    delivered: list[tuple[bytes, int]] = []
    with c.messages(max_messages=1, keepalive=True) as it:
        for _ in range(2):
            msg = it.next(timeout=10)
            delivered.append((msg.data, msg.metadata.num_delivered))
            time.sleep(WORK)  # kept alive meanwhile
            msg.ack()
    assert delivered == [(b"0", 1), (b"1", 1)]
    eventually(lambda: c.info().num_ack_pending == 0, 10, "the acks")
    info = c.info()
    assert info.num_redelivered == 0 and info.delivered.consumer_seq == 2, info


def test_keepalive_interval_and_option(nc: jsclient.Client, js: JetStream) -> None:
    c = _consumer(js, "kai")
    assert interval_for(c.cached_info) == pytest.approx(ACK_WAIT / 3)
    with pytest.raises(ValueError):
        c.consume(lambda m: None, keepalive=-1)
    with pytest.raises(ValueError):
        c.messages(keepalive="often")  # type: ignore[arg-type]
    b = js.create_consumer(
        "KA", durable_name="kab", ack_policy="explicit", ack_wait=30, backoff=[0.6, 30]
    )
    assert interval_for(b.cached_info) == pytest.approx(0.2)  # the shortest step
