"""Draw docs/assets/otel-trace.svg (and print the text form docs/otel.md shows).

One trace on an embedded server, exported by the OpenTelemetry SDK: a "web
request" span publishes an order with ``js.publish``; a worker consumes it,
asks a service endpoint and acks. Run: ``python scripts/otel_trace_picture.py``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import jsclient
from jsclient.contrib.otel import JsclientInstrumentor
from jsclient.msg import Msg
from jsclient.server import NatsServer

OUT = Path(__file__).resolve().parents[1] / "docs" / "assets" / "otel-trace.svg"
COLORS = {"SERVER": "#4c78a8", "PRODUCER": "#f58518", "CONSUMER": "#54a24b", "CLIENT": "#b279a2"}


def record() -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    inst = JsclientInstrumentor()
    inst.instrument(tracer_provider=provider)
    try:
        with NatsServer(jetstream=True) as srv:
            web = jsclient.connect(srv.url)
            worker = jsclient.connect(srv.url)
            js = web.jetstream()
            js.create_stream(name="ORDERS", subjects=["orders.>"], storage="memory")
            svc = worker.add_service("stock", "1.0.0")
            svc.add_endpoint("reserve", lambda req: req.respond(b"ok"), subject="stock.reserve")
            consumer = worker.jetstream().create_consumer(
                "ORDERS", durable_name="billing", ack_policy="explicit"
            )
            done = threading.Event()

            def bill(msg: Msg) -> None:
                worker.request("stock.reserve", msg.data, timeout=5)
                msg.ack()
                done.set()

            cc = consumer.consume(bill)
            tracer = provider.get_tracer("web")
            with tracer.start_as_current_span("POST /orders", kind=SpanKind.SERVER):
                js.publish("orders.new", b'{"id": 1}', msg_id="order-1")
            done.wait(10)
            time.sleep(0.3)  # the last spans end on the worker's threads
            cc.stop()
            svc.stop()
            web.close()
            worker.close()
    finally:
        inst.uninstrument()
    return sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)


def tree(spans: list[ReadableSpan]) -> list[tuple[int, ReadableSpan]]:
    children: dict[Any, list[ReadableSpan]] = {}
    for s in spans:
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)
    rows: list[tuple[int, ReadableSpan]] = []

    def walk(parent: Any, depth: int) -> None:
        for s in children.get(parent, []):
            rows.append((depth, s))
            walk(s.context.span_id if s.context else None, depth + 1)

    walk(None, 0)
    return rows


def main() -> None:
    rows = tree(record())
    t0 = min(s.start_time or 0 for _, s in rows)
    total = max(s.end_time or 0 for _, s in rows) - t0
    label_w, bar_w, row_h = 330, 460, 30
    height = 50 + row_h * len(rows) + 20
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{height}" '
        'font-family="monospace" font-size="13">',
        f'<rect width="900" height="{height}" fill="white"/>',
        '<text x="10" y="22" font-weight="bold">One trace from a web request to the worker '
        "(exported by the OpenTelemetry SDK)</text>",
    ]
    for i, (depth, s) in enumerate(rows):
        start, end = (s.start_time or 0) - t0, (s.end_time or 0) - t0
        y = 45 + i * row_h
        x = label_w + start / total * bar_w
        w = max(2.0, (end - start) / total * bar_w)
        ms = (end - start) / 1e6
        kind = s.kind.name
        svg.append(f'<text x="{10 + depth * 16}" y="{y + 15}">{s.name}</text>')
        svg.append(
            f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="16" '
            f'fill="{COLORS.get(kind, "#888")}"/>'
        )
        svg.append(
            f'<text x="{label_w + bar_w + 10}" y="{y + 15}">{kind.lower()} {ms:.2f} ms</text>'
        )
        a, b = int(start / total * 40), max(int(start / total * 40) + 1, int(end / total * 40))
        bar = " " * a + "#" * (b - a) + " " * (40 - b)
        print(f"{('  ' * depth + s.name)[:34]:34s} {kind:9s} |{bar}| {ms:6.2f} ms")
    svg.append("</svg>")
    OUT.write_text("\n".join(svg) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
