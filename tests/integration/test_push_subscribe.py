"""Push subscriptions (ADR-15) against a real nats-server: checks, delivery, ASM, ordered.

Statuses the server cannot be made to send on demand (a heartbeat whose
``Nats-Last-Consumer`` is ahead of what was delivered, one naming a stalled
flow-control subject, unknown codes) are published by a second connection to
the subscription's deliver subject: they reach the client through the real
server like the server's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import nats
import nats.js.api
import pytest
from _js import eventually, publish_stored

import jsclient
from jsclient import errors
from jsclient.jetstream.context import JetStream
from jsclient.jetstream.subscribe.push import JsSubscription
from jsclient.msg import Msg
from jsclient.protocol import commands
from jsclient.server import NatsServer


class Errors:
    """An ``error_cb`` that records what it gets."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[BaseException] = []

    def __call__(self, exc: BaseException) -> None:
        with self.lock:
            self.items.append(exc)

    def of(self, cls: type[BaseException]) -> list[Any]:
        with self.lock:
            return [e for e in self.items if isinstance(e, cls)]


@pytest.fixture
def errs() -> Errors:
    return Errors()


@pytest.fixture
def js(nc: jsclient.Client) -> JetStream:
    js = nc.jetstream()
    js.create_stream(name="S", subjects=["s.>"])
    return js


@pytest.fixture
def other(nats_server: NatsServer) -> Iterator[jsclient.Client]:
    c = jsclient.connect(nats_server.url)
    yield c
    c.close()


def _publish(nc: jsclient.Client, n: int, subject: str = "s.a") -> None:
    publish_stored(nc, subject, (b"m%d" % i for i in range(n)))


def _consumers(js: JetStream, stream: str = "S") -> list[str]:
    return sorted(js.stream(stream).consumer_names())


def _inject(
    c: jsclient.Client,
    subject: str,
    line: str,
    headers: dict[str, str] | None = None,
    reply: str = "",
) -> None:
    """Publish a status message (empty payload) to ``subject`` from another connection."""
    block = f"NATS/1.0 {line}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    hdr = (block + "\r\n").encode()
    c._publish_raw(commands.hpub(subject.encode(), reply.encode(), hdr, b""), 0)
    c.flush()


def _consume_until(sub: JsSubscription, cond: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Keep a sync subscription consuming (where its status management runs) until ``cond``."""

    def step() -> Any:
        with contextlib.suppress(errors.TimeoutError):
            sub.next_msg(timeout=0.1)
        return cond()

    return eventually(step, timeout)


def _acked_all(js: JetStream, stream: str, name: str, n: int) -> bool:
    info = js.consumer(stream, name).info()
    return info.num_ack_pending == 0 and info.ack_floor.stream_seq >= n


# -- delivery ---------------------------------------------------------------------


def test_sync_push_subscription(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 10)
    sub = js.subscribe("s.a", durable="d")
    assert isinstance(sub, JsSubscription)
    msgs = [sub.next_msg(timeout=5) for _ in range(10)]
    assert [m.data for m in msgs] == [b"m%d" % i for i in range(10)]
    assert [m.metadata.sequence.consumer for m in msgs] == list(range(1, 11))
    for m in msgs:
        m.ack()
    assert sub.delivered == 10 and sub.sequence_mismatch is None
    with pytest.raises(errors.TimeoutError):
        sub.next_msg(timeout=0.3)
    eventually(lambda: _acked_all(js, "S", "d", 10))
    info = sub.consumer_info()
    assert info.config.deliver_subject == sub.subject and info.config.filter_subject == "s.a"
    assert info.push_bound


def test_iteration_ends_on_unsubscribe(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 3)
    sub = js.subscribe("s.a")
    got = []
    for m in sub:
        got.append(m.data)
        if len(got) == 3:
            sub.unsubscribe()
    assert got == [b"m0", b"m1", b"m2"]


def test_callback_acks_after_return_and_not_after_raise(nc: jsclient.Client, js: JetStream) -> None:
    seen: list[int] = []
    done = threading.Event()

    def cb(m: Msg) -> None:
        seq = m.metadata.sequence.stream
        seen.append(seq)
        if seq == 3 and m.metadata.num_delivered == 1:
            raise RuntimeError("handler failed")  # not acked: redelivered
        if len(seen) >= 6:
            done.set()

    sub = js.subscribe("s.a", durable="d", cb=cb, config={"ack_wait": 1.0})
    _publish(nc, 5)
    assert done.wait(10)
    assert sorted(seen) == [1, 2, 3, 3, 4, 5]
    eventually(lambda: _acked_all(js, "S", "d", 5))
    sub.unsubscribe()


def test_callback_runs_on_a_library_thread_with_manual_ack(
    nc: jsclient.Client, js: JetStream
) -> None:
    threads: list[str] = []
    got: list[Msg] = []
    done = threading.Event()

    def cb(m: Msg) -> None:
        threads.append(threading.current_thread().name)
        got.append(m)
        if len(got) == 3:
            done.set()

    sub = js.subscribe("s.a", durable="d", cb=cb, manual_ack=True)
    _publish(nc, 3)
    assert done.wait(10)
    assert all(t.startswith("jsclient-") for t in threads)
    time.sleep(0.3)
    assert js.consumer("S", "d").info().num_ack_pending == 3  # nothing acked for us
    for m in got:
        m.ack()
    eventually(lambda: _acked_all(js, "S", "d", 3))
    with pytest.raises(errors.BadSubscriptionError):
        sub.next_msg(timeout=0.1)  # a callback subscription has no next_msg
    sub.drain()


def test_queue_group_shares_the_work(nc: jsclient.Client, js: JetStream) -> None:
    counts = {"a": 0, "b": 0}
    seqs: list[int] = []
    lock = threading.Lock()

    def member(name: str) -> Callable[[Msg], None]:
        def cb(m: Msg) -> None:
            with lock:
                counts[name] += 1
                seqs.append(m.metadata.sequence.stream)

        return cb

    a = js.subscribe("s.a", "workers", cb=member("a"))
    b = js.subscribe("s.a", "workers", cb=member("b"))
    assert a.consumer_name == b.consumer_name == "workers"  # the queue name is the durable
    assert _consumers(js) == ["workers"]
    _publish(nc, 300)
    eventually(lambda: len(seqs) >= 300)
    time.sleep(0.2)
    assert sorted(seqs) == list(range(1, 301))  # each message to exactly one member
    assert counts["a"] > 0 and counts["b"] > 0
    info = a.consumer_info()
    assert info.config.deliver_group == "workers"
    b.unsubscribe(), a.unsubscribe()


def test_queue_members_racing_to_create_the_durable_share_it(
    nc: jsclient.Client, js: JetStream
) -> None:
    """Members subscribing at once: the losers of the create race look it up and move."""
    members: list[JsSubscription] = []
    failures: list[BaseException] = []
    start = threading.Barrier(6)
    got: list[int] = []
    lock = threading.Lock()

    def on_msg(m: Msg) -> None:
        with lock:
            got.append(m.metadata.sequence.stream)

    def join() -> None:
        start.wait(10)
        try:
            sub = js.subscribe("s.a", "racers", cb=on_msg, delete_consumer="never")
        except BaseException as exc:
            failures.append(exc)
        else:
            with lock:
                members.append(sub)

    threads = [threading.Thread(target=join) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not failures and len(members) == 6
    assert {m.subject for m in members} == {
        js.consumer("S", "racers").cached_info.config.deliver_subject
    }
    _publish(nc, 100)
    eventually(lambda: len(got) >= 100)
    time.sleep(0.2)
    assert sorted(got) == list(range(1, 101))
    for m in members:
        m.unsubscribe()


def test_ephemeral_consumer_deleted_after_drain(nc: jsclient.Client, js: JetStream) -> None:
    got: list[bytes] = []
    sub = js.subscribe("s.a", cb=lambda m: got.append(m.data))
    name = sub.consumer_name
    assert _consumers(js) == [name]
    info = sub.consumer_info()
    assert info.config.durable_name is None
    _publish(nc, 20)
    eventually(lambda: len(got) == 20)
    sub.drain()
    assert _consumers(js) == []
    assert got == [b"m%d" % i for i in range(20)]


# -- automatic status management --------------------------------------------------


def test_flow_control_with_a_slow_sync_reader(nc: jsclient.Client, js: JetStream) -> None:
    total = 20_000
    sub = js.subscribe("s.a", durable="d", flow_control=True, idle_heartbeat=1.0)
    assert sub.consumer_info().config.flow_control
    payload = b"p" * 256
    publish_stored(nc, "s.a", (payload for _ in range(total)))
    seen: set[int] = set()
    for i in range(total):
        m = sub.next_msg(timeout=10)
        seq = m.metadata.sequence.stream
        assert seq not in seen
        seen.add(seq)
        m.ack()
        if i % 500 == 0:
            time.sleep(0.01)  # a slow reader: the server must wait for it
    assert seen == set(range(1, total + 1))
    assert sub.flow_control_answered > 0
    assert sub.sequence_mismatch is None
    with pytest.raises(errors.TimeoutError):
        sub.next_msg(timeout=0.3)


def test_flow_control_is_answered_when_reached_and_once(
    nc: jsclient.Client, js: JetStream, other: jsclient.Client
) -> None:
    sub = js.subscribe("s.a", durable="d", flow_control=True, idle_heartbeat=5.0)
    answers = other.subscribe("fc.reply.>")
    other.flush()
    _publish(nc, 2)
    _inject(other, sub.subject, "100 FlowControl Request", reply="fc.reply.1")
    _inject(other, sub.subject, "100 FlowControl Request", reply="fc.reply.1")
    eventually(lambda: sub.pending_msgs >= 4)
    with pytest.raises(errors.TimeoutError):
        answers.next_msg(timeout=0.3)  # not answered while the user has not reached it
    assert [sub.next_msg(timeout=2).data for _ in range(2)] == [b"m0", b"m1"]
    with pytest.raises(errors.TimeoutError):
        sub.next_msg(timeout=0.3)  # reaching it answers it; it is no message
    assert answers.next_msg(timeout=2).subject == "fc.reply.1"
    with pytest.raises(errors.TimeoutError):
        answers.next_msg(timeout=0.3)  # the same subject is answered once


def test_stalled_header_in_a_heartbeat_is_answered(js: JetStream, other: jsclient.Client) -> None:
    sub = js.subscribe("s.a", durable="d", flow_control=True, idle_heartbeat=5.0)
    answers = other.subscribe("fc.stalled.>")
    other.flush()
    for _ in range(2):
        _inject(
            other,
            sub.subject,
            "100 Idle Heartbeat",
            {
                "Nats-Last-Consumer": "0",
                "Nats-Last-Stream": "0",
                "Nats-Consumer-Stalled": "fc.stalled.7",
            },
        )
    _consume_until(sub, lambda: sub.flow_control_answered)
    assert answers.next_msg(timeout=2).subject == "fc.stalled.7"
    with pytest.raises(errors.TimeoutError):
        answers.next_msg(timeout=0.3)
    assert sub.flow_control_answered == 1


def test_heartbeat_alarm_when_the_server_stops(
    nats_server: NatsServer, nc: jsclient.Client, js: JetStream, errs: Errors
) -> None:
    _publish(nc, 2)
    sub = js.subscribe("s.a", durable="d", idle_heartbeat=0.5, error_cb=errs)
    for _ in range(2):
        sub.next_msg(timeout=5).ack()
    time.sleep(1.0)
    assert errs.of(errors.HeartbeatAlarmError) == []  # heartbeats keep it quiet
    t0 = time.monotonic()
    nats_server.kill()
    try:
        alarms = eventually(lambda: errs.of(errors.HeartbeatAlarmError), timeout=10)
        took = time.monotonic() - t0
    finally:
        nats_server.start()
    alarm = alarms[0]
    assert (alarm.last_stream_seq, alarm.last_consumer_seq) == (2, 2)
    assert 1.0 <= took <= 4.0  # 3 x 0.5 s, checked every 0.5 s
    assert isinstance(alarm, jsclient.errors.JetStreamError)
    sub.unsubscribe()


def test_gap_from_a_heartbeat_is_reported_once(
    nc: jsclient.Client, js: JetStream, other: jsclient.Client, errs: Errors
) -> None:
    _publish(nc, 3)
    sub = js.subscribe("s.a", durable="d", idle_heartbeat=5.0, error_cb=errs)
    for _ in range(3):
        sub.next_msg(timeout=5).ack()
    ahead = {"Nats-Last-Consumer": "8", "Nats-Last-Stream": "8"}
    _inject(other, sub.subject, "100 Idle Heartbeat", ahead)
    _inject(other, sub.subject, "100 Idle Heartbeat", ahead)
    eventually(lambda: sub.pending_msgs >= 2)  # both arrived; consuming handles them
    with pytest.raises(errors.TimeoutError):
        sub.next_msg(timeout=0.3)
    gaps = eventually(lambda: errs.of(errors.SequenceMismatchError))
    time.sleep(0.2)
    assert len(errs.of(errors.SequenceMismatchError)) == 1  # once per gap
    gap = gaps[0]
    assert (gap.consumer_sequence, gap.last_consumer_sequence) == (3, 8)
    assert gap.stream_resume_sequence == 4
    assert sub.sequence_mismatch is gap
    js.publish("s.a", b"next")
    assert sub.next_msg(timeout=5).data == b"next"
    assert sub.sequence_mismatch is None


def test_messages_dropped_by_a_slow_consumer_are_a_gap(
    nc: jsclient.Client, js: JetStream, errs: Errors
) -> None:
    sub = js.subscribe("s.a", durable="d", pending_msgs_limit=10, idle_heartbeat=0.5, error_cb=errs)
    _publish(nc, 200)
    eventually(lambda: sub.dropped > 0)
    eventually(lambda: sub._received + sub.dropped >= 200)
    delivered = []
    while True:
        try:
            m = sub.next_msg(timeout=0.5)
        except errors.TimeoutError:
            break
        delivered.append(m.metadata.sequence.consumer)
    assert len(delivered) == 10

    gaps = _consume_until(sub, lambda: errs.of(errors.SequenceMismatchError))
    assert len(gaps) == 1 and gaps[0].consumer_sequence == 10
    assert gaps[0].last_consumer_sequence == 200 and gaps[0].stream_resume_sequence == 11
    assert isinstance(errs.of(errors.SlowConsumerError)[0], errors.SlowConsumerError)
    sub.unsubscribe()


def test_queue_subscriptions_do_not_check_gaps(
    nc: jsclient.Client, js: JetStream, other: jsclient.Client, errs: Errors
) -> None:
    sub = js.subscribe("s.a", "q", error_cb=errs)
    _publish(nc, 2)
    sub.next_msg(timeout=5).ack()
    _inject(other, sub.subject, "100 Idle Heartbeat", {"Nats-Last-Consumer": "9"})
    sub.next_msg(timeout=5).ack()
    time.sleep(0.3)
    assert errs.of(errors.SequenceMismatchError) == []


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("409 Consumer Deleted", errors.StatusError),
        ("503 No Responders", errors.NoRespondersError),
        ("418 Unknown Thing", errors.StatusError),
    ],
)
def test_error_statuses_raise_from_next_msg(
    js: JetStream, other: jsclient.Client, line: str, error: type[Exception]
) -> None:
    sub = js.subscribe("s.a", durable="d")
    _inject(other, sub.subject, line)
    with pytest.raises(error) as ei:
        sub.next_msg(timeout=5)
    assert type(ei.value) is error
    # 404 and 408 never reach the user; the subscription goes on.
    _inject(other, sub.subject, "404 No Messages")
    _inject(other, sub.subject, "408 Request Timeout")
    js.publish("s.a", b"after")
    assert sub.next_msg(timeout=5).data == b"after"


def test_error_statuses_go_to_error_cb_for_a_callback(
    js: JetStream, other: jsclient.Client, errs: Errors
) -> None:
    got: list[bytes] = []
    sub = js.subscribe("s.a", durable="d", cb=lambda m: got.append(m.data), error_cb=errs)
    _inject(other, sub.subject, "409 Something New")
    js.publish("s.a", b"after")
    eventually(lambda: got == [b"after"])
    err = eventually(lambda: errs.of(errors.StatusError))[0]
    assert err.status == 409 and err.description == "Something New"
    sub.unsubscribe()


# -- ordered push ----------------------------------------------------------------


def test_ordered_push_reads_in_order_across_a_forced_reset(
    nc: jsclient.Client, js: JetStream, other: jsclient.Client, errs: Errors
) -> None:
    total = 50_000
    publish_stored(nc, "s.a", (b"%d" % i for i in range(total)))
    sub = js.subscribe("s.a", ordered_consumer=True, idle_heartbeat=0.5, error_cb=errs)
    first = sub.consumer_info()
    cfg = first.config
    assert str(getattr(cfg.ack_policy, "value", cfg.ack_policy)) == "none"
    assert cfg.flow_control and cfg.mem_storage and cfg.num_replicas == 1
    seqs = []
    for _ in range(total // 2):
        seqs.append(sub.next_msg(timeout=10).metadata.sequence.stream)
    # Lose the consumer on the server side: heartbeats stop, the alarm resets it.
    other.jetstream().delete_consumer("S", sub.consumer_name)
    while len(seqs) < total:
        seqs.append(sub.next_msg(timeout=15).metadata.sequence.stream)
    assert seqs == list(range(1, total + 1))
    assert sub.resets >= 1 and sub.consumer_name != first.name
    # A gap (a heartbeat ahead of what was delivered) resets it at once.
    js.publish("s.a", b"tail")
    assert sub.next_msg(timeout=10).data == b"tail"
    _inject(other, sub._deliver, "100 Idle Heartbeat", {"Nats-Last-Consumer": "1000000"})
    resets = sub.resets
    js.publish("s.a", b"tail2")
    assert sub.next_msg(timeout=10).data == b"tail2"
    assert sub.resets == resets + 1
    name = sub.consumer_name
    sub.unsubscribe()
    assert name not in _consumers(js)


def test_ordered_push_recovers_after_a_restart(
    nats_server: NatsServer, nc: jsclient.Client, js: JetStream
) -> None:
    publish_stored(nc, "s.a", (b"%d" % i for i in range(100)))
    got = []
    sub = js.subscribe("s.a", ordered_consumer=True, idle_heartbeat=0.5)
    for _ in range(50):
        got.append(int(sub.next_msg(timeout=5).data))
    nats_server.restart()
    while len(got) < 100:
        got.append(int(sub.next_msg(timeout=15).data))
    assert got == list(range(100))
    sub.unsubscribe()


def test_ordered_push_with_a_callback(nc: jsclient.Client, js: JetStream) -> None:
    publish_stored(nc, "s.a", (b"%d" % i for i in range(500)))
    got: list[int] = []
    sub = js.subscribe("s.a", ordered_consumer=True, cb=lambda m: got.append(int(m.data)))
    eventually(lambda: len(got) == 500)
    assert got == list(range(500))
    sub.unsubscribe()


# -- consumer lifecycle ------------------------------------------------------------


def test_delete_policies(js: JetStream) -> None:
    made = js.subscribe("s.a", durable="made")
    made.unsubscribe()
    assert "made" not in _consumers(js)  # if_created: it made it, it deletes it
    js.create_consumer("S", durable_name="kept", deliver_subject="dk", ack_policy="explicit")
    js.subscribe("s.a", durable="kept").unsubscribe()
    assert "kept" in _consumers(js)  # if_created: not made here, kept
    js.subscribe("s.a", durable="never", delete_consumer="never").unsubscribe()
    assert "never" in _consumers(js)
    js.subscribe("s.a", durable="kept", delete_consumer="always").drain()
    assert "kept" not in _consumers(js)


def test_queue_group_hazard_and_its_remedy(nc: jsclient.Client, js: JetStream) -> None:
    """The first member made the durable; with if_created its drain deletes it for all."""
    m1 = js.subscribe("s.a", "shared")
    m2 = js.subscribe("s.a", "shared")
    m1.drain()
    assert "shared" not in _consumers(js)
    js.publish("s.a", b"lost")
    with pytest.raises(errors.TimeoutError):
        m2.next_msg(timeout=0.5)  # m2 receives nothing any more
    m2.unsubscribe()
    # The remedy: members of a long-lived group never delete the durable.
    m1 = js.subscribe("s.a", "group2", delete_consumer="never")
    m2 = js.subscribe("s.a", "group2", delete_consumer="never")
    m1.drain()
    js.publish("s.a", b"kept")
    assert m2.next_msg(timeout=5).data == b"kept"
    m2.unsubscribe()
    assert "group2" in _consumers(js)


def test_failed_delete_after_drain_goes_to_error_cb(
    nats_server: NatsServer, nc: jsclient.Client, errs: Errors
) -> None:
    js = nc.jetstream(timeout=1.0)
    js.create_stream(name="S", subjects=["s.>"])
    sub = js.subscribe("s.a", durable="d", error_cb=errs, delete_consumer="always")
    nats_server.kill()
    try:
        sub.drain(timeout=2.0)
        err = eventually(lambda: errs.of(errors.TimeoutError))[0]
        assert "CONSUMER.DELETE" in str(err)
    finally:
        nats_server.start()


# -- checks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "code"),
    [
        (
            {"subject": "s.a", "queue": "q", "idle_heartbeat": 1.0},
            errors.QueueHeartbeatError,
            90006,
        ),
        ({"subject": "s.a", "queue": "q", "flow_control": True}, errors.QueueHeartbeatError, 90006),
        (
            {"subject": "s.a", "queue": "q", "config": {"idle_heartbeat": 2.0}},
            errors.QueueHeartbeatError,
            90006,
        ),
        ({"subject": None}, errors.SubjectRequiredError, 90021),
        ({"subject": "none.here"}, errors.NoStreamMatchError, 90007),
        ({"subject": "s.a", "consumer": "missing"}, errors.ConsumerRequiredError, 90017),
        (
            {"subject": "s.a", "queue": "q", "ordered_consumer": True},
            errors.OrderedQueueError,
            90018,
        ),
        (
            {"subject": "s.a", "durable": "d", "ordered_consumer": True},
            errors.OrderedConfigError,
            90024,
        ),
        (
            {"subject": "s.a", "manual_ack": True, "ordered_consumer": True},
            errors.OrderedConfigError,
            90024,
        ),
        (
            {"subject": "s.a", "delete_consumer": "sometimes"},
            errors.DeleteConsumerPolicyError,
            90025,
        ),
        (
            {"subject": "s.a", "queue": "q", "config": {"deliver_group": "other"}},
            errors.QueueMismatchError,
            90015,
        ),
        (
            {"subject": "s.a", "durable": "d", "config": {"filter_subject": "s.b"}},
            errors.FilterSubjectMismatchError,
            90011,
        ),
    ],
)
def test_checks_fail_before_anything_is_created(
    js: JetStream, kwargs: dict[str, Any], error: type[errors.SubscribeError], code: int
) -> None:
    subs_before = len(js._client._subs)
    with pytest.raises(error) as ei:
        js.subscribe(**kwargs)
    assert isinstance(ei.value, errors.SubscribeError) and ei.value.code == code
    assert f"SUB-{code}" in str(ei.value)
    assert _consumers(js) == []
    assert len(js._client._subs) <= subs_before + 1  # at most the API reply inbox


def test_several_streams_match(js: JetStream) -> None:
    js.create_stream(name="X1", subjects=["x.a"])
    js.create_stream(name="X2", subjects=["x.b"])
    with pytest.raises(errors.MultipleStreamsMatchError):
        js.subscribe("x.*")


def test_duplicate_subscription_to_a_bound_consumer(js: JetStream) -> None:
    first = js.subscribe("s.a", durable="d")
    eventually(lambda: first.consumer_info().push_bound)
    with pytest.raises(errors.ConsumerBoundError) as ei:
        js.subscribe("s.a", durable="d")
    assert ei.value.code == 90012
    first.unsubscribe()


def test_queue_rules_against_existing_consumers(js: JetStream) -> None:
    js.create_consumer("S", durable_name="grp", deliver_subject="dg", deliver_group="g1")
    js.create_consumer("S", durable_name="plain", deliver_subject="dp")
    with pytest.raises(errors.ConsumerIsQueueError) as e1:
        js.subscribe("s.a", durable="grp")
    with pytest.raises(errors.QueueMismatchError) as e2:
        js.subscribe("s.a", "g2", durable="grp")
    with pytest.raises(errors.ConsumerNotQueueError) as e3:
        js.subscribe("s.a", "g1", durable="plain")
    assert (e1.value.code, e2.value.code, e3.value.code) == (90014, 90015, 90013)
    ok = js.subscribe("s.a", "g1", durable="grp")
    assert ok.subject == "dg" and ok.queue == "g1"
    ok.unsubscribe()


def test_pull_consumer_is_refused_for_push(js: JetStream) -> None:
    js.create_consumer("S", durable_name="pull")
    with pytest.raises(errors.PullConsumerError) as ei:
        js.subscribe("s.a", durable="pull")
    assert ei.value.code == 90009 and "pull_subscribe" in str(ei.value)


def test_differing_config_is_refused(js: JetStream) -> None:
    js.create_consumer("S", durable_name="d", deliver_subject="dd", max_deliver=3)
    with pytest.raises(errors.ConsumerConfigMismatchError) as ei:
        js.subscribe("s.a", durable="d", config={"max_deliver": 4})
    assert ei.value.code == 90016 and "max_deliver" in str(ei.value)
    # Binding by consumer name with matching settings works.
    sub = js.subscribe("s.a", consumer="d", config={"max_deliver": 3})
    assert sub.consumer_name == "d" and sub.subject == "dd"
    sub.unsubscribe()
    assert "d" in _consumers(js)  # bound, not created: kept


def test_bind_by_stream_and_consumer_without_subject(nc: jsclient.Client, js: JetStream) -> None:
    js.create_consumer("S", durable_name="d", deliver_subject="dd")
    _publish(nc, 2)
    sub = js.subscribe(None, stream="S", consumer="d")
    assert [sub.next_msg(timeout=5).data for _ in range(2)] == [b"m0", b"m1"]
    sub.unsubscribe()


# -- nats-py interop -----------------------------------------------------------------


def test_nats_py_durable_push_consumer_is_reused_and_the_reverse(
    nats_server: NatsServer, nc: jsclient.Client, js: JetStream
) -> None:
    _publish(nc, 4)

    async def py_first() -> list[bytes]:
        c = await nats.connect(nats_server.url)
        try:
            njs = c.jetstream()
            # A short ack wait: what this subscription was sent beyond the two it
            # acks is redelivered to the next subscriber soon after it leaves.
            cfg = nats.js.api.ConsumerConfig(ack_wait=1.0)
            sub = await njs.subscribe("s.a", durable="pyd", manual_ack=True, config=cfg)
            out = []
            for _ in range(2):
                m = await sub.next_msg(timeout=5)
                await m.ack()
                out.append(m.data)
            await sub.unsubscribe()
            return out
        finally:
            await c.close()

    def unbound(name: str) -> bool:
        # The server drops a push consumer's binding after the unsubscribe,
        # on its own time: a subscribe (ours or nats-py's) refuses it while bound.
        return not js.consumer("S", name).info().push_bound

    assert asyncio.run(py_first()) == [b"m0", b"m1"]
    eventually(lambda: unbound("pyd"))
    sub = js.subscribe("s.a", durable="pyd")  # made by nats-py: reused, not deleted
    got = [sub.next_msg(timeout=5) for _ in range(2)]
    assert [m.data for m in got] == [b"m2", b"m3"]
    for m in got:
        m.ack()
    sub.unsubscribe()
    assert "pyd" in _consumers(js)

    mine = js.subscribe("s.a", durable="jsd", delete_consumer="never", config={"ack_wait": 1.0})
    mine.next_msg(timeout=5).ack()
    mine.unsubscribe()
    eventually(lambda: unbound("jsd"))

    async def py_second() -> list[bytes]:
        c = await nats.connect(nats_server.url)
        try:
            njs = c.jetstream()
            sub = await njs.subscribe("s.a", durable="jsd", manual_ack=True)
            out = []
            for _ in range(3):
                m = await sub.next_msg(timeout=5)
                await m.ack()
                out.append(m.data)
            await sub.unsubscribe()
            return out
        finally:
            await c.close()

    assert asyncio.run(py_second()) == [b"m1", b"m2", b"m3"]
