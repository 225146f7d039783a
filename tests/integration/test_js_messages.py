"""Per-message TTL, message schedules and counters against a real server (2.11-2.14 features)."""

from __future__ import annotations

import datetime as dt
import time
from concurrent.futures import Future

import nats.js.errors
import pytest
from _js import wait_for

import jsclient
from jsclient import errors
from jsclient.api import StreamConfig
from jsclient.client import Client
from jsclient.jetstream import JetStream


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


def _count(js: JetStream, stream: str) -> int:
    return int(js.stream(stream).info().state.messages)


def _last(js: JetStream, stream: str, subject: str) -> jsclient.api.RawStreamMsg | None:
    try:
        return js.stream(stream).get_msg(last_by_subject=subject)
    except errors.MessageNotFoundError:
        return None


# -- stream config ---------------------------------------------------------------


def test_stream_config_round_trips_the_new_fields(js: JetStream) -> None:
    s = js.create_stream(
        name="CFG",
        subjects=["cfg.>"],
        storage="memory",
        allow_msg_ttl=True,
        subject_delete_marker_ttl=5.0,
        allow_msg_schedules=True,
        allow_atomic=True,
        allow_batched=True,
    )
    cfg = s.info().config
    assert isinstance(cfg, StreamConfig)
    assert (cfg.allow_msg_ttl, cfg.subject_delete_marker_ttl) == (True, 5.0)
    assert (cfg.allow_msg_schedules, cfg.allow_atomic, cfg.allow_batched) == (True, True, True)
    c = js.create_stream(name="CNT", subjects=["cnt.>"], storage="memory", allow_msg_counter=True)
    assert c.cached_info.config.allow_msg_counter is True
    # An update keeps them (the config goes back as the server gave it).
    assert js.update_stream(cfg).cached_info.config.allow_batched is True


# -- per-message TTL ---------------------------------------------------------------


@pytest.fixture
def ttl_js(js: JetStream) -> JetStream:
    js.create_stream(name="TTL", subjects=["ttl.>"], storage="memory", allow_msg_ttl=True)
    js.create_stream(name="NOTTL", subjects=["nottl.>"], storage="memory")
    return js


def test_publish_ttl_expires_the_message(ttl_js: JetStream) -> None:
    js = ttl_js
    ack = js.publish("ttl.short", b"gone soon", ttl=1)
    js.publish("ttl.keep", b"stays", ttl="never")
    js.publish("ttl.long", b"stays", ttl=3600.5)
    msg = js.stream("TTL").get_msg(ack.seq)
    assert msg.headers == {"Nats-TTL": "1s"}
    assert js.stream("TTL").get_msg(2).headers == {"Nats-TTL": "never"}
    assert js.stream("TTL").get_msg(3).headers == {"Nats-TTL": "3600500ms"}
    assert wait_for(lambda: _last(js, "TTL", "ttl.short") is None, timeout=6)
    assert _count(js, "TTL") == 2


def test_publish_async_and_publisher_carry_ttl(ttl_js: JetStream) -> None:
    js = ttl_js
    fut = js.publish_async("ttl.a", b"x", ttl=1, msg_id="a-1")
    assert fut.result(5).seq == 1
    with jsclient.Publisher(js) as pub:
        flight = pub.publish_async("ttl.b", b"y", ttl=1)
        assert flight.result(5).publish_ack_future.result(5).seq == 2
    assert js.stream("TTL").get_msg(1).headers == {"Nats-TTL": "1s", "Nats-Msg-Id": "a-1"}
    assert js.stream("TTL").get_msg(2).headers == {"Nats-TTL": "1s"}
    assert wait_for(lambda: _count(js, "TTL") == 0, timeout=6)


def test_ttl_on_a_stream_without_allow_msg_ttl_is_refused(ttl_js: JetStream) -> None:
    js = ttl_js
    with pytest.raises(errors.MessageTTLDisabledError) as e:
        js.publish("nottl.a", b"x", ttl=5)
    assert (e.value.code, e.value.err_code) == (400, 10166)
    assert isinstance(e.value, nats.js.errors.BadRequestError)
    fut: Future[jsclient.api.PubAck] = js.publish_async("nottl.a", b"x", ttl=5)
    with pytest.raises(errors.MessageTTLDisabledError):
        fut.result(5)
    with jsclient.Publisher(js) as pub:
        flight = pub.publish_async("nottl.b", b"y", ttl=5)
        flight.result(5)
        with pytest.raises(errors.MessageTTLDisabledError):
            flight.publish_ack_future.result(5)
    assert _count(js, "NOTTL") == 0


@pytest.mark.parametrize("bad", [0, 0.5, -1, True, "soon", "", "5s", [5]])
def test_bad_ttl_is_refused_before_sending(ttl_js: JetStream, bad: object) -> None:
    js = ttl_js
    with pytest.raises(ValueError):
        js.publish("ttl.a", b"x", ttl=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        js.publish_async("ttl.a", b"x", ttl=bad)  # type: ignore[arg-type]
    with jsclient.Publisher(js) as pub, pytest.raises(ValueError):
        pub.publish_async("ttl.a", b"x", ttl=bad)
    assert _count(js, "TTL") == 0


def test_kv_create_takes_never(js: JetStream) -> None:
    kv = js.create_key_value(bucket="kvttl", limit_marker_ttl=1.0, storage="memory")
    kv.create("k", b"v", ttl="never")
    headers = js.stream("KV_kvttl").get_msg(1).headers
    assert headers is not None and headers["Nats-TTL"] == "never"
    assert kv.get("k").value == b"v"


def test_too_old_server_is_a_clear_error(ttl_js: JetStream) -> None:
    # The server here is new; the context's cached API level stands in for an
    # old one (what $JS.API.INFO of a 2.10 server reports: no level, so 0).
    js = ttl_js
    assert js._api_level() >= 4
    js._levels.seen = 0
    with pytest.raises(errors.FeatureNotSupportedError) as e:
        js.publish("ttl.a", b"x", ttl=5)
    assert (e.value.required_level, e.value.server_level) == (1, 0)
    with pytest.raises(errors.FeatureNotSupportedError):
        js.counters("TTL")
    with pytest.raises(errors.FeatureNotSupportedError):
        js.atomic_batch()
    with pytest.raises(errors.FeatureNotSupportedError):
        js.fast_publisher()
    js._levels.seen = 2
    with pytest.raises(errors.FeatureNotSupportedError) as e2:
        js.fast_publisher()
    assert e2.value.required_level == 4
    assert _count(js, "TTL") == 0


# -- schedules ---------------------------------------------------------------------


@pytest.fixture
def sched_js(js: JetStream) -> JetStream:
    js.create_stream(
        name="SCH",
        subjects=["sch.>"],
        storage="memory",
        allow_msg_schedules=True,
        allow_msg_ttl=True,
    )
    return js


def test_schedule_at_fires_once(sched_js: JetStream) -> None:
    js = sched_js
    at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1.5)
    ack = js.publish_schedule(
        "sch.schedule.once", b"later", target="sch.out", at=at, headers={"X-App": "1"}
    )
    stored = js.stream("SCH").get_msg(ack.seq)
    assert stored.headers is not None
    pattern = stored.headers["Nats-Schedule"]
    assert pattern.startswith("@at ") and pattern.endswith("Z")
    # Rounded up to the second: never before the time asked for.
    assert dt.datetime.fromisoformat(pattern[4:].replace("Z", "+00:00")) >= at
    assert stored.headers["Nats-Schedule-Target"] == "sch.out"
    assert _last(js, "SCH", "sch.out") is None
    assert wait_for(lambda: _last(js, "SCH", "sch.out") is not None, timeout=6)
    fired = _last(js, "SCH", "sch.out")
    assert fired is not None and fired.data == b"later"
    assert fired.headers is not None
    assert fired.headers["Nats-Scheduler"] == "sch.schedule.once"
    assert fired.headers["X-App"] == "1"
    # A one-off schedule is removed once it fired.
    assert wait_for(lambda: _last(js, "SCH", "sch.schedule.once") is None, timeout=6)
    time.sleep(1.5)
    assert _count(js, "SCH") == 1  # the message it made, once


def test_schedule_every_repeats_until_purged(sched_js: JetStream) -> None:
    js = sched_js
    js.publish_schedule("sch.schedule.tick", b"tick", target="sch.ticks", every=1, ttl=60)
    assert wait_for(lambda: _count(js, "SCH") >= 3, timeout=8)  # schedule + 2 ticks
    tick = _last(js, "SCH", "sch.ticks")
    assert tick is not None and tick.data == b"tick"
    assert tick.headers is not None and tick.headers.get("Nats-TTL") == "60s"
    js.stream("SCH").purge(subject="sch.schedule.tick")
    time.sleep(0.3)
    before = _count(js, "SCH")
    time.sleep(2.5)
    assert _count(js, "SCH") == before


def test_schedule_cron_with_time_zone_and_source(sched_js: JetStream) -> None:
    js = sched_js
    js.publish("sch.reading", b"21.5")
    js.publish_schedule(
        "sch.schedule.sample",
        b"fallback",
        target="sch.sampled",
        cron="* * * * * *",
        time_zone="UTC",
        source="sch.reading",
    )
    assert wait_for(lambda: _last(js, "SCH", "sch.sampled") is not None, timeout=6)
    sampled = _last(js, "SCH", "sch.sampled")
    assert sampled is not None and sampled.data == b"21.5"
    js.stream("SCH").purge(subject="sch.schedule.sample")


def test_schedule_refusals_are_typed(sched_js: JetStream) -> None:
    js = sched_js
    js.create_stream(name="NOSCH", subjects=["nosch.>"], storage="memory")
    with pytest.raises(errors.MessageSchedulesDisabledError) as e:
        js.publish_schedule("nosch.s", b"", target="nosch.t", every=5)
    assert e.value.err_code == 10188
    with pytest.raises(errors.MessageSchedulesTargetInvalidError) as e2:
        js.publish_schedule("sch.s", b"", target="elsewhere.t", every=5)
    assert e2.value.err_code == 10190
    with pytest.raises(errors.MessageSchedulesTimeZoneInvalidError) as e3:
        js.publish_schedule("sch.s", b"", target="sch.t", cron="0 0 * * * *", time_zone="No/Where")
    assert e3.value.err_code == 10223
    with pytest.raises(errors.MessageSchedulesPatternInvalidError) as e4:
        js.publish_schedule("sch.s", b"", target="sch.t", cron="99 0 * * * *")
    assert e4.value.err_code == 10189
    with pytest.raises(errors.MessageSchedulesSourceInvalidError):
        js.publish_schedule("sch.s", b"", target="sch.t", every=5, source="elsewhere.src")
    assert _count(js, "SCH") == 0 and _count(js, "NOSCH") == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"every": 5, "cron": "* * * * * *"},
        {"every": 0.5},
        {"every": True},
        {"at": "2030-01-01"},
        {"cron": "* * * * *"},
        {"cron": "* * * * * * *"},
        {"cron": "@sometimes"},
        {"every": 5, "time_zone": "UTC"},
        {"cron": "* * * * * *", "time_zone": " "},
        {"every": 5, "target": "sch.s"},
        {"every": 5, "target": "sch.*"},
        {"every": 5, "target": ""},
        {"every": 5, "source": "sch.>"},
        {"every": 5, "source": "sch.t"},
        {"every": 5, "ttl": 0},
    ],
)
def test_bad_schedules_are_refused_before_sending(
    sched_js: JetStream, kwargs: dict[str, object]
) -> None:
    js = sched_js
    args: dict[str, object] = {"target": "sch.t", **kwargs}
    with pytest.raises((ValueError, TypeError)):
        js.publish_schedule("sch.s", b"", **args)  # type: ignore[arg-type]
    assert _count(js, "SCH") == 0


# -- counters ----------------------------------------------------------------------


@pytest.fixture
def counters_js(js: JetStream) -> JetStream:
    js.create_stream(
        name="CTR", subjects=["ctr.>"], storage="memory", allow_msg_counter=True, allow_direct=True
    )
    js.create_stream(
        name="CTRL", subjects=["ctrl.>"], storage="memory", allow_msg_counter=True
    )  # no direct get: reads go to the leader
    return js


@pytest.mark.parametrize("stream,pre", [("CTR", "ctr"), ("CTRL", "ctrl")])
def test_counters_add_and_get(counters_js: JetStream, stream: str, pre: str) -> None:
    c = counters_js.counters(stream)
    assert c.stream_name == stream
    assert c.add(f"{pre}.hits") == 1
    assert c.add(f"{pre}.hits", 41) == 42
    assert c.add(f"{pre}.hits", -50) == -8
    assert c.get(f"{pre}.hits") == -8
    big = 2**64 + 12345
    assert c.add(f"{pre}.big", big) == big
    assert c.add(f"{pre}.big", big) == 2 * big
    assert c.add(f"{pre}.big", -(3 * big)) == -big
    assert c.get(f"{pre}.big") == -big
    assert c.add(f"{pre}.zero", 0) == 0
    huge = 10**40
    assert c.add(f"{pre}.huge", huge) == huge and c.get(f"{pre}.huge") == huge
    with pytest.raises(errors.CounterNotFoundError) as e:
        c.get(f"{pre}.never")
    assert isinstance(e.value, nats.js.errors.NotFoundError)
    assert isinstance(e.value, errors.MessageNotFoundError)
    assert e.value.subject == f"{pre}.never"


def test_counters_get_many_with_wildcards(counters_js: JetStream) -> None:
    c = counters_js.counters("CTR")
    for i in range(30):
        c.add(f"ctr.page.{i}", i)
    c.add("ctr.page.3", 2**70)
    c.add("ctr.other.x", -1)
    many = c.get_many("ctr.page.*")
    assert len(many) == 30
    assert many["ctr.page.3"] == 3 + 2**70 and many["ctr.page.29"] == 29
    assert c.get_many("ctr.page.1", "ctr.other.>") == {"ctr.page.1": 1, "ctr.other.x": -1}
    assert len(c.get_many()) == 31
    assert c.get_many("ctr.none.*") == {}


def test_counters_refusals_are_typed(counters_js: JetStream) -> None:
    js = counters_js
    js.create_stream(name="PLAIN", subjects=["plain.>"], storage="memory")
    with pytest.raises(errors.MessageCounterDisabledError) as e:
        js.counters("PLAIN")
    assert e.value.err_code == 10168
    with pytest.raises(errors.StreamNotFoundError):
        js.counters("NOPE")
    # The server's own refusals: an increment to a plain stream, a plain publish
    # (no Nats-Incr) to a counter stream.
    with pytest.raises(errors.MessageCounterDisabledError):
        js.publish("plain.x", b"", headers={"Nats-Incr": "+1"})
    with pytest.raises(errors.MessageCounterIncrementError) as e2:
        js.publish("ctr.x", b"5")
    assert e2.value.err_code in (10169, 10170)
    c = js.counters("CTR")
    with pytest.raises(TypeError):
        c.add("ctr.x", True)
    with pytest.raises(TypeError):
        c.add("ctr.x", 1.5)  # type: ignore[arg-type]
    with pytest.raises(errors.NoStreamResponseError):
        c.add("nowhere.x", 1, timeout=1.0)
    assert _count(js, "CTR") == 0
