"""``--otel``: the jsclient rows again, instrumented by ``jsclient.contrib.otel``.

Each mode is set up in the measured child, after its imports and before the
workload runs, so a row's plain and instrumented runs differ only in this:

- ``none``: not instrumented (the row as always);
- ``sampled-off``: the SDK's ``TracerProvider(sampler=ParentBased(ALWAYS_OFF))``
  and an SDK ``MeterProvider`` (a reader that is never collected): the cost
  a production process pays with tracing sampled off;
- ``sdk``: every span recorded (the SDK's default sampler), handed to a
  ``BatchSpanProcessor`` whose exporter drops them, and the SDK meter: the
  cost of the instrumentation and the SDK, without an exporter's I/O.

Only jsclient runs are instrumented; the rows of the other modes show jsclient
alone (named ``{row}+otel-{mode}``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NONE = "none"
SAMPLED_OFF = "sampled-off"
SDK = "sdk"
MODES = (NONE, SAMPLED_OFF, SDK)


def row_name(name: str, mode: str) -> str:
    """The report's name of a row run in ``mode``."""
    return name if mode == NONE else f"{name}+otel-{mode}"


def parse(value: str) -> list[str]:
    """``--otel``'s comma-separated modes, in order, without repeats (ValueError if unknown)."""
    modes: list[str] = []
    for m in (s.strip() for s in value.split(",")):
        if m and m not in modes:
            if m not in MODES:
                raise ValueError(f"--otel: {m!r} is not one of {', '.join(MODES)}")
            modes.append(m)
    return modes or [NONE]


def available() -> str | None:
    """None when the instrumented modes can run here, else why not."""
    try:
        import opentelemetry.sdk.trace  # noqa: F401

        import jsclient.contrib.otel  # noqa: F401
    except ImportError as exc:
        return f"needs jsclient[otel] and opentelemetry-sdk ({exc})"
    return None


def instrument(mode: str) -> Any:
    """Instrument this process for ``mode``; returns what keeps it alive (None for ``none``)."""
    if mode == NONE:
        return None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    from jsclient.contrib.otel import JsclientInstrumentor

    class _Drop(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    if mode == SAMPLED_OFF:
        tracer_provider = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
    elif mode == SDK:
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(BatchSpanProcessor(_Drop()))
    else:
        raise ValueError(f"unknown otel mode {mode!r}")
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    inst = JsclientInstrumentor()
    inst.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    return inst, tracer_provider, meter_provider
