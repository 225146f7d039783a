"""Consumer pause / resume (server 2.11) and reset (ADR-60, server 2.14) against a
real nats-server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from _js import publish_stored

import jsclient
from jsclient import errors
from jsclient.jetstream.context import JetStream
from jsclient.msg import Msg


@pytest.fixture
def js(nc: jsclient.Client) -> Iterator[JetStream]:
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    yield js


def _publish(nc: jsclient.Client, n: int, start: int = 0) -> None:
    publish_stored(nc, "s.a", (b"%d" % i for i in range(start, start + n)))


# -- pause / resume --------------------------------------------------------------


def test_no_deliveries_while_paused_and_resume_delivers(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    _publish(nc, 3)
    before = datetime.now(UTC)
    until = c.pause(30.0)
    assert until.tzinfo is not None
    assert before + timedelta(seconds=29) < until < before + timedelta(seconds=31)
    info = c.info()
    assert info.paused is True
    assert info.config.pause_until  # the server's RFC 3339 text, as nats-py holds it
    batch = c.fetch(3, expires=1.0)
    assert list(batch) == [] and batch.error is None  # the pull waits, then expires
    c.resume()
    assert not c.info().paused
    assert [m.data for m in c.fetch(3, expires=2.0)] == [b"0", b"1", b"2"]


def test_a_consume_gets_nothing_while_paused(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    got: list[Msg] = []
    three = threading.Event()

    def on_msg(m: Msg) -> None:
        got.append(m)
        m.ack()
        if len(got) == 3:
            three.set()

    js.pause_consumer("S", "d", datetime.now(UTC) + timedelta(minutes=5))
    cc = c.consume(on_msg, expires=1.0)
    try:
        _publish(nc, 3)
        time.sleep(1.5)
        assert got == []
        js.resume_consumer("S", "d")
        assert three.wait(5.0)
    finally:
        cc.stop()
        assert cc.wait(5.0)
    assert [m.data for m in got] == [b"0", b"1", b"2"]


def test_a_pause_ends_by_itself(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    _publish(nc, 1)
    until = c.pause(1.0)
    t0 = time.monotonic()
    msgs = list(c.fetch(1, expires=5.0))
    assert len(msgs) == 1
    assert time.monotonic() - t0 >= 0.5
    assert datetime.now(UTC) >= until - timedelta(seconds=0.1)


def test_pause_until_in_the_past_leaves_it_running(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    _publish(nc, 1)
    past = datetime(2020, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)
    assert c.pause(past) == past
    assert not c.info().paused
    assert c.pause(-10.0) < datetime.now(UTC)  # seconds from now, negative: the past
    assert len(list(c.fetch(1, expires=2.0))) == 1


def test_pause_takes_any_timezone_and_refuses_naive_datetimes(js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d")
    tz = timezone(timedelta(hours=-5))
    local = datetime.now(tz) + timedelta(minutes=10)
    assert c.pause(local) == local.astimezone(UTC)
    assert c.info().paused
    with pytest.raises(ValueError):
        c.pause(datetime.now() + timedelta(minutes=1))
    with pytest.raises(TypeError):
        c.pause("2030-01-01T00:00:00Z")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        c.pause(float("inf"))
    assert js.stream("S").pause_consumer("d", 60.0) > datetime.now(UTC)
    js.stream("S").resume_consumer("d")
    assert not c.info().paused


def test_create_a_paused_consumer(nc: jsclient.Client, js: JetStream) -> None:
    until = datetime.now(UTC) + timedelta(minutes=5)
    c = js.create_consumer("S", durable_name="d", pause_until=until)
    assert c.cached_info.paused is True
    _publish(nc, 1)
    assert list(c.fetch(1, expires=0.5)) == []
    c.resume()
    assert len(list(c.fetch(1, expires=2.0))) == 1


def test_pause_of_a_missing_consumer(js: JetStream) -> None:
    with pytest.raises(errors.ConsumerNotFoundError):
        js.pause_consumer("S", "nosuch", 10.0)
    with pytest.raises(errors.ConsumerNotFoundError):
        js.resume_consumer("S", "nosuch")
    with pytest.raises(errors.InvalidConsumerNameError):
        js.pause_consumer("S", "a.b", 10.0)


# -- reset -----------------------------------------------------------------------


def test_reset_to_a_sequence_redelivers_from_there(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("S", durable_name="d", ack_policy="explicit")
    _publish(nc, 10)
    for m in c.fetch(5, expires=2.0):
        m.ack_sync()
    assert c.info().ack_floor.stream_seq == 5  # type: ignore[union-attr]
    assert c.reset(3) == 3
    assert c.cached_info.ack_floor.stream_seq == 2  # type: ignore[union-attr]
    assert c.cached_info.delivered.consumer_seq == 0  # type: ignore[union-attr]
    got = list(c.fetch(3, expires=2.0))
    assert [m.metadata.sequence.stream for m in got] == [3, 4, 5]
    # Delivery sequences start again at 1.
    assert [m.metadata.sequence.consumer for m in got] == [1, 2, 3]
    # Forward is allowed too (deliver policy all).
    assert js.reset_consumer("S", "d", 9) == 9
    assert [m.metadata.sequence.stream for m in c.fetch(5, expires=1.0)] == [9, 10]


def test_reset_without_a_sequence_restarts_above_the_ack_floor(
    nc: jsclient.Client, js: JetStream
) -> None:
    c = js.create_consumer("S", durable_name="d", ack_policy="explicit")
    _publish(nc, 6)
    batch = list(c.fetch(4, expires=2.0))
    batch[0].ack_sync()
    batch[1].ack_sync()  # 3 and 4 stay unacked: pending
    assert c.info().num_ack_pending == 2
    assert js.stream("S").reset_consumer("d") == 3
    info = c.info()
    assert info.num_ack_pending == 0 and info.num_redelivered == 0
    assert [m.metadata.sequence.stream for m in c.fetch(10, expires=1.0)] == [3, 4, 5, 6]


def test_reset_refused_by_the_deliver_policy(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 5)
    c = js.create_consumer("S", durable_name="n", deliver_policy="new")
    with pytest.raises(errors.ConsumerInvalidResetError) as info:
        c.reset(2)
    assert info.value.err_code == 10204 and info.value.code == 400
    s = js.create_consumer(
        "S", durable_name="s", deliver_policy="by_start_sequence", opt_start_seq=3
    )
    with pytest.raises(errors.ConsumerInvalidResetError):
        s.reset(2)  # below its start
    assert s.reset(4) == 4


def test_reset_of_a_missing_consumer_fails_at_once(js: JetStream) -> None:
    t0 = time.monotonic()
    with pytest.raises(errors.ConsumerNotFoundError):
        js.reset_consumer("S", "nosuch")
    with pytest.raises(errors.StreamNotFoundError):
        js.reset_consumer("NOSUCH", "d")
    assert time.monotonic() - t0 < 2.0  # not the API timeout
    with pytest.raises(ValueError):
        js.reset_consumer("S", "d", 0)
