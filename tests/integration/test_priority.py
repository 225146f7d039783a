"""Priority groups (ADR-42) against a real nats-server: pinned_client, overflow,
prioritized, the client-side checks, and the priority fields of configs and infos."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import nats.js.api
import pytest
from _js import eventually, publish_stored

import jsclient
from jsclient import errors
from jsclient.api import ConsumerConfig, ConsumerInfo, PriorityGroupState, PriorityPolicy
from jsclient.jetstream.consume.consumer import Consumer
from jsclient.jetstream.context import JetStream
from jsclient.msg import Msg
from jsclient.server import NatsServer

GROUP = "jobs"


@pytest.fixture
def js(nc: jsclient.Client) -> JetStream:
    js = nc.jetstream()
    js.create_stream(name="JOBS", subjects=["jobs.>"])
    return js


@pytest.fixture
def nc2(nats_server: NatsServer) -> Iterator[jsclient.Client]:
    """A second connection: another client of the same consumer."""
    client = jsclient.connect(nats_server.url)
    try:
        yield client
    finally:
        client.close()


def _publish(nc: jsclient.Client, n: int, start: int = 0) -> None:
    publish_stored(nc, "jobs.a", (b"%d" % i for i in range(start, start + n)))


def _pinned(js: JetStream, timeout: float = 1.0, name: str = "workers") -> Consumer:
    return js.create_consumer(
        "JOBS",
        durable_name=name,
        ack_policy="explicit",
        priority_groups=[GROUP],
        priority_policy="pinned_client",
        priority_timeout=timeout,
    )


class _Worker:
    """One client consuming the group, recording what it got and its errors."""

    def __init__(self, c: Consumer, **options: Any) -> None:
        self.got: list[bytes] = []
        self.errors: list[BaseException] = []
        self.lock = threading.Lock()
        # Pulls expire (and are made again) every second: a pinned client keeps
        # its pin as long as priority_timeout is longer than that.
        self.cc = c.consume(
            self._on_msg, group=GROUP, expires=1.0, error_cb=self.errors.append, **options
        )

    def _on_msg(self, msg: Msg) -> None:
        with self.lock:
            self.got.append(msg.data)
        msg.ack()

    def count(self) -> int:
        with self.lock:
            return len(self.got)

    def stop(self) -> None:
        self.cc.stop()
        assert self.cc.wait(5.0)


def _pin_of(c: Consumer) -> str | None:
    groups = c.info().priority_groups or []
    return groups[0].pinned_client_id if groups else None


# -- configs and infos -------------------------------------------------------


def test_config_and_info_carry_the_priority_fields(js: JetStream) -> None:
    c = _pinned(js, timeout=30.0)
    cfg = c.cached_info.config
    assert isinstance(cfg, ConsumerConfig) and isinstance(c.cached_info, ConsumerInfo)
    assert cfg.priority_groups == [GROUP]
    assert cfg.priority_policy == PriorityPolicy.PINNED_CLIENT == "pinned_client"
    assert cfg.priority_timeout == 30.0  # seconds, sent as nanoseconds
    state = c.cached_info.priority_groups
    assert state is not None and len(state) == 1
    assert isinstance(state[0], PriorityGroupState)
    assert state[0].group == GROUP and state[0].pinned_client_id is None
    assert state[0].pinned_ts is None
    # Only priority_timeout may change on update.
    updated = js.update_consumer("JOBS", cfg, priority_timeout=45.5)
    assert updated.cached_info.config.priority_timeout == 45.5
    # Every decoder of ConsumerInfo gives the extended class.
    bound = js.pull_subscribe_bind("workers", stream="JOBS")
    psub = js.pull_subscribe("jobs.>", "workers", stream="JOBS")
    try:
        infos = [
            js.consumer("JOBS", "workers").cached_info,
            js.stream("JOBS").consumer("workers").info(),
            next(iter(js.stream("JOBS").consumers())),
            bound.consumer_info(),
            psub.consumer_info(),
        ]
    finally:
        bound.unsubscribe()
        psub.unsubscribe()
    for info in infos:
        assert type(info) is ConsumerInfo
        assert info.config.priority_groups == [GROUP]
        assert info.config.priority_timeout == 45.5
        assert info.priority_groups and info.priority_groups[0].group == GROUP


def test_pinned_client_state_in_the_info(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 2)
    c = _pinned(js)
    assert len(list(c.fetch(1, expires=2.0, group=GROUP))) == 1
    pin = c._pull_engine().pin_id
    assert pin
    state = c.info().priority_groups
    assert state is not None
    assert state[0].pinned_client_id == pin
    assert state[0].pinned_ts is not None and state[0].pinned_ts.tzinfo is not None


def test_other_policies_and_config_forms(js: JetStream) -> None:
    over = js.create_consumer(
        "JOBS", name="over", priority_groups=["a"], priority_policy=PriorityPolicy.OVERFLOW
    )
    assert over.cached_info.config.priority_policy == "overflow"
    assert over.cached_info.config.priority_timeout is None
    prio = js.create_consumer(
        "JOBS", {"name": "prio", "priority_groups": ["a"], "priority_policy": "prioritized"}
    )
    assert prio.cached_info.config.priority_policy == "prioritized"
    # The server's default pin timeout is 2 minutes.
    pinned = js.create_consumer(
        "JOBS", name="pin", priority_groups=["a"], priority_policy="pinned_client"
    )
    assert pinned.cached_info.config.priority_timeout == 120.0
    # nats-py's own ConsumerConfig is accepted as it is.
    plain = js.create_consumer("JOBS", nats.js.api.ConsumerConfig(name="plain"))
    assert plain.cached_info.config.priority_groups is None
    assert plain.cached_info.priority_groups is None


def test_server_refusals_are_typed_with_their_codes(js: JetStream) -> None:
    with pytest.raises(errors.BadRequestError) as info:
        js.create_consumer("JOBS", name="x", priority_policy="overflow")
    assert info.value.err_code == 10159  # a policy needs a group
    with pytest.raises(errors.BadRequestError) as info:
        js.create_consumer("JOBS", name="x", priority_groups=["a"])
    assert info.value.err_code == 10196  # groups need a policy
    with pytest.raises(errors.BadRequestError) as info:
        js.create_consumer(
            "JOBS",
            name="x",
            priority_groups=["a"],
            priority_policy="overflow",
            deliver_subject="push.here",
        )
    assert info.value.err_code == 10178  # not on push consumers


# -- pinned_client -------------------------------------------------------------


def test_one_pinned_client_at_a_time_and_takeover_after_the_timeout(
    nc: jsclient.Client, nc2: jsclient.Client, js: JetStream
) -> None:
    c1 = _pinned(js, timeout=2.5)
    c2 = nc2.jetstream().consumer("JOBS", "workers")
    w1 = _Worker(c1)
    _publish(nc, 1)
    eventually(lambda: w1.count() == 1)  # c1 pulled first: it holds the pin
    w2 = _Worker(c2)
    try:
        time.sleep(3.0)  # longer than priority_timeout: c1 keeps the pin by pulling
        _publish(nc, 30, start=1)
        eventually(lambda: w1.count() == 31)
        time.sleep(0.3)
        assert w2.count() == 0  # the standby got nothing
        assert _pin_of(c1) == c1._pull_engine().pin_id
        # The pinned client stops pulling: after priority_timeout the server
        # drops its pin, and c2 is pinned with the next message.
        w1.stop()
        t0 = time.monotonic()
        eventually(lambda: _pin_of(c1) is None)
        # 2.5 s after c1's last pull, made about 1 s or less before it stopped.
        assert time.monotonic() - t0 >= 0.8
        _publish(nc, 10, start=31)
        eventually(lambda: w2.count() == 10)
        pin2 = c2._pull_engine().pin_id
        assert pin2 and pin2 != c1._pull_engine().pin_id
        assert _pin_of(c2) == pin2
        assert w1.count() == 31
    finally:
        w1.stop()
        w2.stop()
    assert not w1.errors and not w2.errors


def test_unpin_moves_the_pin_and_the_old_pin_gets_423(
    nc: jsclient.Client, nc2: jsclient.Client, js: JetStream
) -> None:
    c1 = _pinned(js, timeout=30.0)
    c2 = nc2.jetstream().consumer("JOBS", "workers")
    w1 = _Worker(c1)
    _publish(nc, 1)
    eventually(lambda: w1.count() == 1)
    old_pin = c1._pull_engine().pin_id
    w2 = _Worker(c2)
    try:
        time.sleep(0.3)
        js.unpin_consumer("JOBS", "workers", GROUP)  # an admin, not the pinned client
        _publish(nc, 10, start=1)
        # The waiting pulls of c1 carry the old pin: the server drops them with a
        # 423, and c2's unpinned pull is the one pinned next.
        eventually(lambda: w2.count() == 10)
        assert w1.count() == 1
        eventually(lambda: any(isinstance(e, errors.PinIdMismatchError) for e in w1.errors))
        assert all(isinstance(e, errors.PinIdMismatchError) for e in w1.errors)
        assert all(e.status == 423 for e in w1.errors)  # type: ignore[attr-defined]
        assert c1._pull_engine().pin_id is None  # c1 pulls on unpinned
        assert c2._pull_engine().pin_id not in (None, old_pin)
        # c1 is a standby now: c2 keeps the messages while it pulls.
        _publish(nc, 10, start=11)
        eventually(lambda: w2.count() == 20)
        assert w1.count() == 1
    finally:
        w1.stop()
        w2.stop()
    assert not w2.errors


def test_consumer_unpin_drops_its_own_pin(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 3)
    c = _pinned(js, timeout=30.0)
    assert len(list(c.fetch(1, expires=2.0, group=GROUP))) == 1
    first = c._pull_engine().pin_id
    assert first and _pin_of(c) == first
    c.unpin(GROUP)
    assert c._pull_engine().pin_id is None
    assert _pin_of(c) is None
    # The next pull is an unpinned client's: it is pinned anew.
    assert len(list(c.fetch(1, expires=2.0, group=GROUP))) == 1
    assert c._pull_engine().pin_id not in (None, first)
    with pytest.raises(errors.InvalidPriorityGroupError):
        c.unpin("other")  # checked against the cached info, nothing sent
    with pytest.raises(errors.BadRequestError) as info:
        js.unpin_consumer("JOBS", "workers", "other")  # the server's check
    assert info.value.err_code == 10160
    with pytest.raises(errors.ConsumerNotFoundError):
        js.unpin_consumer("JOBS", "nosuch", GROUP)


def test_fetch_with_a_stale_pin_pulls_again_unpinned(
    nc: jsclient.Client, nc2: jsclient.Client, js: JetStream
) -> None:
    _publish(nc, 5)
    c1 = _pinned(js, timeout=2.0)
    assert len(list(c1.fetch(1, expires=2.0, group=GROUP))) == 1
    old = c1._pull_engine().pin_id
    # While c1 holds the pin another client gets nothing.
    c2 = nc2.jetstream().consumer("JOBS", "workers")
    assert list(c2.fetch(1, expires=0.5, group=GROUP)) == []
    js.unpin_consumer("JOBS", "workers", GROUP)
    # c1's pull still carries the old pin: answered 423, made again without it
    # within the same fetch, and pinned anew.
    batch = c1.fetch(2, expires=3.0, group=GROUP)
    assert len(list(batch)) == 2 and batch.error is None
    new = c1._pull_engine().pin_id
    assert new not in (None, old)
    # A pin that does not match the current one: 423 at once, pull again unpinned
    # (a standby now: nothing within the fetch, no error), then take over after
    # the pinned client's timeout.
    c2._pull_engine().pin_id = old
    t0 = time.monotonic()
    batch = c2.fetch(1, expires=0.6, group=GROUP)
    assert list(batch) == [] and batch.error is None
    assert time.monotonic() - t0 >= 0.5
    assert c2._pull_engine().pin_id is None
    got = list(c2.fetch(1, expires=5.0, group=GROUP))
    assert len(got) == 1
    assert c2._pull_engine().pin_id not in (None, old, new)


def test_next_and_messages_keep_the_pin(nc: jsclient.Client, js: JetStream) -> None:
    _publish(nc, 4)
    c = _pinned(js, timeout=30.0)
    first = c.next(timeout=2.0, group=GROUP)
    first.ack()
    pin = c._pull_engine().pin_id
    assert pin
    with c.messages(group=GROUP, expires=2.0) as it:
        for _ in range(3):
            it.next(timeout=2.0).ack()
    assert c._pull_engine().pin_id == pin == _pin_of(c)


def test_pull_subscribe_fetch_with_a_pinned_group(
    nc: jsclient.Client, nc2: jsclient.Client, js: JetStream
) -> None:
    _publish(nc, 6)
    _pinned(js, timeout=30.0)
    psub = js.pull_subscribe("jobs.>", "workers", stream="JOBS")
    other = nc2.jetstream().pull_subscribe("jobs.>", "workers", stream="JOBS")
    try:
        msgs = psub.fetch(2, timeout=2.0, group=GROUP)
        assert len(msgs) == 2
        pin = psub._engine.pin_id
        assert pin
        with pytest.raises(errors.TimeoutError):
            other.fetch(1, timeout=0.5, group=GROUP)  # a standby
        assert len(psub.fetch(2, timeout=2.0, group=GROUP)) == 2
        assert psub._engine.pin_id == pin
        with pytest.raises(errors.PriorityGroupRequiredError):
            psub.fetch(1, timeout=1.0)
        js.unpin_consumer("JOBS", "workers", GROUP)
        # The old pin gets a 423; the fetch pulls again unpinned and is pinned anew.
        assert len(psub.fetch(2, timeout=3.0, group=GROUP)) == 2
        assert psub._engine.pin_id not in (None, pin)
    finally:
        psub.unsubscribe()
        other.unsubscribe()


# -- overflow ----------------------------------------------------------------


def _overflow(js: JetStream) -> Consumer:
    return js.create_consumer(
        "JOBS",
        durable_name="over",
        ack_policy="explicit",
        priority_groups=[GROUP],
        priority_policy="overflow",
    )


def test_min_pending_serves_only_while_enough_is_pending(
    nc: jsclient.Client, js: JetStream
) -> None:
    c = _overflow(js)
    _publish(nc, 5)
    # 5 pending < 10: the pull waits, then expires empty.
    batch = c.fetch(5, expires=0.5, group=GROUP, min_pending=10)
    assert list(batch) == [] and batch.error is None
    _publish(nc, 7, start=5)
    # 12 pending: served while at least 10 are pending before each delivery.
    got = list(c.fetch(10, expires=1.0, group=GROUP, min_pending=10))
    assert [m.data for m in got] == [b"0", b"1", b"2"]
    # A pull without the threshold takes what is left.
    rest = list(c.fetch(20, expires=0.5, group=GROUP))
    assert len(rest) == 9


def test_min_ack_pending_serves_only_while_enough_awaits_acks(
    nc: jsclient.Client, nc2: jsclient.Client, js: JetStream
) -> None:
    c = _overflow(js)
    _publish(nc, 10)
    assert list(c.fetch(5, expires=0.5, group=GROUP, min_ack_pending=3)) == []
    # Another client takes 3 and does not ack them yet.
    busy = nc2.jetstream().consumer("JOBS", "over")
    held = list(busy.fetch(3, expires=1.0, group=GROUP))
    assert len(held) == 3
    assert c.info().num_ack_pending == 3
    got = list(c.fetch(2, expires=1.0, group=GROUP, min_ack_pending=3))
    assert [m.data for m in got] == [b"3", b"4"]


def test_consume_with_min_pending_waits_for_a_backlog(nc: jsclient.Client, js: JetStream) -> None:
    c = _overflow(js)
    w = _Worker(c, min_pending=20, max_messages=10)
    try:
        _publish(nc, 5)
        time.sleep(1.0)
        assert w.count() == 0  # 5 pending: no overflow yet
        _publish(nc, 30, start=5)
        # Served while at least 20 are pending: 35 -> 16 left.
        eventually(lambda: w.count() >= 16)
        time.sleep(0.5)
        assert w.count() == 16
    finally:
        w.stop()
    assert not w.errors


def test_every_pull_form_sends_the_group(nc: jsclient.Client, js: JetStream) -> None:
    c = _overflow(js)
    _publish(nc, 7)
    # A no-wait pull finds only what the consumer has counted (the server tells
    # it of new messages after acking them).
    eventually(lambda: c.info().num_pending == 7)
    assert len(list(c.fetch_no_wait(2, group=GROUP))) == 2
    # 2 unacked: min_ack_pending 2 is met, and stays met as more are delivered.
    got = list(c.fetch_bytes(10_000, expires=1.0, group=GROUP, min_ack_pending=2))
    assert [m.data for m in got] == [b"2", b"3", b"4", b"5", b"6"]
    with pytest.raises(errors.TimeoutError):
        c.next(timeout=0.5, group=GROUP, min_pending=1)  # nothing pending now
    psub = js.pull_subscribe(
        "jobs.>",
        "made",
        stream="JOBS",
        config=ConsumerConfig(priority_groups=[GROUP], priority_policy="overflow"),
    )
    try:
        assert psub.consumer_info().config.priority_policy == "overflow"
        # 7 pending: served while at least 2 are pending before each delivery.
        assert len(psub.fetch(7, timeout=2.0, group=GROUP, min_pending=2)) == 6
        with pytest.raises(errors.TimeoutError):
            psub.fetch(1, timeout=0.5, group=GROUP, min_pending=2)
        assert [m.data for m in psub.fetch(1, timeout=2.0, group=GROUP)] == [b"6"]
        with pytest.raises(errors.PriorityGroupRequiredError):
            psub.fetch(1, timeout=1.0)
    finally:
        psub.unsubscribe()


# -- prioritized -------------------------------------------------------------


def test_prioritized_serves_the_lowest_priority_value_first(
    nc: jsclient.Client, nc2: jsclient.Client, js: JetStream
) -> None:
    c = js.create_consumer(
        "JOBS",
        durable_name="prio",
        ack_policy="explicit",
        priority_groups=[GROUP],
        priority_policy="prioritized",
    )
    far = nc2.jetstream().consumer("JOBS", "prio")
    far_batch = far.fetch(10, expires=3.0, group=GROUP, priority=5)
    near_batch = c.fetch(10, expires=3.0, group=GROUP, priority=0)
    eventually(lambda: c.info().num_waiting == 2)
    _publish(nc, 15)
    near = [m.data for m in near_batch]
    rest = [m.data for m in far_batch]
    assert near == [b"%d" % i for i in range(10)]  # served first, in full
    assert rest == [b"%d" % i for i in range(10, 15)]


# -- checks before anything is sent ------------------------------------------


def _sent(nc: jsclient.Client) -> int:
    return int(nc.stats["out_msgs"])


def test_group_is_required_on_every_pull_of_a_grouped_consumer(
    nc: jsclient.Client, js: JetStream
) -> None:
    c = _pinned(js)
    before = _sent(nc)
    calls: list[Callable[[], Any]] = [
        lambda: c.fetch(1),
        lambda: c.fetch_bytes(100),
        lambda: c.fetch_no_wait(1),
        lambda: c.next(timeout=1.0),
        lambda: c.consume(lambda m: None),
        lambda: c.messages(),
    ]
    for call in calls:
        with pytest.raises(errors.PriorityGroupRequiredError):
            call()
    with pytest.raises(errors.InvalidPriorityGroupError):
        c.fetch(1, group="other")
    with pytest.raises(errors.InvalidPriorityGroupError):
        c.fetch(1, group="bad group!")
    with pytest.raises(errors.PriorityPolicyError):
        c.fetch(1, group=GROUP, min_pending=5)  # min_pending needs overflow
    with pytest.raises(errors.PriorityPolicyError):
        c.consume(lambda m: None, group=GROUP, priority=1)  # priority needs prioritized
    with pytest.raises(ValueError):
        c.fetch(1, group=GROUP, min_ack_pending=0)
    assert _sent(nc) == before  # nothing was sent
    assert c.info().num_waiting == 0


def test_group_is_refused_on_a_consumer_without_groups(nc: jsclient.Client, js: JetStream) -> None:
    c = js.create_consumer("JOBS", durable_name="plain")
    over = _overflow(js)
    before = _sent(nc)
    with pytest.raises(errors.InvalidPriorityGroupError):
        c.fetch(1, group=GROUP)
    with pytest.raises(errors.InvalidPriorityGroupError):
        c.messages(group=GROUP)
    with pytest.raises(errors.PriorityPolicyError):
        c.next(timeout=1.0, min_pending=3)
    with pytest.raises(errors.PriorityPolicyError):
        over.fetch(1, group=GROUP, priority=3)
    with pytest.raises(ValueError):
        over.fetch(1, group=GROUP, priority=10)
    assert _sent(nc) == before
    psub = js.pull_subscribe("jobs.>", "plain", stream="JOBS")
    try:
        with pytest.raises(errors.InvalidPriorityGroupError):
            psub.fetch(1, timeout=1.0, group=GROUP)
    finally:
        psub.unsubscribe()


def test_a_stale_handle_gets_the_servers_400(nc: jsclient.Client, js: JetStream) -> None:
    # A handle whose cached info predates the groups cannot check; the server does.
    stale = js.create_consumer("JOBS", durable_name="workers")
    js.delete_consumer("JOBS", "workers")
    _pinned(js)
    batch = stale.fetch(1, expires=2.0)
    assert list(batch) == []
    assert isinstance(batch.error, errors.BadPullRequestError) and batch.error.status == 400
    # A subscription bound without lookups has no info either.
    psub = js.pull_subscribe_bind("workers", stream="JOBS")
    try:
        with pytest.raises(errors.BadPullRequestError):
            psub.fetch(1, timeout=1.0)
        _publish(nc, 1)
        assert len(psub.fetch(1, timeout=2.0, group=GROUP)) == 1
    finally:
        psub.unsubscribe()


# -- server too old ------------------------------------------------------------


def test_an_old_server_is_refused_before_sending(nc: jsclient.Client, js: JetStream) -> None:
    assert js._api_level() >= 5  # nats-server 2.15
    old = nc.jetstream()
    old._levels.seen = 0  # as a 2.10 server answers $JS.API.INFO
    with pytest.raises(errors.FeatureNotSupportedError) as info:
        old.create_consumer(
            "JOBS", name="w", priority_groups=[GROUP], priority_policy="pinned_client"
        )
    assert info.value.required_level == 1 and info.value.server_level == 0
    assert "2.11" in str(info.value)
    with pytest.raises(errors.FeatureNotSupportedError):
        old.create_consumer("JOBS", name="w", pause_until=datetime.now(UTC) + timedelta(minutes=1))
    assert list(js.stream("JOBS").consumer_names()) == []
    js.create_consumer("JOBS", durable_name="w")
    with pytest.raises(errors.FeatureNotSupportedError):
        old.pause_consumer("JOBS", "w", 10.0)
    assert not js.consumer("JOBS", "w").cached_info.paused
    with pytest.raises(errors.FeatureNotSupportedError):
        old.unpin_consumer("JOBS", "w", GROUP)
    with pytest.raises(errors.FeatureNotSupportedError):
        old.reset_consumer("JOBS", "w")
    old._levels.seen = 1  # 2.11: no prioritized policy, no reset
    with pytest.raises(errors.FeatureNotSupportedError) as info:
        old.create_consumer(
            "JOBS", name="p", priority_groups=[GROUP], priority_policy="prioritized"
        )
    assert info.value.required_level == 2
    old.create_consumer("JOBS", name="o", priority_groups=[GROUP], priority_policy="overflow")
    old._levels.seen = 3
    with pytest.raises(errors.FeatureNotSupportedError) as info:
        old.consumer("JOBS", "w").reset()
    assert info.value.required_level == 4 and "2.14" in str(info.value)
