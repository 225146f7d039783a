"""jsclient.contrib.otel with the Django integration: one trace from a view's
``publish_on_commit`` to the worker's ``@consumer`` handler, and ``@endpoint``
handlers served in SERVER spans (in-process worker, real Django and server)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from _js import eventually
from django.db import transaction
from jsclient_testapp.models import Order
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from jsclient.contrib.django import (
    consumer,
    endpoint,
    get_connection,
    get_jetstream,
    publish_on_commit,
    registered,
)
from jsclient.contrib.django.consumers import unregister
from jsclient.contrib.django.endpoints import select
from jsclient.contrib.django.endpoints import unregister as unregister_endpoint
from jsclient.contrib.django.worker import Worker
from jsclient.contrib.otel import JsclientInstrumentor
from jsclient.micro import Request
from jsclient.msg import Msg
from jsclient.server import NatsServer


@pytest.fixture
def spans() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    inst = JsclientInstrumentor()
    inst.instrument(tracer_provider=provider)
    try:
        yield exporter, provider
    finally:
        inst.uninstrument()
        provider.shutdown()


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _run(worker: Worker) -> threading.Thread:
    worker.start()
    t = threading.Thread(target=worker.serve, name="test-otel-worker")
    t.start()
    return t


def test_view_publish_on_commit_to_consumer_handler_is_one_trace(
    django_nats: NatsServer, spans: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    exporter, provider = spans
    js = get_jetstream()
    js.create_stream(name="OTELDJ", subjects=["oteldj.>"])
    handled = threading.Event()

    @consumer(stream="OTELDJ", durable="oteldj")
    def on_order(msg: Msg) -> None:
        handled.set()

    worker = Worker([registered()["oteldj"]])
    t = _run(worker)
    try:
        # The web request: a server span around the transaction, as Django's
        # own instrumentation would make.
        view = provider.get_tracer("test").start_as_current_span(
            "GET /orders", kind=SpanKind.SERVER
        )
        with view, transaction.atomic():  # the commit (and so the publish) within the view
            order = Order.objects.create(item="lamp")
            publish_on_commit("oteldj.new", b"%d" % order.pk, msg_id=f"o-{order.pk}")
        assert handled.wait(15)
        process = eventually(lambda: _named(exporter, "process oteldj.new"), 10, "process span")
    finally:
        worker.request_stop()
        t.join(30)
        unregister("oteldj")
    (view_span,) = _named(exporter, "GET /orders")
    (send,) = _named(exporter, "send oteldj.new")
    (proc,) = process
    assert send.parent is not None and send.parent.span_id == view_span.context.span_id
    assert proc.parent is not None and proc.parent.span_id == send.context.span_id
    assert proc.context.trace_id == view_span.context.trace_id
    attrs = dict(proc.attributes or {})
    assert attrs["code.function.name"].endswith("on_order")
    assert attrs["messaging.consumer.group.name"] == "oteldj"
    # The handler runs on a handler thread: one process span, not one per hop.
    assert len(_named(exporter, "process oteldj.new")) == 1
    # The worker's ack belongs to the handler's span.
    ack = eventually(lambda: _named(exporter, "ack OTELDJ"), 10, "ack span")[0]
    assert ack.parent is not None and ack.parent.span_id == proc.context.span_id


def test_endpoint_handler_runs_in_a_server_span(
    django_nats: NatsServer, spans: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    exporter, _ = spans

    @endpoint(service="oteldsvc", version="1.0.0", name="echo", subject="oteldsvc.echo")
    def echo(req: Request) -> None:
        req.respond(req.data)

    worker = Worker(endpoints=[select(["oteldsvc.echo"])[0][0]])
    t = _run(worker)
    try:
        reply = get_connection().request("oteldsvc.echo", b"hi", timeout=10)
        assert reply.data == b"hi"
        server = eventually(lambda: _named(exporter, "process oteldsvc.echo"), 10, "server span")
    finally:
        worker.request_stop()
        t.join(30)
        unregister_endpoint("oteldsvc.echo")
    (request,) = _named(exporter, "request oteldsvc.echo")
    (srv,) = server
    assert srv.kind is SpanKind.SERVER
    assert srv.parent is not None and srv.parent.span_id == request.context.span_id
    assert reply.headers is not None and "traceparent" in reply.headers
