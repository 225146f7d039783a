"""jsclient.contrib.otel against a real server: spans, links, propagation, metrics.

The SDK's in-memory span exporter and metric reader see what the
instrumentation emits; every test instruments in a fixture and uninstruments
in its teardown, so no other test runs instrumented.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import nats
import pytest
from _js import eventually
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import jsclient
from jsclient.client import Client
from jsclient.contrib.otel import JsclientInstrumentor, _spans
from jsclient.jetstream import JetStream
from jsclient.msg import Msg
from jsclient.server import NatsServer


@dataclass
class Otel:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    provider: TracerProvider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str, timeout: float = 10.0) -> ReadableSpan:
        found = eventually(lambda: self.named(name), timeout, f"a span {name!r}")
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def metrics(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out.setdefault(m.name, []).extend(m.data.data_points)
        return out


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    inst = JsclientInstrumentor()
    inst.instrument(tracer_provider=provider, meter_provider=meters)
    try:
        yield Otel(exporter, reader, provider)
    finally:
        inst.uninstrument()
        provider.shutdown()
        meters.shutdown()


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


def _child_of(child: ReadableSpan, parent: ReadableSpan) -> bool:
    assert child.parent is not None, child.name
    return (
        child.parent.span_id == parent.context.span_id
        and child.context.trace_id == parent.context.trace_id
    )


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_semconv_names_are_the_installed_packages() -> None:
    from opentelemetry.semconv._incubating.attributes import messaging_attributes as ma
    from opentelemetry.semconv._incubating.metrics import messaging_metrics as mm

    from jsclient.contrib.otel import _telemetry as tm

    assert tm.SYSTEM == ma.MESSAGING_SYSTEM
    assert tm.DEST == ma.MESSAGING_DESTINATION_NAME
    assert tm.DEST_TEMPLATE == ma.MESSAGING_DESTINATION_TEMPLATE
    assert tm.DEST_TEMPORARY == ma.MESSAGING_DESTINATION_TEMPORARY
    assert tm.OP_TYPE == ma.MESSAGING_OPERATION_TYPE
    assert tm.OP_NAME == ma.MESSAGING_OPERATION_NAME
    assert tm.BODY_SIZE == ma.MESSAGING_MESSAGE_BODY_SIZE
    assert tm.MSG_ID == ma.MESSAGING_MESSAGE_ID
    assert tm.GROUP == ma.MESSAGING_CONSUMER_GROUP_NAME
    assert tm.BATCH_COUNT == ma.MESSAGING_BATCH_MESSAGE_COUNT
    assert tm.SENT_MESSAGES == mm.MESSAGING_CLIENT_SENT_MESSAGES
    assert tm.CONSUMED_MESSAGES == mm.MESSAGING_CLIENT_CONSUMED_MESSAGES
    assert tm.OPERATION_DURATION == mm.MESSAGING_CLIENT_OPERATION_DURATION
    assert tm.PROCESS_DURATION == mm.MESSAGING_PROCESS_DURATION


def test_publish_to_subscribe_callback_is_one_trace(otel: Otel, nc: Client) -> None:
    got: list[tuple[Msg, Any, str]] = []

    def cb(msg: Msg) -> None:
        # The process span is current on the callback's own thread.
        got.append((msg, trace.get_current_span(), threading.current_thread().name))

    nc.subscribe("orders.*", "workers", cb=cb)
    user_headers = {"X-Mine": "1"}
    nc.publish("orders.new", b"hello", headers=user_headers)
    nc.publish("orders.new", b"plain")
    nc.flush()
    eventually(lambda: len(got) == 2, 10, "both messages")
    assert user_headers == {"X-Mine": "1"}  # the caller's dict is not changed

    sends = otel.named("send orders.new")
    assert len(sends) == 2
    send = sends[0]
    assert send.kind is SpanKind.PRODUCER
    a = _attrs(send)
    assert a["messaging.system"] == "nats"
    assert a["messaging.destination.name"] == "orders.new"
    assert a["messaging.operation.type"] == "send"
    assert a["messaging.operation.name"] == "send"
    assert a["messaging.message.body.size"] == 5
    assert a["server.address"] == "127.0.0.1" and isinstance(a["server.port"], int)

    procs = eventually(
        lambda: len(otel.named("process orders.*")) == 2 and otel.named("process orders.*")
    )
    by_parent = {p.parent.span_id: p for p in procs if p.parent is not None}
    for s in sends:
        proc = by_parent[s.context.span_id]
        assert _child_of(proc, s) and proc.kind is SpanKind.CONSUMER
        pa = _attrs(proc)
        assert pa["messaging.destination.template"] == "orders.*"
        assert pa["messaging.destination.name"] == "orders.new"
        assert pa["messaging.consumer.group.name"] == "workers"
        assert pa["messaging.operation.type"] == "process"
    for msg, current, thread_name in got:
        assert thread_name.startswith("jsclient-sub-")
        assert msg.headers is not None and "traceparent" in msg.headers
        assert current.get_span_context().span_id in {p.context.span_id for p in procs}
    first = next(m for m, _, _ in got if m.data == b"hello")
    assert first.headers is not None and first.headers["X-Mine"] == "1"


def test_request_service_endpoint_reply(otel: Otel, nc: Client, nats_server: NatsServer) -> None:
    with jsclient.connect(nats_server.url) as server_nc:
        svc = server_nc.add_service("calc", "1.0.0")
        svc.add_endpoint("double", lambda req: req.respond(req.data * 2), subject="calc.double")
        reply = nc.request("calc.double", b"ab", timeout=5)
        assert reply.data == b"abab"
        req = otel.one("request calc.double")
        assert req.kind is SpanKind.CLIENT
        server = otel.one("process calc.double")
        assert server.kind is SpanKind.SERVER
        assert _child_of(server, req)
        assert _attrs(server)["messaging.consumer.group.name"] == "q"
        assert _attrs(server)["messaging.nats.service.endpoint"] == "double"
        # The reply carries the SERVER span's context back.
        assert reply.headers is not None
        tp = reply.headers["traceparent"]
        assert tp.split("-")[2] == format(server.context.span_id, "016x")
        svc.stop()
    # Service discovery and the reply inbox make no spans.
    assert not [s for s in otel.spans() if "$SRV" in s.name or "_INBOX" in s.name]


def test_js_publish_consume_ack_is_one_trace(otel: Otel, js: JetStream) -> None:
    js.create_stream(name="ORDERS", subjects=["orders.>"], storage="memory")
    ack = js.publish("orders.new", b"x", msg_id="order-1")
    send = otel.one("send orders.new")
    a = _attrs(send)
    assert send.kind is SpanKind.PRODUCER
    assert a["messaging.nats.stream.name"] == "ORDERS"
    assert a["messaging.nats.message.stream_sequence"] == ack.seq
    assert a["messaging.message.id"] == "order-1"
    consumer = js.create_consumer("ORDERS", durable_name="proc", ack_policy="explicit")
    done = threading.Event()

    def handle(msg: Msg) -> None:
        msg.ack()
        done.set()

    cc = consumer.consume(handle)
    try:
        assert done.wait(10)
        proc = otel.one("process orders.new")
        ack_span = otel.one("ack ORDERS")
    finally:
        cc.stop()
    assert proc.kind is SpanKind.CONSUMER and _child_of(proc, send)
    pa = _attrs(proc)
    assert pa["messaging.nats.stream.name"] == "ORDERS"
    assert pa["messaging.nats.consumer.name"] == "proc"
    assert pa["messaging.consumer.group.name"] == "proc"
    assert pa["messaging.nats.message.stream_sequence"] == ack.seq
    assert pa["messaging.nats.message.delivery_count"] == 1
    assert ack_span.kind is SpanKind.CLIENT and _child_of(ack_span, proc)
    assert _attrs(ack_span)["messaging.operation.type"] == "settle"
    assert _attrs(ack_span)["messaging.operation.name"] == "ack"


def test_internal_jetstream_traffic_makes_no_spans(otel: Otel, nc: Client, js: JetStream) -> None:
    js.create_stream(name="INT", subjects=["int.>"], storage="memory")
    js.stream("INT").info()
    c = js.create_consumer("INT", durable_name="c", ack_policy="explicit")
    c.info()
    js.delete_consumer("INT", "c")
    js.publish("int.a", b"1")
    names = [s.name for s in otel.spans()]
    assert names == ["send int.a"], names  # no API request, no ack inbox
    # An API prefix without "$JS." is known by the context's API call, not by the subject.
    other = nc.jetstream(prefix="JSX.API", timeout=1)
    with pytest.raises(jsclient.errors.Error):
        other.account_info()
    assert [s.name for s in otel.spans()] == ["send int.a"]


def test_publish_async_span_ends_with_the_ack(otel: Otel, js: JetStream) -> None:
    js.create_stream(name="ASYNC", subjects=["async.>"], storage="memory")
    fut = js.publish_async("async.a", b"abc")
    ack = fut.result(10)
    span = otel.one("send async.a")
    a = _attrs(span)
    assert a["messaging.nats.stream.name"] == "ASYNC"
    assert a["messaging.nats.message.stream_sequence"] == ack.seq
    assert span.status.status_code is not StatusCode.ERROR
    # A failure ends the span with the error.
    bad = js.publish_async("async.b", b"x", expected_last_seq=99)
    with pytest.raises(jsclient.errors.Error):
        bad.result(10)
    failed = otel.one("send async.b")
    assert failed.status.status_code is StatusCode.ERROR
    assert "error.type" in _attrs(failed)


def test_fetch_receive_span_links_every_message(otel: Otel, js: JetStream) -> None:
    js.create_stream(name="BATCH", subjects=["batch.>"], storage="memory")
    for i in range(3):
        js.publish(f"batch.{i}", b"m")
    sends = {s.context.span_id for s in otel.spans() if s.name.startswith("send batch.")}
    c = js.create_consumer("BATCH", durable_name="b", ack_policy="explicit")
    msgs = list(c.fetch(3, expires=2))
    assert len(msgs) == 3
    recv = otel.one("receive BATCH")
    assert recv.kind is SpanKind.CLIENT
    assert {link.context.span_id for link in recv.links} == sends
    a = _attrs(recv)
    assert a["messaging.batch.message_count"] == 3
    assert a["messaging.consumer.group.name"] == "b"
    assert a["messaging.operation.type"] == "receive"
    # next(): one message, one receive span linked to its producer.
    js.publish("batch.9", b"n")
    msg = c.next(timeout=5)
    assert msg.subject == "batch.9"
    recvs = eventually(
        lambda: len(otel.named("receive BATCH")) == 2 and otel.named("receive BATCH")
    )
    last = next(s for s in recvs if s.context.span_id != recv.context.span_id)
    assert len(last.links) == 1
    assert last.links[0].context.span_id == otel.one("send batch.9").context.span_id
    la = _attrs(last)
    assert la["messaging.destination.name"] == "BATCH"  # pulled from the stream
    assert la["messaging.nats.message.subject"] == "batch.9"
    assert "messaging.destination.temporary" not in la


def test_next_msg_receive_span(otel: Otel, nc: Client) -> None:
    sub = nc.subscribe("pull.core")
    nc.publish("pull.core", b"1")
    msg = sub.next_msg(5)
    assert msg.data == b"1"
    recv = otel.one("receive pull.core")
    assert recv.kind is SpanKind.CLIENT
    assert recv.links[0].context.span_id == otel.one("send pull.core").context.span_id
    assert _attrs(recv)["messaging.destination.name"] == "pull.core"
    with pytest.raises(jsclient.errors.TimeoutError):
        sub.next_msg(0.05)
    assert len(otel.named("receive pull.core")) == 1  # a timeout makes no span


def test_nats_py_traceparent_continues_in_jsclient(
    otel: Otel, nc: Client, nats_server: NatsServer
) -> None:
    got = threading.Event()
    nc.subscribe("xclient", cb=lambda m: got.set())
    nc.flush()
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    parent_id = "00f067aa0ba902b7"

    async def produce() -> None:
        other = await nats.connect(nats_server.url)
        try:
            await other.publish(
                "xclient", b"hi", headers={"traceparent": f"00-{trace_id}-{parent_id}-01"}
            )
            await other.flush()
        finally:
            await other.close()

    asyncio.run(produce())
    assert got.wait(10)
    proc = otel.one("process xclient")
    assert format(proc.context.trace_id, "032x") == trace_id
    assert proc.parent is not None and format(proc.parent.span_id, "016x") == parent_id
    assert proc.parent.is_remote


def test_push_subscribe_callback(otel: Otel, js: JetStream) -> None:
    js.create_stream(name="PUSH", subjects=["push.>"], storage="memory")
    got = threading.Event()
    sub = js.subscribe("push.a", cb=lambda m: got.set(), durable="pd")
    try:
        js.publish("push.a", b"x")
        assert got.wait(10)
        proc = otel.one("process push.a")
    finally:
        sub.unsubscribe()
    assert _child_of(proc, otel.one("send push.a"))
    assert _attrs(proc)["messaging.nats.stream.name"] == "PUSH"
    # The subscription's automatic ack belongs to the process span.
    ack = eventually(lambda: otel.named("ack PUSH"), 10, "the automatic ack's span")
    assert len(ack) == 1 and _child_of(ack[0], proc)


def test_kv_put_object_put_and_watch(otel: Otel, js: JetStream) -> None:
    kv = js.create_key_value(bucket="cfg", storage="memory")
    seen = threading.Event()
    watcher = kv.watch("a", cb=lambda e: seen.set() if e is not None else None)
    try:
        rev = kv.put("a", b"1")
        put = otel.one("put KV_cfg")
        assert put.kind is SpanKind.PRODUCER
        assert _attrs(put)["messaging.nats.stream.name"] == "KV_cfg"
        assert _attrs(put)["messaging.nats.message.stream_sequence"] == rev
        assert seen.wait(10)
        otel.one("process KV_cfg")
    finally:
        watcher.stop()
    kv.create("b", b"2")
    otel.one("create KV_cfg")
    obs = js.create_object_store(bucket="files", storage="memory")
    obs.put("f.txt", b"x" * 300_000)
    otel.one("put OBJ_files")
    # The nested publishes (KV's js.publish, the object's chunks) add no spans.
    assert not [s for s in otel.spans() if s.name.startswith("send ")]


def test_publisher_span_per_message(otel: Otel, js: JetStream) -> None:
    from jsclient.jetstream.publish.publisher import Publisher

    js.create_stream(name="PUBR", subjects=["pubr.>"], storage="memory")
    with Publisher(js) as pub:
        flights = [pub.publish_async("pubr.a", b"%d" % i) for i in range(3)]
        for f in flights:
            f.result(10)
    spans = eventually(lambda: len(otel.named("send pubr.a")) == 3 and otel.named("send pubr.a"))
    assert sorted(_attrs(s)["messaging.nats.message.stream_sequence"] for s in spans) == [1, 2, 3]


def test_uninstrument_restores_everything(nc: Client) -> None:
    from jsclient.contrib.otel import _patches
    from jsclient.jetstream.context import JetStream as JS
    from jsclient.subscription import Subscription

    before = (Client.publish, Client.request, JS.publish, Msg.ack, Subscription.next_msg)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    inst = JsclientInstrumentor()
    inst.instrument(tracer_provider=provider)
    patched = list(_patches._PATCHED)
    got: list[Msg] = []
    try:
        assert Client.publish is not before[0]
        assert len(patched) > 30
        for owner, name, _orig in patched:
            assert owner.__dict__[name].__wrapped__ is _orig, (owner, name)
        nc.subscribe("un.a", cb=got.append)  # a callback wrapped while instrumented
        nc.flush()
    finally:
        inst.uninstrument()
    assert (Client.publish, Client.request, JS.publish, Msg.ack, Subscription.next_msg) == before
    for owner, name, orig in patched:
        assert owner.__dict__[name] is orig, (owner, name)
    nc.publish("un.a", b"x")
    nc.flush()
    eventually(lambda: got, 10, "the message")
    assert exporter.get_finished_spans() == ()
    assert got[0].raw_headers is None  # no header block when not instrumented


def test_metrics_names_and_bounded_attributes(otel: Otel, nc: Client, js: JetStream) -> None:
    js.create_stream(name="MET", subjects=["met.>"], storage="memory")
    nc.subscribe("met.core", cb=lambda m: None)
    nc.publish("met.core", b"1")
    js.publish("met.js", b"2", msg_id="unique-id-1")
    assert len(list(js.create_consumer("MET", durable_name="m").fetch(1, expires=2))) == 1
    nc.subscribe("met.rr", cb=lambda m: m.respond(b"ok"))
    nc.request("met.rr", b"q", timeout=5)
    metrics = eventually(
        lambda: (m := otel.metrics()).get("messaging.process.duration") and m, 10, "metrics"
    )
    for name in (
        "messaging.client.sent.messages",
        "messaging.client.consumed.messages",
        "messaging.client.operation.duration",
        "messaging.process.duration",
    ):
        assert name in metrics, sorted(metrics)
    allowed = {
        "messaging.system",
        "messaging.operation.name",
        "messaging.operation.type",
        "messaging.destination.name",
        "error.type",
    }
    dests = set()
    for points in metrics.values():
        for p in points:
            attrs = dict(p.attributes)
            assert set(attrs) <= allowed, attrs
            dests.add(attrs.get("messaging.destination.name"))
    assert {"met.core", "met.js", "met.rr", "MET"} <= dests  # sends per subject, pulls per stream
    sent = {
        dict(p.attributes)["messaging.destination.name"]: p.value
        for p in metrics["messaging.client.sent.messages"]
        if "messaging.destination.name" in dict(p.attributes)
    }
    assert sent["met.core"] == 1 and sent["met.js"] == 1 and sent["met.rr"] == 1
    assert not [d for d in dests if d and ("_INBOX" in d or "unique-id" in d)]
    ops = {
        dict(p.attributes)["messaging.operation.name"]
        for p in metrics["messaging.client.operation.duration"]
    }
    assert {"send", "request"} <= ops


def test_entry_point_is_declared() -> None:
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group="opentelemetry_instrumentor") if ep.name == "jsclient"]
    if found:
        assert found[0].load() is JsclientInstrumentor
        return
    # An editable install made before the entry point was declared: check the declaration.
    import tomllib
    from pathlib import Path

    data = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    eps = data["project"]["entry-points"]["opentelemetry_instrumentor"]
    assert eps == {"jsclient": "jsclient.contrib.otel:JsclientInstrumentor"}


def test_ordered_consumer_messages_and_legacy_pull(otel: Otel, js: JetStream) -> None:
    js.create_stream(name="MORE", subjects=["more.>"], storage="memory")
    for i in range(2):
        js.publish(f"more.{i}", b"m")
    # An ordered consumer's fetch: one receive span, not one more for its inner batch.
    oc = js.ordered_consumer("MORE")
    assert len(list(oc.fetch(2, expires=2))) == 2
    assert len(otel.named("receive MORE")) == 1
    assert len(otel.one("receive MORE").links) == 2
    # An ordered consumer's consume: process spans, children of the publishes.
    got: list[Msg] = []
    cc = js.ordered_consumer("MORE").consume(got.append)  # from the start again
    try:
        eventually(lambda: len(otel.named("process more.1")) == 1, 10, "ordered process span")
    finally:
        cc.stop()
    assert _child_of(otel.one("process more.1"), otel.one("send more.1"))
    # messages(): a receive span per message taken.
    c = js.create_consumer("MORE", durable_name="it", ack_policy="explicit")
    with c.messages() as it:
        first = it.next(5)
    assert first.subject == "more.0"
    assert len(otel.named("receive MORE")) == 2
    # The legacy pull subscription's fetch: one receive span for the list.
    psub = js.pull_subscribe("more.>", "legacy")
    msgs = psub.fetch(2, timeout=5)
    assert len(msgs) == 2
    legacy = eventually(lambda: len(otel.named("receive MORE")) == 3 and otel.named("receive MORE"))
    assert max(len(s.links) for s in legacy) == 2
    psub.unsubscribe()
    assert not [s for s in otel.spans() if "$JS" in s.name or "_INBOX" in s.name]


def test_object_store_watch_callback(otel: Otel, js: JetStream) -> None:
    obs = js.create_object_store(bucket="w", storage="memory")
    seen = threading.Event()
    watcher = obs.watch(cb=lambda info: seen.set() if info is not None else None)
    try:
        obs.put("a", b"1")
        assert seen.wait(10)
        otel.one("process OBJ_w")
    finally:
        watcher.stop()


def test_reply_to_an_inbox_is_a_temporary_destination(otel: Otel, nc: Client) -> None:
    nc.subscribe("tmp.q", cb=lambda m: nc.publish(m.reply, b"a"))
    assert nc.request("tmp.q", b"", timeout=5).data == b"a"
    (reply,) = eventually(lambda: otel.named("send"), 10, "the reply's send span")
    attrs = _attrs(reply)
    assert attrs["messaging.destination.temporary"] is True
    assert "messaging.destination.name" not in attrs
    # The reply was sent from the process span of the request.
    assert _child_of(reply, otel.one("process tmp.q"))
    assert _child_of(otel.one("process tmp.q"), otel.one("request tmp.q"))


def test_instrumentation_failure_never_breaks_the_call(
    otel: Otel, nc: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jsclient.contrib.otel import _spans, _telemetry

    def broken(*args: Any) -> Any:
        raise RuntimeError("instrumentation bug")

    monkeypatch.setattr(_telemetry, "base_attrs", broken)  # every send span's attributes
    monkeypatch.setattr(_spans, "consumer_attrs", broken)  # every process span's
    got = threading.Event()
    nc.subscribe("broken.a", cb=lambda m: got.set())
    nc.publish("broken.a", b"still delivered")
    assert got.wait(10)
    assert otel.spans() == []


def test_sampled_out_root_adds_no_headers(nc: Client) -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    provider = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    inst = JsclientInstrumentor()
    inst.instrument(tracer_provider=provider)
    try:
        sub = nc.subscribe("off.a")
        nc.publish("off.a", b"x")
        msg = sub.next_msg(5)
    finally:
        inst.uninstrument()
    assert msg.raw_headers is None  # nothing to propagate: the plain publish path
    assert exporter.get_finished_spans() == ()


def test_opentelemetry_instrument_loads_the_instrumentor(tmp_path: Any) -> None:
    """``opentelemetry-instrument`` finds the entry point and wraps the client.

    The editable install may predate the entry point, so a dist-info of our
    own declares it (the same line as pyproject.toml) for the subprocess.
    """
    import subprocess
    import sys
    from pathlib import Path

    dist = tmp_path / "jsclient_otel_ep-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: jsclient-otel-ep\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(
        "[opentelemetry_instrumentor]\njsclient = jsclient.contrib.otel:JsclientInstrumentor\n"
    )
    script = (
        "from jsclient.client import Client; "
        "print('wrapped' if hasattr(Client.publish, '__wrapped__') else 'plain')"
    )
    tool = Path(sys.executable).parent / "opentelemetry-instrument"
    env = {
        "PATH": str(Path(sys.executable).parent),
        "PYTHONPATH": str(tmp_path),
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    out = subprocess.run(
        [str(tool), sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip().splitlines()[-1:] == ["wrapped"], out.stderr


def test_settle_spans_and_failed_request(otel: Otel, nc: Client, js: JetStream) -> None:
    js.create_stream(name="SETL", subjects=["setl.>"], storage="memory")
    for i in range(3):
        js.publish(f"setl.{i}", b"m")
    c = js.create_consumer("SETL", durable_name="s", ack_policy="explicit")
    a, b, t = list(c.fetch(3, expires=2))
    a.in_progress()
    a.ack()
    b.nak(delay=5)
    t.term()
    for name, msg in (("in_progress", a), ("ack", a), ("nak", b), ("term", t)):
        span = otel.one(f"{name} SETL")
        assert span.kind is SpanKind.CLIENT
        assert _attrs(span)["messaging.operation.type"] == "settle"
        # No span was current: the settle is linked to the message's producer.
        (link,) = span.links
        assert link.context.span_id == otel.one(f"send {msg.subject}").context.span_id
    a.ack()  # already settled: nothing more
    assert len(otel.named("ack SETL")) == 1
    with pytest.raises(jsclient.errors.NoRespondersError):
        nc.request("nobody.here", b"", timeout=2)
    failed = otel.one("request nobody.here")
    assert failed.status.status_code is StatusCode.ERROR
    assert _attrs(failed)["error.type"] == "NoRespondersError"
    assert any(e.name == "exception" for e in failed.events)


def test_sampled_off_fast_paths_count_and_keep_trace_context(nc: Client, js: JetStream) -> None:
    """Sampling off with the SDK meter: the per-message paths that only count (no span, a
    lock-free counter read at collection) count every message, across collections; a
    message carrying a sampled ``traceparent`` still gets its process span."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    provider = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    otel = Otel(exporter, reader, provider)
    inst = JsclientInstrumentor()
    inst.instrument(tracer_provider=provider, meter_provider=meters)
    got: list[Msg] = []

    def counts(dest: str = "fast.a") -> tuple[int, int, int]:
        metrics = otel.metrics()

        def value(name: str) -> int:
            return sum(
                int(getattr(p, "value", None) or getattr(p, "count", 0))
                for p in metrics.get(name, [])
                if dict(p.attributes).get("messaging.destination.name") == dest
                and "error.type" not in dict(p.attributes)
            )

        return (
            value("messaging.client.sent.messages"),
            value("messaging.client.consumed.messages"),
            value("messaging.process.duration"),
        )

    # Sampled off, one callback in 16 records its duration (the SDK histogram's
    # record costs more than the rest of the wrapper): the 1st and the 17th here.
    assert _spans.PROCESS_DURATION_EVERY == 16
    _spans._unsampled_callbacks = itertools.count()
    try:
        nc.subscribe("fast.a", cb=got.append)
        for _ in range(5):
            nc.publish("fast.a", b"x")
        eventually(lambda: len(got) == 5, 10, "5 messages")
        assert counts() == (5, 5, 1)
        for _ in range(12):
            nc.publish("fast.a", b"x")
        eventually(lambda: len(got) == 17, 10, "17 messages")
        assert counts() == (17, 17, 2)  # cumulative: the first read took nothing away
        # publish_async, sampled off: counted when sent, no span, no header added.
        js.create_stream(name="FASTJS", subjects=["fast.js"])
        futs = [js.publish_async("fast.js", b"%d" % i) for i in range(3)]
        js.publish_async_complete(timeout=10)
        assert [f.result().seq for f in futs] == [1, 2, 3]
        assert counts("fast.js")[0] == 3
        assert js.stream("FASTJS").get_msg(1).headers is None
        assert exporter.get_finished_spans() == ()
        assert all(m.raw_headers is None for m in got)
        # A sampled parent from elsewhere (another client): the callback's span continues it.
        parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        nc.publish("fast.a", b"y", headers={"traceparent": parent})
        proc = otel.one("process fast.a")
    finally:
        inst.uninstrument()
        provider.shutdown()
        meters.shutdown()
    assert len(got) == 18
    assert proc.parent is not None and proc.parent.span_id == 0xB7AD6B7169203331
    assert proc.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C


# -- the API's defaults (no SDK) and bounded counters -----------------------------

_NO_SDK = """
import sys
import jsclient
from jsclient.contrib.otel import JsclientInstrumentor, _telemetry as tm
from jsclient.server import NatsServer

with NatsServer() as srv, jsclient.connect(srv.url) as nc:
    JsclientInstrumentor().instrument()  # nothing configured: the API's proxy providers
    sub = nc.subscribe("nosdk.x")
    nc.publish("nosdk.x", b"1")
    sub.next_msg(timeout=5)
    assert tm.live() is None, "no SDK: the wrappers should step aside"
    assert tm.ACTIVE.sent._fast == {} and tm.ACTIVE.sent._counts == {}  # nothing counted

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # the application configures its SDK later
    assert tm.live() is not None
    nc.publish("nosdk.x", b"2")
    sub.next_msg(timeout=5)
    names = [s.name for s in exporter.get_finished_spans()]
    assert "send nosdk.x" in names, names
print("ok")
"""


def test_without_an_sdk_instrument_steps_aside_until_one_is_set() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _NO_SDK], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_the_message_counters_keep_a_bounded_number_of_series(otel: Otel, nc: Client) -> None:
    from jsclient.contrib.otel import _telemetry as tm

    for i in range(tm.MAX_SERIES + 3000):  # orders.<id>: one subject each
        nc.publish(f"orders.{i}", b"")
    nc.flush()
    t = tm.ACTIVE
    assert t is not None
    assert len(t.sent._fast) + len(t.sent._counts) <= tm.MAX_SERIES + 1
    points = otel.metrics()["messaging.client.sent.messages"]
    assert len(points) <= tm.MAX_SERIES + 1
    overflow = [p for p in points if p.attributes.get("otel.metric.overflow")]
    assert overflow and sum(p.value for p in points) == tm.MAX_SERIES + 3000
