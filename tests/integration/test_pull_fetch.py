"""fetch, fetch_bytes, fetch_no_wait and next against a real nats-server."""

from __future__ import annotations

import builtins
import time
from typing import Any

import pytest
from _js import publish_stored, wait_for

import jsclient
from jsclient import errors
from jsclient.jetstream.consume.fetch import FetchBatch
from jsclient.jetstream.context import JetStream
from jsclient.msg import ACK_NONE_POLICY
from jsclient.server import NatsServer


@pytest.fixture
def js(nc: jsclient.Client) -> JetStream:
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    return js


def _publish(nc: jsclient.Client, n: int, subject: str = "s.a", payload: bytes = b"x") -> None:
    publish_stored(nc, subject, (payload + b"%d" % i for i in range(n)))


def _seqs(msgs: Any) -> list[int]:
    return [m.metadata.sequence.stream for m in msgs]


def test_fetch_full_batch_returns_at_once(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 10)
    c = js.create_consumer("S", durable_name="d")
    t0 = time.monotonic()
    batch = c.fetch(5, expires=10.0)
    msgs = list(batch)
    assert time.monotonic() - t0 < 1.0
    assert _seqs(msgs) == [1, 2, 3, 4, 5]
    assert batch.error is None and batch.done
    for m in msgs:
        m.ack()
    assert _seqs(c.fetch(5, expires=2.0)) == [6, 7, 8, 9, 10]
    assert c.stats()["delivered"] == 10


def test_short_batch_ends_at_expiry_without_error(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 3)
    c = js.create_consumer("S", durable_name="d")
    t0 = time.monotonic()
    batch = c.fetch(10, expires=1.0)
    assert len(list(batch)) == 3
    assert 0.8 < time.monotonic() - t0 < 2.5
    assert batch.error is None


def test_fetch_yields_messages_as_they_arrive(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    batch = c.fetch(5, expires=10.0)
    time.sleep(0.2)
    t0 = time.monotonic()
    _publish(nc, 1)
    first = next(iter(batch))
    assert time.monotonic() - t0 < 1.0  # not held back until the batch is full
    assert first.data == b"x0"


def test_fetch_bytes_stops_at_the_byte_limit(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 10, payload=b"y" * 100)
    c = js.create_consumer("S", durable_name="d")
    one = c.fetch(1, expires=1.0)
    size = next(iter(one)).size
    assert size > 100
    t0 = time.monotonic()
    batch = c.fetch_bytes(size * 3 + size // 2, expires=10.0)
    msgs = list(batch)
    assert len(msgs) == 3
    assert sum(m.size for m in msgs) <= size * 3 + size // 2
    assert batch.error is None
    assert time.monotonic() - t0 < 2.0  # 409 Message Size Exceeds MaxBytes ends it, not expiry


def test_fetch_bytes_smaller_than_a_message(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 2, payload=b"z" * 200)
    c = js.create_consumer("S", durable_name="d")
    t0 = time.monotonic()
    batch = c.fetch_bytes(50, expires=10.0)
    assert list(batch) == []
    assert batch.error is None  # 409 Message Size Exceeds MaxBytes is not telegraphed
    assert time.monotonic() - t0 < 2.0


def test_fetch_no_wait(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    t0 = time.monotonic()
    batch = c.fetch_no_wait(10)
    assert list(batch) == [] and batch.error is None
    assert time.monotonic() - t0 < 1.0  # answered at once, not at an expiry
    _publish(nc, 3)
    # The server tells its consumers of new messages after it acks them: wait
    # until the consumer counts them, or a no-wait pull may still find none.
    assert wait_for(lambda: c.info().num_pending == 3)
    t0 = time.monotonic()
    assert _seqs(c.fetch_no_wait(10)) == [1, 2, 3]
    assert time.monotonic() - t0 < 1.0


def test_next(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    _publish(nc, 2)
    assert c.next(timeout=2.0).data == b"x0"
    msg = c.next(timeout=2.0)
    assert msg.data == b"x1"
    msg.ack_sync()
    t0 = time.monotonic()
    with pytest.raises(errors.TimeoutError):
        c.next(timeout=0.5)
    assert 0.4 < time.monotonic() - t0 < 2.0
    with pytest.raises(builtins.TimeoutError):
        c.next(timeout=0)  # no-wait pull


def test_ack_policy_none_makes_acks_no_ops(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 2)
    c = js.create_consumer("S", durable_name="d", ack_policy="none")
    msgs = list(c.fetch(2, expires=1.0))
    assert [m._ackd for m in msgs] == [ACK_NONE_POLICY] * 2
    msgs[0].ack()
    msgs[1].ack_sync(timeout=0.1)  # no round trip: would time out (no reply) otherwise
    assert c.info().num_ack_pending == 0


def test_fetch_validation(js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            c.fetch(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        c.fetch(1, expires=0)
    with pytest.raises(ValueError):
        c.fetch(1, expires=4.0, heartbeat=2.5)
    with pytest.raises(ValueError):
        c.fetch_bytes(0)
    with pytest.raises(ValueError):
        c.fetch_no_wait(0)


def test_concurrent_fetches_keep_apart_and_max_waiting_refuses(
    nc: jsclient.Client, js: JetStream
) -> None:
    c = js.create_consumer("S", durable_name="d", max_waiting=1)
    first = c.fetch(1, expires=5.0)
    time.sleep(0.1)
    second = c.fetch(1, expires=5.0)
    t0 = time.monotonic()
    assert list(second) == []
    assert time.monotonic() - t0 < 1.0
    assert isinstance(second.error, errors.StatusError)
    assert (second.error.status, second.error.description) == (409, "Exceeded MaxWaiting")
    _publish(nc, 1)
    assert [m.data for m in first] == [b"x0"]  # the refusal did not end the first pull
    assert first.error is None


def test_status_of_an_earlier_pull_cannot_end_a_later_fetch(
    nc: jsclient.Client, js: JetStream
) -> None:
    _publish(nc, 1)
    c = js.create_consumer("S", durable_name="d")
    earlier = c.fetch(1, expires=2.0)
    assert len(list(earlier)) == 1
    later = c.fetch(1, expires=3.0)
    assert later._inbox is earlier._inbox  # the idle inbox was reused
    # A late request-timeout for the earlier pull arrives on the shared inbox ...
    stale = b"HPUB %s 32 32\r\nNATS/1.0 408 Request Timeout\r\n\r\n\r\n" % earlier._reply.encode()
    nc._publish_raw(stale, 0)
    nc.flush()
    time.sleep(0.2)
    _publish(nc, 1)
    # ... and the later fetch still gets its message.
    assert [m.data for m in later] == [b"x0"]
    assert later.error is None


def test_push_consumer_is_terminal(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="push", deliver_subject="deliver.here")
    batch = c.fetch(1, expires=2.0)
    assert list(batch) == []
    assert isinstance(batch.error, errors.ConsumerIsPushBasedError)
    with pytest.raises(errors.ConsumerIsPushBasedError):
        c.next(timeout=2.0)


def test_deleted_consumer_ends_a_waiting_fetch(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    batch = c.fetch(5, expires=10.0)
    time.sleep(0.1)
    js.delete_consumer("S", "d")
    t0 = time.monotonic()
    with pytest.raises(errors.ConsumerDeletedError):
        list(batch)  # reported, not a quiet empty batch
    assert time.monotonic() - t0 < 2.0
    assert isinstance(batch.error, errors.ConsumerDeletedError)
    # Once gone, nothing answers the pull subject: the server is asked, and
    # says the consumer does not exist (still a NoRespondersError too).
    gone = c.fetch(1, expires=2.0)
    with pytest.raises(errors.ConsumerNotFoundError) as ei:
        list(gone)
    assert isinstance(gone.error, errors.ConsumerNotFoundError)
    assert isinstance(ei.value, errors.NoRespondersError) and ei.value.err_code == 10014
    assert "'d'" in str(ei.value) and "'S'" in str(ei.value)
    with pytest.raises(errors.ConsumerNotFoundError):
        c.next(timeout=2.0)


def test_bad_request_is_terminal(js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    # A heartbeat above half the expiry: fetch() refuses it, the server answers 400.
    batch = FetchBatch(c._pull_engine(), 1, 0, 1.0, 0.9)
    assert list(batch) == []
    assert isinstance(batch.error, errors.BadPullRequestError)
    assert batch.error.status == 400


def test_fetch_heartbeat_detects_a_lost_server(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url, reconnect_wait=0.1, max_reconnect_attempts=-1)
    try:
        js = nc.jetstream()
        js.create_stream(name="S", subjects=["s.>"])
        c = js.create_consumer("S", durable_name="d")
        batch = c.fetch(5, expires=10.0, heartbeat=0.5)
        time.sleep(0.8)  # heartbeats flow meanwhile
        nats_server.kill()
        t0 = time.monotonic()
        assert list(batch) == []
        assert isinstance(batch.error, errors.NoHeartbeatError)
        assert time.monotonic() - t0 < 2.0
    finally:
        nc.close()


def test_fetch_ends_when_the_connection_closes(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    batch = c.fetch(5, expires=30.0, heartbeat=0)
    nc.close()
    t0 = time.monotonic()
    assert list(batch) == []
    assert isinstance(batch.error, errors.ConnectionClosedError)
    assert time.monotonic() - t0 < 2.0
