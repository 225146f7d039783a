"""nats-py's names on the JetStream context (api.md, "nats-py compatibility").

Each alias is called with nats-py's argument forms and compared with what
nats-py itself returns for the same call on the same server (types and
values); ``pull_subscribe_bind`` takes nats-py's order; ``stream=``,
``msg_ttl=`` and ``wait_stall=`` on the publish calls; ``Stream`` and
``Consumer`` answer the info attributes; the deletes return True. The last
test holds the list of nats-py's public names against the context and the
migration page's table.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import nats
import nats.js.errors
import pytest
from _js import wait_for
from nats.js.client import JetStreamContext
from nats.js.manager import JetStreamManager

import jsclient
from jsclient import errors
from jsclient.api import ConsumerConfig, ConsumerInfo, RawStreamMsg, StreamInfo
from jsclient.client import Client
from jsclient.jetstream import Consumer, JetStream, Stream
from jsclient.jetstream.subscribe.pull import PullSubscription
from jsclient.jetstream.subscribe.push import JsSubscription
from jsclient.server import NatsServer

T = TypeVar("T")

MIGRATION = Path(__file__).resolve().parents[2] / "docs" / "migration.md"

#: nats-py names the context does not answer, each with why.
NOT_APPLICABLE = {
    "PullSubscription": "a nested class in nats-py; jsclient's is "
    "jsclient.jetstream.subscribe.pull.PullSubscription (what pull_subscribe returns)",
    "PushSubscription": "a nested class in nats-py; jsclient's is "
    "jsclient.jetstream.subscribe.push.JsSubscription (what subscribe returns)",
    "is_status_msg": "jsclient never hands a status message to user code, so there is "
    "nothing to test for",
}


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


def natspy(server: NatsServer, call: Callable[[Any], Awaitable[T]]) -> T:
    """``call(njs)`` with nats-py's JetStream context on the same server."""

    async def main() -> T:
        other = await nats.connect(server.url)
        try:
            return await call(other.jetstream())
        finally:
            await other.close()

    return asyncio.run(main())


@pytest.fixture
def jobs(js: JetStream) -> JetStream:
    """Stream JOBS (direct gets allowed) with jobs.a 1..3, jobs.b 4 (header K), jobs.a 5."""
    js.create_stream(name="JOBS", subjects=["jobs.>"], storage="memory", allow_direct=True)
    for i in range(3):
        js.publish("jobs.a", b"a%d" % i)
    js.publish("jobs.b", b"b", headers={"K": "v"})
    js.publish("jobs.a", b"a3")
    return js


# -- streams -----------------------------------------------------------------------


def test_stream_aliases_return_what_nats_py_returns(nats_server: NatsServer, js: JetStream) -> None:
    info = js.add_stream(name="S1", subjects=["s1.>"], storage="memory")
    assert type(info) is StreamInfo and info.config.name == "S1"
    assert info.config.subjects == ["s1.>"]
    # A config object first, fields after, as nats-py takes them.
    info2 = js.add_stream(jsclient.api.StreamConfig(name="S2", subjects=["s2"]), storage="memory")
    assert type(info2) is StreamInfo and info2.config.storage == "memory"
    for i in range(3):
        js.publish(f"s1.{i % 2}", b"x")

    got = js.stream_info("S1")
    theirs = natspy(nats_server, lambda njs: njs.stream_info("S1"))
    assert type(got) is type(theirs) is StreamInfo
    assert (got.config.name, got.state.messages) == (theirs.config.name, theirs.state.messages)
    # subjects_filter: the count of each subject, as nats-py gets it.
    got_f = js.stream_info("S1", subjects_filter="s1.*")
    theirs_f = natspy(nats_server, lambda njs: njs.stream_info("S1", subjects_filter="s1.*"))
    assert got_f.state.subjects == theirs_f.state.subjects == {"s1.0": 2, "s1.1": 1}
    assert js.stream_info("S1").state.subjects is None

    listed = js.streams_info()
    assert isinstance(listed, list) and all(type(i) is StreamInfo for i in listed)
    theirs_l = natspy(nats_server, lambda njs: njs.streams_info())
    assert [i.config.name for i in listed] == [i.config.name for i in theirs_l] == ["S1", "S2"]
    assert [i.config.name for i in js.streams_info(1)] == ["S2"]
    assert [i.config.name for i in js.streams_info_iterator()] == ["S1", "S2"]
    assert [i.config.name for i in js.streams_info_iterator(offset=1)] == ["S2"]

    assert js.find_stream_name_by_subject("s1.7") == "S1"
    assert natspy(nats_server, lambda njs: njs.find_stream_name_by_subject("s1.7")) == "S1"
    with pytest.raises(nats.js.errors.NotFoundError):
        js.find_stream_name_by_subject("nowhere")

    assert js.purge_stream("S1", subject="s1.0") is True
    assert js.stream_info("S1").state.messages == 1
    assert js.purge_stream("S1") is True
    assert js.stream_info("S1").state.messages == 0
    with pytest.raises(errors.StreamNotFoundError):
        js.purge_stream("MISSING")
    with pytest.raises(errors.InvalidStreamNameError):
        js.stream_info("a.b")

    # update_stream stays jsclient's: a Stream, which reads like nats-py's StreamInfo.
    up = js.update_stream(name="S1", subjects=["s1.>", "more"], storage="memory")
    assert isinstance(up, Stream) and up.config.subjects == ["s1.>", "more"]
    assert up.state.messages == 0


def test_stream_and_consumer_answer_the_info_attributes(js: JetStream) -> None:
    s = js.create_stream(name="S", subjects=["s"], storage="memory")
    js.publish("s", b"1")
    for f in dataclasses.fields(StreamInfo):
        assert getattr(s, f.name) == getattr(s.cached_info, f.name), f.name
    assert s.state.messages == 0  # as of cached_info ...
    s.info()
    assert s.state.messages == 1  # ... until refreshed
    c = js.create_consumer("S", durable_name="c", ack_policy="explicit")
    for f in dataclasses.fields(ConsumerInfo):
        assert getattr(c, f.name) == getattr(c.cached_info, f.name), f.name
    assert c.config.durable_name == "c" and c.num_pending == 1 and c.num_ack_pending == 0
    assert c.delivered is not None and c.ack_floor is not None
    # Anything else is a plain AttributeError.
    for handle in (s, c):
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            handle.nope  # noqa: B018
    assert hasattr(s, "config") and not hasattr(s, "num_pending")
    assert isinstance(c, Consumer)


def test_deletes_return_true(js: JetStream) -> None:
    js.create_stream(name="D", subjects=["d"], storage="memory")
    assert js.delete_stream("D") is True
    js.create_key_value(bucket="kvd")
    assert js.delete_key_value("kvd") is True
    js.create_object_store(bucket="obd")
    assert js.delete_object_store("obd") is True


def test_delete_consumer_returns_true(js: JetStream) -> None:
    js.create_stream(name="D", subjects=["d"], storage="memory")
    js.create_consumer("D", durable_name="c")
    assert js.delete_consumer("D", "c") is True


# -- consumers ---------------------------------------------------------------------


def test_consumer_aliases_return_what_nats_py_returns(
    nats_server: NatsServer, jobs: JetStream
) -> None:
    js = jobs
    info = js.add_consumer("JOBS", durable_name="workers", ack_policy="explicit")
    assert isinstance(info, ConsumerInfo) and info.name == "workers"
    # A config object, and nats-py's timeout.
    info2 = js.add_consumer("JOBS", ConsumerConfig(durable_name="audit"), timeout=2.0)
    assert info2.name == "audit"
    # As nats-py's: an existing consumer is updated, not refused.
    again = js.add_consumer("JOBS", durable_name="workers", ack_policy="explicit", description="x")
    assert again.config.description == "x"

    got = js.consumer_info("JOBS", "workers", timeout=2.0)
    theirs = natspy(nats_server, lambda njs: njs.consumer_info("JOBS", "workers"))
    assert isinstance(got, ConsumerInfo) and isinstance(theirs, nats.js.api.ConsumerInfo)
    assert (got.name, got.num_pending, got.config.description) == (
        theirs.name,
        theirs.num_pending,
        theirs.config.description,
    )
    assert got.num_pending == 5
    with pytest.raises(errors.ConsumerNotFoundError):
        js.consumer_info("JOBS", "missing")

    listed = js.consumers_info("JOBS")
    theirs_l = natspy(nats_server, lambda njs: njs.consumers_info("JOBS"))
    assert isinstance(listed, list)
    assert (
        sorted(i.name for i in listed) == sorted(i.name for i in theirs_l) == ["audit", "workers"]
    )
    assert len(js.consumers_info("JOBS", offset=1)) == 1


def test_subscribe_bind_binds_a_push_consumer(jobs: JetStream) -> None:
    js = jobs
    info = js.add_consumer(
        "JOBS", durable_name="pusher", deliver_subject="deliver.pusher", ack_policy="explicit"
    )
    # nats-py's form: stream, the consumer's config, its name.
    sub = js.subscribe_bind("JOBS", info.config, info.name)
    try:
        assert isinstance(sub, JsSubscription)
        msg = sub.next_msg(timeout=5)
        assert msg.data == b"a0" and msg.metadata.consumer == "pusher"
        msg.ack()
    finally:
        sub.unsubscribe()
    assert js.consumer("JOBS", "pusher").name == "pusher"  # bound, so never deleted

    cfg = js.add_consumer("JOBS", durable_name="cb", deliver_subject="deliver.cb").config
    got: list[bytes] = []
    done = threading.Event()

    def cb(m: jsclient.Msg) -> None:
        got.append(m.data)
        if len(got) == 5:
            done.set()

    sub = js.subscribe_bind("JOBS", cfg, "cb", cb=cb)  # acked after cb returns
    try:
        assert done.wait(5)
    finally:
        sub.unsubscribe()
    assert got == [b"a0", b"a1", b"a2", b"b", b"a3"]
    assert wait_for(lambda: js.consumer("JOBS", "cb").info().num_ack_pending == 0)


# -- messages ----------------------------------------------------------------------


def _msg_key(m: Any) -> tuple[Any, ...]:
    return (m.subject, m.seq, m.data, (m.headers or {}).get("K"))


@pytest.mark.parametrize("direct", [False, True])
@pytest.mark.parametrize(
    "form",
    [
        {"seq": 2},
        {"subject": "jobs.a"},
        {"seq": 1, "subject": "jobs.b", "next": True},
        {"seq": 5, "subject": "jobs.b"},  # no next: the last on the subject, seq ignored
    ],
    ids=["seq", "last", "next", "last-seq-ignored"],
)
def test_get_msg_forms_match_nats_py(
    nats_server: NatsServer, jobs: JetStream, form: dict[str, Any], direct: bool
) -> None:
    got = jobs.get_msg("JOBS", **form, direct=direct)
    theirs = natspy(nats_server, lambda njs: njs.get_msg("JOBS", **form, direct=direct))
    assert isinstance(got, RawStreamMsg)
    assert _msg_key(got) == _msg_key(theirs)


def test_get_last_msg_and_delete_msg(nats_server: NatsServer, jobs: JetStream) -> None:
    js = jobs
    got = js.get_last_msg("JOBS", "jobs.a")
    theirs = natspy(nats_server, lambda njs: njs.get_last_msg("JOBS", "jobs.a"))
    assert _msg_key(got) == _msg_key(theirs) == ("jobs.a", 5, b"a3", None)
    assert _msg_key(js.get_last_msg("JOBS", "jobs.b", direct=True))[:3] == ("jobs.b", 4, b"b")
    # Positional, as nats-py's: stream_name, seq.
    assert js.get_msg("JOBS", 4).headers == {"K": "v"}

    assert js.delete_msg("JOBS", 2) is True
    with pytest.raises(errors.MessageNotFoundError):
        js.get_msg("JOBS", 2)
    assert natspy(nats_server, lambda njs: njs.delete_msg("JOBS", 3)) is True
    assert js.stream_info("JOBS").state.messages == 3
    with pytest.raises(ValueError):
        js.get_msg("JOBS")  # neither seq nor subject


# -- pull_subscribe_bind ------------------------------------------------------------


def test_pull_subscribe_bind_takes_nats_py_order(jobs: JetStream) -> None:
    js = jobs
    js.create_consumer("JOBS", durable_name="workers", ack_policy="explicit")
    psub = js.pull_subscribe_bind("workers", "JOBS")  # consumer, then stream
    try:
        assert isinstance(psub, PullSubscription)
        assert (psub.stream_name, psub.consumer_name) == ("JOBS", "workers")
        msgs = psub.fetch(2, timeout=5)
        assert [m.data for m in msgs] == [b"a0", b"a1"]
        for m in msgs:
            m.ack()
    finally:
        psub.unsubscribe()
    assert js.consumer("JOBS", "workers").info().num_pending == 3  # a bound consumer stays

    # nats-py's other spellings of the consumer, and its keywords.
    forms: list[dict[str, Any]] = [
        {"consumer": "workers", "stream": "JOBS"},
        {"durable": "workers", "stream": "JOBS"},
        {"name": "workers", "stream": "JOBS"},
        {"consumer": "workers", "durable": "workers", "stream": "JOBS"},  # the same one twice
        {
            "stream": "JOBS",
            "durable": "workers",
            "inbox_prefix": b"_MYINBOX",
            "pending_msgs_limit": 10,
            "pending_bytes_limit": 1024,
        },
    ]
    js.publish("jobs.c", b"c0")
    js.publish("jobs.c", b"c1")
    got = []
    for kwargs in forms:
        psub = js.pull_subscribe_bind(**kwargs)
        try:
            assert psub.consumer_name == "workers"
            msg = psub.fetch(1, timeout=5)[0]
            msg.ack_sync()
            got.append(msg.data)
        finally:
            psub.unsubscribe()
    assert got == [b"a2", b"b", b"a3", b"c0", b"c1"]  # one consumer, read on


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"consumer": "a", "durable": "b", "stream": "JOBS"}, TypeError),
        ({"consumer": "a", "name": "b", "stream": "JOBS"}, TypeError),
        ({"durable": "a", "name": "b", "stream": "JOBS"}, TypeError),
        ({"consumer": "a"}, ValueError),  # no stream
        ({"stream": "JOBS"}, ValueError),  # no consumer
        ({}, ValueError),
        ({"consumer": "a", "stream": "JOBS", "pending_msgs_limit": "many"}, TypeError),
    ],
)
def test_pull_subscribe_bind_refuses_before_subscribing(
    nc: Client, js: JetStream, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    sent = nc.stats["out_msgs"]
    with pytest.raises(error):
        js.pull_subscribe_bind(**kwargs)
    assert nc.stats["out_msgs"] == sent


def test_pull_subscribe_takes_nats_py_pending_limits(jobs: JetStream) -> None:
    # Accepted for nats-py's calls; the inbox holds only what fetch asked for.
    psub = jobs.pull_subscribe(
        "jobs.a", "w", stream="JOBS", pending_msgs_limit=1, pending_bytes_limit=1
    )
    try:
        assert [m.data for m in psub.fetch(3, timeout=5)] == [b"a0", b"a1", b"a2"]
    finally:
        psub.unsubscribe()


# -- publishing ----------------------------------------------------------------------


def test_publish_takes_nats_py_keywords(js: JetStream) -> None:
    js.create_stream(name="PUB", subjects=["pub.>"], storage="memory", allow_msg_ttl=True)
    assert js.publish("pub.a", b"1", stream="PUB").seq == 1
    with pytest.raises(errors.StreamNotMatchError):
        js.publish("pub.a", b"1", stream="OTHER")
    with pytest.raises(nats.js.errors.BadRequestError):  # nats-py's class catches it too
        js.publish("pub.a", b"1", stream="OTHER")
    ack = js.publish("pub.a", b"2", msg_ttl=60)
    assert js.get_msg("PUB", ack.seq).headers == {"Nats-TTL": "60s"}
    with pytest.raises(TypeError, match="expected_stream or stream"):
        js.publish("pub.a", b"x", stream="PUB", expected_stream="PUB")
    with pytest.raises(TypeError, match="ttl or msg_ttl"):
        js.publish("pub.a", b"x", msg_ttl=1, ttl=1)

    fut = js.publish_async("pub.b", b"3", stream="PUB", msg_ttl=60, wait_stall=1.0)
    bad = js.publish_async("pub.b", b"4", stream="OTHER")
    js.publish_async_completed()
    assert fut.result().stream == "PUB"
    assert "Nats-TTL" in (js.get_msg("PUB", fut.result().seq).headers or {})
    assert isinstance(bad.exception(), errors.StreamNotMatchError)
    with pytest.raises(TypeError, match="expected_stream or stream"):
        js.publish_async("pub.a", b"x", stream="PUB", expected_stream="PUB")
    with pytest.raises(TypeError, match="ttl or msg_ttl"):
        js.publish_async("pub.a", b"x", msg_ttl=1, ttl=1)
    with pytest.raises(ValueError):
        js.publish_async("pub.a", b"x", wait_stall=-1)
    assert js.publish_async_pending == 0


def test_publish_async_wait_stall_is_this_calls_stall_wait(nc: Client) -> None:
    # A subject someone listens on but nobody acks: the window stays full.
    hold = nc.subscribe("hold.>")
    js = nc.jetstream(
        publish_async_max_pending=1, publish_async_stall_wait=5.0, publish_async_timeout=1.0
    )
    first = js.publish_async("hold.a", b"1")
    start = time.monotonic()
    with pytest.raises(nats.js.errors.TooManyStalledMsgsError):
        js.publish_async("hold.a", b"2", wait_stall=0.2)
    assert time.monotonic() - start < 2.0  # this call's wait, not the context's 5 s
    with pytest.raises(errors.TooManyStalledMsgsError):
        js.publish_async("hold.a", b"3", wait_stall=0)
    js.publish_async_completed(timeout=5)
    assert isinstance(first.exception(), errors.TimeoutError)
    hold.unsubscribe()


# -- the client and the buckets -----------------------------------------------------


def test_jsm_is_the_jetstream_context(nc: Client) -> None:
    jsm = nc.jsm()
    assert isinstance(jsm, JetStream)
    jsm.add_stream(name="M", subjects=["m"], storage="memory")
    assert nc.jetstream().stream_info("M").config.name == "M"
    assert nc.jsm(domain="hub")._prefix == "$JS.hub.API"


def test_create_object_store_takes_the_bucket_first(js: JetStream) -> None:
    obs = js.create_object_store("files")  # nats-py's form
    obs.put("a", b"1")
    assert js.object_store("files").get_bytes("a") == b"1"
    with pytest.raises(TypeError):
        js.create_object_store("files", bucket="other")


# -- the list of nats-py's names -----------------------------------------------------


def _nats_py_names() -> list[str]:
    names = {n for n in dir(JetStreamManager) if not n.startswith("_")}
    names |= {n for n in dir(JetStreamContext) if not n.startswith("_")}
    return sorted(names)


def _migration_table() -> str:
    """The table of the migration page's "nats-py's JetStream names" section."""
    text = MIGRATION.read_text(encoding="utf-8")
    start = text.index("## nats-py's JetStream names")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_every_nats_py_name_is_answered_and_documented() -> None:
    names = _nats_py_names()
    assert len(names) > 30  # nats-py's lists were read
    stale = set(NOT_APPLICABLE) - set(names)
    assert not stale, f"not nats-py names (any more): {stale}"
    for name, reason in NOT_APPLICABLE.items():
        assert reason.strip(), name
    # (a) the context answers each of them.
    missing = [n for n in names if n not in NOT_APPLICABLE and not hasattr(JetStream, n)]
    assert not missing, f"nats-py names the JetStream context lacks: {missing}"
    # (b) the migration page's table names each, in its nats-py column.
    table = _migration_table()
    first_cells = [
        row.split("|")[1] for row in table.splitlines() if row.startswith("| `") and "|" in row[1:]
    ]
    listed = " ".join(first_cells)
    undocumented = [n for n in names if not re.search(rf"`{re.escape(n)}\b", listed)]
    assert not undocumented, f"nats-py names missing from docs/migration.md: {undocumented}"


# -- the core calls in nats-py's forms -------------------------------------------------


def test_core_calls_take_nats_py_positional_forms(nc: Any) -> None:
    got: list[Any] = []
    sub = nc.subscribe("pos.x", None, got.append)  # subscribe(subject, queue, cb)
    nc.subscribe("pos.echo", "q", lambda m: m.respond(m.data))
    nc.flush()
    nc.publish("pos.x", b"1", None, {"A": "b"})  # publish(subject, payload, reply, headers)
    reply = nc.request("pos.echo", b"hi", 5.0)  # request(subject, payload, timeout)
    assert reply.data == b"hi"
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    assert got and got[0].header == {"A": "b"} == got[0].headers  # msg.header
    plain = nc.subscribe("pos.iter")
    nc.publish("pos.iter", b"z")
    for msg in plain.messages:  # sub.messages iterates like sub
        assert msg.data == b"z"
        break
    sub.unsubscribe()


def test_micro_add_service_and_kv_keys_filters(nc: Any, js: Any) -> None:
    import jsclient.micro

    svc = jsclient.micro.add_service(nc, name="compat", version="1.0.0")
    svc.add_endpoint("e", lambda r: r.respond(b"ok"), subject="compat.e")
    assert nc.request("compat.e", b"", timeout=5).data == b"ok"
    svc.stop()
    kv = js.create_key_value(bucket="keysf")
    kv.put("a.b", b"1")
    kv.put("c.d", b"2")
    assert kv.keys(filters=["a.*"]) == ["a.b"]
    with pytest.raises(TypeError):
        kv.keys("a.*", filters=["c.*"])
