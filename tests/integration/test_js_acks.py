"""Acknowledgements and metadata of JetStream messages against a real server.

Messages are pulled by publishing to ``CONSUMER.MSG.NEXT`` with a core inbox as reply, so these
tests depend only on the core client and the JetStream context.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import nats.errors
import pytest

from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.msg import Msg

NEXT = "$JS.API.CONSUMER.MSG.NEXT.S.C"


@pytest.fixture
def js(nc: Client) -> JetStream:
    j = nc.jetstream()
    j.create_stream(name="S", subjects=["s.>"], storage="memory")
    return j


class Puller:
    """Pulls from consumer S/C into an inbox subscription.

    JetStream delivers a pulled message under its stream subject (routed by the
    subscription id), so it cannot come back through the request/reply mux.
    """

    def __init__(self, nc: Client) -> None:
        self.nc = nc
        self.inbox = nc.new_inbox()
        self.sub = nc.subscribe(self.inbox)

    def _ask(self, body: dict[str, object], wait: float) -> Msg:
        self.nc.publish(NEXT, json.dumps(body).encode(), reply=self.inbox)
        return self.sub.next_msg(timeout=wait)

    def pull(self, expires: float = 2.0) -> Msg:
        """One message, waiting up to ``expires`` seconds."""
        msg = self._ask({"batch": 1, "expires": int(expires * 1e9)}, expires + 1.0)
        assert msg.status is None, f"expected a message, got status {msg.status}"
        return msg

    def pull_none(self) -> tuple[int, str] | None:
        """The status a no-wait pull gets (404 when nothing is available)."""
        return self._ask({"batch": 1, "no_wait": True}, 2.0).status


@pytest.fixture
def puller(nc: Client) -> Puller:
    return Puller(nc)


def test_metadata(js: JetStream, nc: Client, puller: Puller) -> None:
    before = datetime.now(UTC)
    js.publish("s.a", b"one")
    js.publish("s.b", b"two")
    js.create_consumer("S", durable_name="C")
    m = puller.pull()
    md = m.metadata
    assert (md.stream, md.consumer) == ("S", "C")
    assert (md.sequence.stream, md.sequence.consumer) == (1, 1)
    assert md.num_delivered == 1
    assert md.num_pending == 1
    assert md.domain is None
    assert before - timedelta(seconds=5) < md.timestamp < datetime.now(UTC) + timedelta(seconds=5)
    assert md.timestamp_ns > 0
    assert m.data == b"one" and m.subject == "s.a"
    m.ack()
    m2 = puller.pull()
    assert (m2.metadata.sequence.stream, m2.metadata.num_pending) == (2, 0)
    m2.ack()


def test_ack_and_terminal_guard(js: JetStream, nc: Client, puller: Puller) -> None:
    js.publish("s.a", b"x")
    c = js.create_consumer("S", durable_name="C", ack_wait=30.0)
    m = puller.pull()
    assert c.info().num_ack_pending == 1
    m.ack()
    assert m.is_acked
    sent = nc.stats["out_msgs"]
    m.ack()  # ignored
    m.nak()  # ignored
    m.term()  # ignored
    m.in_progress()  # ignored after a terminal ack
    assert nc.stats["out_msgs"] == sent
    with pytest.raises(errors.MsgAlreadyAckdError):
        m.ack_sync()
    nc.flush()
    # The server applies acks asynchronously to the PONG: poll briefly.
    _eventually(lambda: c.info().num_ack_pending == 0)
    info = c.info()
    assert info.ack_floor is not None and info.ack_floor.stream_seq == 1
    assert puller.pull_none() == (404, "No Messages")


def test_nak_then_ack_is_ignored(js: JetStream, nc: Client, puller: Puller) -> None:
    js.publish("s.a", b"x")
    js.create_consumer("S", durable_name="C", ack_wait=30.0)
    m = puller.pull()
    m.nak()
    m.ack()  # ignored: the nak was terminal, so the message comes back
    again = puller.pull(expires=1.0)
    assert again.metadata.sequence.stream == 1
    assert again.metadata.num_delivered == 2
    again.ack()


def test_ack_sync(js: JetStream, nc: Client, puller: Puller) -> None:
    js.publish("s.a", b"x")
    c = js.create_consumer("S", durable_name="C", ack_wait=30.0)
    m = puller.pull()
    m.ack_sync(timeout=2.0)
    # Confirmed by the server: visible without a flush.
    assert c.info().num_ack_pending == 0
    with pytest.raises(errors.MsgAlreadyAckdError):
        m.ack_sync()
    sent = nc.stats["out_msgs"]
    m.ack()
    assert nc.stats["out_msgs"] == sent


def test_ack_sync_timeout(nc: Client) -> None:
    # An ack subject nobody answers: the double ack times out.
    nc.subscribe("$JS.ACK.>")
    nc.flush()
    m = Msg(nc, "s.a", "$JS.ACK.S.C.1.1.1.1700000000000000000.0", b"x")
    start = time.monotonic()
    with pytest.raises(errors.TimeoutError):
        m.ack_sync(timeout=0.2)
    assert time.monotonic() - start < 1.5


def test_nak_with_delay(js: JetStream, nc: Client, puller: Puller) -> None:
    js.publish("s.a", b"x")
    js.create_consumer("S", durable_name="C", ack_wait=30.0)
    m = puller.pull()
    m.nak()
    start = time.monotonic()
    quick = puller.pull(expires=2.0)
    assert time.monotonic() - start < 0.4  # plain nak: redelivered at once
    assert quick.metadata.num_delivered == 2

    quick.nak(delay=0.8)
    start = time.monotonic()
    assert puller.pull_none() == (404, "No Messages")
    later = puller.pull(expires=3.0)
    waited = time.monotonic() - start
    assert 0.6 <= waited < 2.5
    assert later.metadata.num_delivered == 3
    later.ack()


def test_in_progress_extends_ack_wait(js: JetStream, nc: Client, puller: Puller) -> None:
    js.publish("s.a", b"x")
    c = js.create_consumer("S", durable_name="C", ack_wait=1.0)
    m = puller.pull()
    deadline = time.monotonic() + 1.8
    while time.monotonic() < deadline:
        time.sleep(0.3)
        m.in_progress()  # repeatable
    nc.flush()
    assert puller.pull_none() == (404, "No Messages")  # not redelivered despite ack_wait 1 s
    info = c.info()
    assert (info.num_ack_pending, info.num_redelivered) == (1, 0)
    m.ack()
    nc.flush()
    _eventually(lambda: c.info().num_ack_pending == 0)

    # Control: without in_progress the same wait does redeliver.
    js.publish("s.a", b"y")
    m2 = puller.pull()
    time.sleep(1.3)
    again = puller.pull(expires=1.0)
    assert again.metadata.sequence.stream == m2.metadata.sequence.stream
    again.ack()


def test_term_with_reason(js: JetStream, nc: Client, puller: Puller) -> None:
    js.publish("s.a", b"x")
    c = js.create_consumer("S", durable_name="C", ack_wait=1.0)
    advisories = nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.C")
    nc.flush()
    m = puller.pull()
    m.term("cannot parse")
    event = json.loads(advisories.next_msg(timeout=3).data)
    assert event["stream_seq"] == 1
    assert event["reason"] == "cannot parse"
    time.sleep(1.2)  # past ack_wait: a terminated message is not redelivered
    assert puller.pull_none() == (404, "No Messages")
    assert c.info().num_ack_pending == 0


def test_acks_on_a_core_message(nc: Client) -> None:
    sub = nc.subscribe("plain")
    nc.publish("plain", b"x", reply="some.reply")
    m = sub.next_msg(timeout=2)
    with pytest.raises(errors.NotJSMessageError):
        m.ack()
    # (InvalidJSAckError: a nats-py NotJSMessageError, not jsclient's own.)
    with pytest.raises(nats.errors.NotJSMessageError):
        _ = m.metadata


def _eventually(pred: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)
