"""Legacy pull subscriptions (ADR-13) against a real nats-server.

Pull requests are observed from a second connection subscribed to the
consumer's ``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`` subject, so the
tests see the wire sequence the client sends. Statuses the server cannot be
made to send on demand (400, unknown codes, a leadership change) are
published by that connection to the reply subject of a pull it observed:
they reach the client through the real server like the server's own.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import nats
import pytest
from _js import publish_stored

import jsclient
from jsclient import errors
from jsclient.api import ConsumerConfig
from jsclient.jetstream.context import JetStream
from jsclient.jetstream.subscribe.pull import PullSubscription, expires_for
from jsclient.msg import Msg
from jsclient.protocol import commands
from jsclient.server import NatsServer

NEXT = "$JS.API.CONSUMER.MSG.NEXT"


class Observer:
    """Records the pull requests sent to one consumer, from a second connection."""

    def __init__(self, url: str, stream: str, consumer: str) -> None:
        self.nc = jsclient.connect(url)
        self.sub = self.nc.subscribe(f"{NEXT}.{stream}.{consumer}")
        self.nc.flush()

    def take(self, n: int, timeout: float = 5.0) -> list[tuple[str, dict[str, Any]]]:
        """The next ``n`` requests as (reply subject, JSON body)."""
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            m = self.sub.next_msg(timeout=max(0.01, deadline - time.monotonic()))
            out.append((m.reply, json.loads(m.data) if m.data else {}))
        return out

    def none_within(self, seconds: float = 0.3) -> bool:
        try:
            m = self.sub.next_msg(timeout=seconds)
        except errors.TimeoutError:
            return True
        pytest.fail(f"unexpected pull request {m.data!r}")

    def status(self, reply: str, line: str) -> None:
        """Publish a status message (empty payload) to a pull's reply subject."""
        hdr = f"NATS/1.0 {line}\r\n\r\n".encode()
        self.nc._publish_raw(commands.hpub(reply.encode(), b"", hdr, b""), 0)
        self.nc.flush()

    def close(self) -> None:
        self.nc.close()


@pytest.fixture
def js(nc: jsclient.Client) -> JetStream:
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    return js


@pytest.fixture
def observe(nats_server: NatsServer) -> Iterator[Any]:
    made: list[Observer] = []

    def make(consumer: str, stream: str = "S") -> Observer:
        obs = Observer(nats_server.url, stream, consumer)
        made.append(obs)
        return obs

    yield make
    for obs in made:
        obs.close()


def _publish(nc: jsclient.Client, n: int, subject: str = "s.a") -> None:
    publish_stored(nc, subject, (b"m%d" % i for i in range(n)))


def _seqs(msgs: list[Msg]) -> list[int]:
    return [m.metadata.sequence.stream for m in msgs]


class Background:
    """Runs ``fn`` on a thread; ``join`` returns what it returned, ``error`` what it raised."""

    def __init__(self, fn: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), name="test-fetch")
        self.thread.start()

    def _run(self, fn: Any) -> None:
        try:
            self.result = fn()
        except BaseException as exc:
            self.error = exc

    def join(self, timeout: float = 5.0) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the fetch did not end"
        return self.result


def _expect_timeout(psub: PullSubscription, timeout: float) -> None:
    with pytest.raises(errors.TimeoutError):
        psub.fetch(1, timeout=timeout)


def _consumers(js: JetStream, stream: str = "S") -> list[str]:
    return sorted(js.stream(stream).consumer_names())


# -- the wire sequence ------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 5])
def test_empty_consumer_sends_no_wait_then_one_long_pull(
    js: JetStream, observe: Any, batch: int
) -> None:
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    t0 = time.monotonic()
    with pytest.raises(errors.TimeoutError):
        psub.fetch(batch, timeout=1.0)
    elapsed = time.monotonic() - t0
    (r1, first), (r2, second) = obs.take(2)
    assert first == {"batch": batch, "no_wait": True}
    assert second["batch"] == batch and "no_wait" not in second
    # The long pull expires before the client gives up: its 408 ends the fetch.
    assert 0 < second["expires"] < 1.0e9
    assert second["expires"] >= int(0.85e9)
    assert r1 != r2 and r1.rsplit(".", 1)[0] == r2.rsplit(".", 1)[0]  # one inbox, two tokens
    assert 0.8 < elapsed < 1.2
    obs.none_within()


@pytest.mark.parametrize("batch", [1, 5])
def test_enough_messages_need_only_the_no_wait_pull(
    nc: jsclient.Client, js: JetStream, observe: Any, batch: int
) -> None:
    _publish(nc, 5)
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    t0 = time.monotonic()
    msgs = psub.fetch(batch, timeout=5.0)
    assert time.monotonic() - t0 < 1.0
    assert _seqs(msgs) == list(range(1, batch + 1))
    assert obs.take(1)[0][1] == {"batch": batch, "no_wait": True}
    obs.none_within()


def test_fewer_messages_than_batch_returns_them_after_the_no_wait_pull(
    nc: jsclient.Client, js: JetStream, observe: Any
) -> None:
    _publish(nc, 3)
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    msgs = psub.fetch(10, timeout=5.0)
    assert _seqs(msgs) == [1, 2, 3]
    assert obs.take(1)[0][1] == {"batch": 10, "no_wait": True}
    obs.none_within()


def test_long_pull_returns_when_a_message_comes(
    nc: jsclient.Client, js: JetStream, observe: Any
) -> None:
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    got: list[Msg] = []
    t = threading.Thread(target=lambda: got.extend(psub.fetch(1, timeout=10.0)))
    t.start()
    obs.take(2)  # no_wait, then the long pull is waiting
    t0 = time.monotonic()
    js.publish("s.a", b"late")
    t.join(5)
    assert not t.is_alive()
    assert [m.data for m in got] == [b"late"]
    assert time.monotonic() - t0 < 2.0


def test_buffered_messages_are_handed_out_without_a_request(js: JetStream, observe: Any) -> None:
    """Messages a pull delivers after its fetch gave up are kept for the next fetch."""
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    # A pull on this subscription's inbox that outlives any fetch (as one whose
    # fetch timed out would): its token is not one the subscription made.
    orphan = psub._prefix + "orphan"
    obs.nc.publish(f"{NEXT}.S.d", b'{"batch":3,"expires":5000000000}', reply=orphan)
    obs.take(1)
    for i in range(3):
        js.publish("s.a", b"b%d" % i)
    deadline = time.monotonic() + 10
    while psub.pending_msgs < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert psub.pending_msgs == 3, "the orphan pull's messages did not arrive"
    msgs = psub.fetch(2, timeout=5.0)
    assert [m.data for m in msgs] == [b"b0", b"b1"]
    obs.none_within()
    # One left in the buffer; the rest of this batch comes from a new pull.
    js.publish("s.a", b"b3")
    # The consumer learns of a stored message a moment after the publish ack; a
    # no_wait pull before that would rightly find nothing.
    deadline = time.monotonic() + 5
    while psub.consumer_info().num_pending < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    msgs = psub.fetch(2, timeout=5.0)
    assert [m.data for m in msgs] == [b"b2", b"b3"]
    assert obs.take(1)[0][1] == {"batch": 1, "no_wait": True}


def test_expiry_margin() -> None:
    assert expires_for(5.0) == pytest.approx(4.5)
    assert expires_for(30.0) == pytest.approx(29.0)  # capped at 1 s
    assert expires_for(0.05) == pytest.approx(0.04)  # at least 10 ms
    assert expires_for(0.001) < 0


# -- no orphan pulls --------------------------------------------------------


def test_late_status_of_a_timed_out_fetch_does_not_end_the_next(
    js: JetStream, observe: Any
) -> None:
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    with pytest.raises(errors.TimeoutError):
        psub.fetch(3, timeout=0.3)
    (old_reply, _), _ = obs.take(2)
    got: list[Msg] = []
    t = threading.Thread(target=lambda: got.extend(psub.fetch(2, timeout=5.0)))
    t.start()
    obs.take(2)
    # Statuses of the earlier fetch's pulls arrive now: they must not end this one.
    obs.status(old_reply, "408 Request Timeout")
    obs.status(old_reply, "404 No Messages")
    obs.status(old_reply, "409 Consumer Deleted")
    time.sleep(0.2)
    assert t.is_alive()
    js.publish("s.a", b"x1")
    js.publish("s.a", b"x2")
    t.join(5)
    assert [m.data for m in got] == [b"x1", b"x2"]


def test_every_sequence_exactly_once_across_timeouts_and_mixed_batches(
    nats_server: NatsServer, js: JetStream
) -> None:
    total = 10_000
    psub = js.pull_subscribe("s.a", "d", config=ConsumerConfig(max_ack_pending=-1))
    rng = random.Random(7)
    stop = threading.Event()

    def produce() -> None:
        with jsclient.connect(nats_server.url) as pnc:
            pjs = pnc.jetstream(publish_async_stall_wait=30.0)
            sent = 0
            while sent < total and not stop.is_set():
                n = min(total - sent, rng.choice([1, 10, 300, 1000]))
                futs = [pjs.publish_async("s.a", b"%d" % (sent + i)) for i in range(n)]
                pjs.publish_async_complete(timeout=30)
                for f in futs:
                    f.result(0)
                sent += n
                time.sleep(rng.choice([0, 0, 0.05, 0.3]))

    producer = threading.Thread(target=produce, name="test-producer")
    producer.start()
    seen: dict[int, int] = {}
    timeouts = 0
    deadline = time.monotonic() + 90
    # Pulls on the subscription's inbox that no fetch made, as a fetch that gave
    # up before its pull ended leaves behind: what they deliver must be handed
    # out by later fetches, and their statuses must end none of them.
    spy = jsclient.connect(nats_server.url)
    try:
        while len(seen) < total and time.monotonic() < deadline:
            if rng.random() < 0.1:
                orphan = {"batch": rng.choice([1, 5, 40]), "expires": rng.choice([1, 2, 4]) * 10**8}
                spy.publish(
                    f"{NEXT}.S.d", json.dumps(orphan).encode(), reply=psub._prefix + "orphan"
                )
            batch = rng.choice([1, 2, 7, 50, 256, 1000])
            try:
                msgs = psub.fetch(batch, timeout=rng.choice([0.05, 0.1, 0.5]))
            except errors.TimeoutError:
                timeouts += 1
                continue
            assert 0 < len(msgs) <= batch
            for m in msgs:
                md = m.metadata
                seen[md.sequence.stream] = seen.get(md.sequence.stream, 0) + 1
                assert md.num_delivered == 1, "a message was redelivered (one was lost)"
                m.ack()
    finally:
        stop.set()
        producer.join(30)
        spy.close()
    assert sorted(seen) == list(range(1, total + 1))
    assert set(seen.values()) == {1}
    assert timeouts > 0  # the run did exercise timed-out fetches


# -- statuses ---------------------------------------------------------------


def test_consumer_deleted_during_a_fetch(js: JetStream, observe: Any) -> None:
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    fetch = Background(lambda: psub.fetch(5, timeout=10.0))
    obs.take(2)
    js.delete_consumer("S", "d")
    fetch.join()
    assert isinstance(fetch.error, errors.ConsumerDeletedError)


def test_exceeded_max_request_batch_is_a_typed_error(js: JetStream) -> None:
    # nats-py's ConsumerConfig has no max_batch field: create it through the API.
    js._api_request(
        "CONSUMER.CREATE.S.d",
        {
            "stream_name": "S",
            "config": {"durable_name": "d", "ack_policy": "explicit", "max_batch": 5},
        },
    )
    psub = js.pull_subscribe("s.a", "d")
    with pytest.raises(errors.StatusError) as ei:
        psub.fetch(10, timeout=2.0)
    assert ei.value.status == 409 and "MaxRequestBatch" in ei.value.description
    assert not isinstance(ei.value, errors.TimeoutError)


def test_exceeded_max_waiting_is_a_typed_error(js: JetStream, observe: Any) -> None:
    js.create_consumer("S", durable_name="d", ack_policy="explicit", max_waiting=1)
    first = js.pull_subscribe("s.a", "d")
    second = js.pull_subscribe_bind("d", stream="S")
    obs = observe("d")
    t = threading.Thread(target=_expect_timeout, args=(first, 2.0))
    t.start()
    obs.take(2)  # the first subscription's long pull is waiting
    with pytest.raises(errors.StatusError) as ei:
        second.fetch(1, timeout=1.0)
    assert ei.value.status == 409 and "MaxWaiting" in ei.value.description
    t.join(5)


def test_pull_on_a_push_consumer_is_a_typed_error(js: JetStream) -> None:
    js.create_consumer("S", durable_name="p", deliver_subject="push.p", ack_policy="explicit")
    psub = js.pull_subscribe_bind("p", stream="S")
    with pytest.raises(errors.ConsumerIsPushBasedError):
        psub.fetch(1, timeout=2.0)


def test_no_consumer_is_no_responders(js: JetStream) -> None:
    psub = js.pull_subscribe_bind("missing", stream="S")
    with pytest.raises(errors.NoRespondersError):
        psub.fetch(3, timeout=2.0)


@pytest.mark.parametrize(
    ("line", "error", "code"),
    [
        ("400 Bad Request", errors.BadPullRequestError, 400),
        ("409 Something New", errors.StatusError, 409),
        ("418 I Am A Teapot", errors.StatusError, 418),
        ("503 No Responders", errors.NoRespondersError, None),
    ],
)
def test_error_statuses_end_the_fetch(
    js: JetStream, observe: Any, line: str, error: type[Exception], code: int | None
) -> None:
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    fetch = Background(lambda: psub.fetch(5, timeout=10.0))
    (_, (reply, _)) = obs.take(2)
    obs.status(reply, line)
    fetch.join()
    assert type(fetch.error) is error, fetch.error
    if code is not None:
        assert getattr(fetch.error, "status", None) == code


def test_heartbeat_status_does_not_end_the_fetch(js: JetStream, observe: Any) -> None:
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    got: list[Msg] = []
    t = threading.Thread(target=lambda: got.extend(psub.fetch(1, timeout=5.0)))
    t.start()
    (_, (reply, _)) = obs.take(2)
    obs.status(reply, "100 Idle Heartbeat")
    time.sleep(0.2)
    assert t.is_alive()
    js.publish("s.a", b"after")
    t.join(5)
    assert [m.data for m in got] == [b"after"]


def test_leadership_change_pulls_again(js: JetStream, observe: Any) -> None:
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    got: list[Msg] = []
    t = threading.Thread(target=lambda: got.extend(psub.fetch(1, timeout=10.0)))
    t.start()
    (_, (reply, _)) = obs.take(2)
    obs.status(reply, "409 Leadership Change")
    ((reply2, body),) = obs.take(1)  # a new long pull, with a new token
    assert reply2 != reply and "no_wait" not in body and body["expires"] < 10e9
    js.publish("s.a", b"after")
    t.join(5)
    assert [m.data for m in got] == [b"after"]


def test_error_after_some_messages_returns_them_then_raises(js: JetStream, observe: Any) -> None:
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    got: list[Msg] = []
    t = threading.Thread(target=lambda: got.extend(psub.fetch(5, timeout=10.0)))
    t.start()
    (_, (reply, _)) = obs.take(2)
    js.publish("s.a", b"one")
    # Once the server has sent the message, a status published after it reaches
    # the client after it (one connection, one order).
    deadline = time.monotonic() + 5
    while psub.consumer_info().num_ack_pending == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    obs.status(reply, "409 Consumer Deleted")
    t.join(5)
    assert [m.data for m in got] == [b"one"]
    with pytest.raises(errors.ConsumerDeletedError):
        psub.fetch(1, timeout=1.0)


def test_fetch_pulls_again_after_a_reconnect(
    nats_server: NatsServer, nc: jsclient.Client, js: JetStream
) -> None:
    psub = js.pull_subscribe("s.a", "d")
    fetch = Background(lambda: psub.fetch(1, timeout=20.0))
    time.sleep(0.3)  # the long pull is waiting on the server
    nats_server.kill()
    nats_server.start()
    deadline = time.monotonic() + 10
    while not nc.is_connected and time.monotonic() < deadline:
        time.sleep(0.02)
    t0 = time.monotonic()
    js.publish("s.a", b"after restart", timeout=10.0)
    got = fetch.join(10)
    assert fetch.error is None and [m.data for m in got] == [b"after restart"]
    assert time.monotonic() - t0 < 5.0  # not left waiting out the 20 s


def test_concurrent_fetch_is_refused(js: JetStream, observe: Any) -> None:
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    t = threading.Thread(target=_expect_timeout, args=(psub, 1.5))
    t.start()
    obs.take(1)
    with pytest.raises(errors.ConcurrentFetchError):
        psub.fetch(1, timeout=1.0)
    t.join(5)
    # Once the first fetch has ended, the subscription works again.
    js.publish("s.a", b"ok")
    assert [m.data for m in psub.fetch(1, timeout=2.0)] == [b"ok"]


# -- acks and info -------------------------------------------------------------


def test_messages_ack_like_adr37_ones(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 4)
    psub = js.pull_subscribe("s.a", "d", config=ConsumerConfig(ack_wait=1.0))
    a, b, c, d = psub.fetch(4, timeout=5.0)
    md = a.metadata
    assert (md.stream, md.consumer, md.sequence.stream, md.num_delivered) == ("S", "d", 1, 1)
    a.ack()
    b.nak()
    c.term()
    d.in_progress()
    d.ack_sync()
    with pytest.raises(errors.MsgAlreadyAckdError):
        d.ack_sync()
    again = psub.fetch(1, timeout=5.0)
    assert _seqs(again) == [2] and again[0].metadata.num_delivered == 2
    again[0].ack()
    # The server applies acks asynchronously: poll for the ack state.
    deadline = time.monotonic() + 5
    while (info := psub.consumer_info()).num_ack_pending and time.monotonic() < deadline:
        time.sleep(0.02)
    assert info.name == "d" and info.num_ack_pending == 0
    assert info.delivered.stream_seq == 4


# -- subscribe workflow -----------------------------------------------------------


def test_stream_is_looked_up_by_subject(js: JetStream) -> None:
    js.create_stream(name="OTHER", subjects=["o.>"])
    js.publish("o.x", b"1")
    psub = js.pull_subscribe("o.x", "d")
    assert psub.stream_name == "OTHER"
    assert psub.fetch(1, timeout=2.0)[0].data == b"1"
    info = js.consumer("OTHER", "d").cached_info
    assert info.config.filter_subject == "o.x"
    assert str(getattr(info.config.ack_policy, "value", info.config.ack_policy)) == "explicit"


def test_no_stream_for_the_subject(js: JetStream) -> None:
    with pytest.raises(errors.NoStreamMatchError) as ei:
        js.pull_subscribe("nothing.here", "d")
    assert ei.value.code == 90007 and "nothing.here" in str(ei.value)


def test_several_streams_match_the_subject(js: JetStream) -> None:
    js.create_stream(name="X1", subjects=["x.a"])
    js.create_stream(name="X2", subjects=["x.b"])
    with pytest.raises(errors.MultipleStreamsMatchError) as ei:
        js.pull_subscribe("x.*", "d")
    assert "X1" in str(ei.value) and "X2" in str(ei.value)
    assert _consumers(js, "X1") == [] and _consumers(js, "X2") == []
    psub = js.pull_subscribe("x.*", "d", stream="X1")  # naming the stream settles it
    assert psub.stream_name == "X1"


@pytest.mark.parametrize(
    ("kwargs", "error", "code"),
    [
        ({"subject": "", "durable": "d"}, errors.SubjectRequiredError, 90021),
        (
            {"subject": "s.a", "durable": "d", "config": {"ack_policy": "none"}},
            errors.PullAckPolicyError,
            90023,
        ),
        (
            {"subject": "s.a", "durable": "d", "config": {"ack_policy": "all"}},
            errors.PullAckPolicyError,
            90023,
        ),
        (
            {"subject": "s.a", "durable": "d", "config": {"deliver_subject": "x"}},
            errors.PullDeliverSubjectError,
            90002,
        ),
        (
            {"subject": "s.a", "durable": "d", "config": {"deliver_group": "g"}},
            errors.PullDeliverGroupError,
            90001,
        ),
        (
            {"subject": "s.a", "durable": "d", "config": {"idle_heartbeat": 5.0}},
            errors.PullHeartbeatError,
            90005,
        ),
        (
            {"subject": "s.a", "durable": "d", "config": {"durable_name": "other"}},
            errors.DurableMismatchError,
            90026,
        ),
        (
            {"subject": "s.a", "durable": "d", "config": {"filter_subject": "s.b"}},
            errors.FilterSubjectMismatchError,
            90011,
        ),
    ],
)
def test_configuration_checks_fail_before_anything_is_created(
    js: JetStream, kwargs: dict[str, Any], error: type[errors.SubscribeError], code: int
) -> None:
    subs_before = len(js._client._subs)
    with pytest.raises(error) as ei:
        js.pull_subscribe(**kwargs)
    assert isinstance(ei.value, errors.SubscribeError) and ei.value.code == code
    assert ei.value.id == f"SUB-{code}" and f"SUB-{code}" in str(ei.value)
    assert _consumers(js) == []
    assert len(js._client._subs) <= subs_before + 1  # at most the API reply inbox


def test_existing_push_consumer_is_refused(js: JetStream) -> None:
    js.create_consumer("S", durable_name="p", deliver_subject="push.p", ack_policy="explicit")
    with pytest.raises(errors.PushConsumerError) as ei:
        js.pull_subscribe("s.a", "p")
    assert ei.value.code == 90008 and "js.subscribe" in str(ei.value)


def test_existing_consumer_with_another_filter_is_refused(js: JetStream) -> None:
    js.create_consumer("S", durable_name="d", filter_subject="s.b", ack_policy="explicit")
    with pytest.raises(errors.FilterSubjectMismatchError):
        js.pull_subscribe("s.a", "d")


def test_existing_consumer_with_another_config_is_refused(js: JetStream) -> None:
    js.create_consumer(
        "S", durable_name="d", filter_subject="s.a", ack_policy="explicit", max_deliver=3
    )
    with pytest.raises(errors.ConsumerConfigMismatchError) as ei:
        js.pull_subscribe("s.a", "d", config={"max_deliver": 5})
    assert "max_deliver" in str(ei.value)
    # The same values are accepted.
    psub = js.pull_subscribe("s.a", "d", config={"max_deliver": 3, "ack_wait": 30.0})
    assert psub.consumer_name == "d"


def test_durable_is_created_once_and_kept(js: JetStream) -> None:
    psub = js.pull_subscribe("s.a", "d")
    psub.unsubscribe()
    assert _consumers(js) == ["d"]  # a durable is only deleted explicitly
    again = js.pull_subscribe("s.a", "d")
    js.publish("s.a", b"1")
    assert again.fetch(1, timeout=2.0)[0].data == b"1"


def test_ephemeral_is_deleted_on_unsubscribe_and_drain(js: JetStream) -> None:
    e1 = js.pull_subscribe("s.a")
    e2 = js.pull_subscribe("s.a")
    assert sorted([e1.consumer_name, e2.consumer_name]) == _consumers(js)
    info = e1.consumer_info()
    assert info.config.durable_name is None and info.config.inactive_threshold == 300.0
    e1.unsubscribe()
    assert _consumers(js) == [e2.consumer_name]
    js.publish("s.a", b"x")
    assert e2.fetch(1, timeout=2.0)[0].data == b"x"
    e2.drain()
    assert _consumers(js) == []
    with pytest.raises(errors.BadSubscriptionError):
        e2.fetch(1, timeout=0.5)


def test_drain_keeps_buffered_messages_for_fetch(js: JetStream, observe: Any) -> None:
    psub = js.pull_subscribe("s.a", "d")
    obs = observe("d")
    obs.nc.publish(f"{NEXT}.S.d", b'{"batch":2,"expires":5000000000}', reply=psub._prefix + "o")
    obs.take(1)
    js.publish("s.a", b"k1")
    js.publish("s.a", b"k2")
    deadline = time.monotonic() + 10
    while psub.pending_msgs < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert psub.pending_msgs == 2, "the orphan pull's messages did not arrive"
    psub.drain()
    assert [m.data for m in psub.fetch(5, timeout=1.0)] == [b"k1", b"k2"]
    with pytest.raises(errors.BadSubscriptionError):
        psub.fetch(1, timeout=0.5)


def test_bind_makes_no_lookups(nats_server: NatsServer, js: JetStream) -> None:
    js.create_consumer("S", durable_name="d", ack_policy="explicit")
    js.publish("s.a", b"1")
    with jsclient.connect(nats_server.url) as spy:
        api = spy.subscribe("$JS.API.>")
        spy.flush()
        psub = js.pull_subscribe_bind("d", stream="S")
        assert psub.fetch(1, timeout=2.0)[0].data == b"1"
        seen = []
        while True:
            try:
                seen.append(api.next_msg(timeout=0.3).subject)
            except errors.TimeoutError:
                break
    assert seen and all(s == f"{NEXT}.S.d" for s in seen), seen


def test_context_manager_unsubscribes(js: JetStream) -> None:
    with js.pull_subscribe("s.a") as psub:
        name = psub.consumer_name
        assert _consumers(js) == [name]
    assert _consumers(js) == []


def test_fetch_arguments_are_checked(js: JetStream) -> None:
    psub = js.pull_subscribe("s.a", "d")
    with pytest.raises(ValueError):
        psub.fetch(0)
    with pytest.raises(errors.BadTimeoutError):
        psub.fetch(1, timeout=0)


def test_fetch_without_timeout_waits_for_a_message(js: JetStream) -> None:
    psub = js.pull_subscribe("s.a", "d")
    got: list[Msg] = []
    t = threading.Thread(target=lambda: got.extend(psub.fetch(1, timeout=None)), daemon=True)
    t.start()
    time.sleep(0.3)
    assert t.is_alive()
    js.publish("s.a", b"eventually")
    t.join(10)
    assert [m.data for m in got] == [b"eventually"]


# -- nats-py interop ---------------------------------------------------------------


def test_nats_py_publishes_and_its_durable_is_reused(
    nats_server: NatsServer, js: JetStream
) -> None:
    async def make() -> None:
        other = await nats.connect(nats_server.url)
        try:
            njs = other.jetstream()
            for i in range(6):
                await njs.publish("s.a", b"py%d" % i)
            psub = await njs.pull_subscribe("s.a", "shared")
            first = await psub.fetch(2, timeout=5)
            for m in first:
                await m.ack()
        finally:
            await other.close()

    asyncio.run(make())
    psub = js.pull_subscribe("s.a", "shared")  # the consumer nats-py created
    msgs = psub.fetch(10, timeout=5.0)
    assert [m.data for m in msgs] == [b"py2", b"py3", b"py4", b"py5"]
    for m in msgs:
        m.ack()

    async def back() -> list[bytes]:
        other = await nats.connect(nats_server.url)
        try:
            njs = other.jetstream()
            await njs.publish("s.a", b"py6")
            nsub = await njs.pull_subscribe("s.a", "shared")
            got = await nsub.fetch(1, timeout=5)
            return [m.data for m in got]
        finally:
            await other.close()

    assert asyncio.run(back()) == [b"py6"]


def test_pull_subscription_type(js: JetStream) -> None:
    psub = js.pull_subscribe("s.a", "d")
    assert isinstance(psub, PullSubscription)
    assert (psub.stream_name, psub.consumer_name) == ("S", "d")
    assert "S" in repr(psub)
