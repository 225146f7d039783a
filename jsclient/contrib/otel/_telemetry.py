"""The instrumentation's state and its span, metric and propagation helpers.

One :class:`Telemetry` exists while instrumented (``ACTIVE``); the wrappers in
:mod:`._patches` read it on every call, so a callback wrapped before
``uninstrument()`` runs the plain callback afterwards.

Names follow the OpenTelemetry messaging semantic conventions of
opentelemetry-semantic-conventions 0.66b2 (schema 1.44.0). NATS-specific
attributes share the ``messaging.nats.`` prefix; ``messaging.nats.message.subject``
and ``messaging.nats.message.reply_to`` are nats.net's names.

Nesting: a wrapped operation sets ``NESTED`` while it runs, so the library
calls it makes (``js.publish`` makes a ``request``; a KV put makes a
``js.publish``) add no span of their own, and only carry the outer span's
context in their headers. ``INTERNAL`` marks the library's own traffic
(JetStream API requests): no span, no headers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.trace import Span

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider


from jsclient.contrib.otel._attrs import (
    base_attrs,
    extract,
    fail,
    guarded,
    inbox_prefix,
    inject,
    internal_subject,
    is_inbox,
    link_of,
    metric_attrs,
    msg_attrs,
    now,
    span_name,
    stream_of,
)
from jsclient.contrib.otel._metrics import MAX_SERIES, OVERFLOW, Tally, _no_count
from jsclient.contrib.otel._names import (
    BATCH_COUNT,
    BODY_SIZE,
    CONSUMED_MESSAGES,
    CONSUMER,
    DELIVERED,
    DEST,
    DEST_TEMPLATE,
    DEST_TEMPORARY,
    DUPLICATE,
    ERROR_TYPE,
    GROUP,
    INTERNAL,
    MSG_ID,
    NESTED,
    OP_NAME,
    OP_TYPE,
    OPERATION_DURATION,
    PROCESS,
    PROCESS_DURATION,
    RECEIVE,
    REPLY_TO,
    SEMCONV_VERSION,
    SEND,
    SENT_MESSAGES,
    SERVER_ADDRESS,
    SERVER_PORT,
    SETTLE,
    STREAM,
    STREAM_SEQ,
    SUBJECT,
    SYSTEM,
    log,
)

__all__ = [
    "ACTIVE",
    "BATCH_COUNT",
    "BODY_SIZE",
    "CONSUMED_MESSAGES",
    "CONSUMER",
    "DELIVERED",
    "DEST",
    "DEST_TEMPLATE",
    "DEST_TEMPORARY",
    "DUPLICATE",
    "ERROR_TYPE",
    "GROUP",
    "INTERNAL",
    "MAX_SERIES",
    "MSG_ID",
    "NESTED",
    "OPERATION_DURATION",
    "OP_NAME",
    "OP_TYPE",
    "OVERFLOW",
    "PROCESS",
    "PROCESS_DURATION",
    "RECEIVE",
    "REPLY_TO",
    "SEMCONV_VERSION",
    "SEND",
    "SENT_MESSAGES",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "SETTLE",
    "STREAM",
    "STREAM_SEQ",
    "SUBJECT",
    "SYSTEM",
    "Tally",
    "Telemetry",
    "active",
    "active_in",
    "base_attrs",
    "drops_roots",
    "extract",
    "fail",
    "guarded",
    "inbox_prefix",
    "inject",
    "internal_subject",
    "is_inbox",
    "link_of",
    "live",
    "log",
    "metric_attrs",
    "msg_attrs",
    "now",
    "root_dropped",
    "span_name",
    "stream_of",
]

ACTIVE: Telemetry | None = None


class Telemetry:
    """Tracer, meter instruments and the per-operation helpers."""

    def __init__(
        self, tracer_provider: TracerProvider | None, meter_provider: MeterProvider | None
    ) -> None:
        from opentelemetry import metrics

        from jsclient._version import __version__

        self.tracer = trace.get_tracer(
            "jsclient.contrib.otel",
            __version__,
            tracer_provider,
            schema_url=f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}",
        )
        meter = metrics.get_meter(
            "jsclient.contrib.otel",
            __version__,
            meter_provider,
            schema_url=f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}",
        )
        self.sent: Any
        self.consumed: Any
        provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        #: No meter: the per-message paths skip the metrics (the API's no-op instruments
        #: still cost a call each).
        self.no_meter = isinstance(provider, metrics.NoOpMeterProvider)
        if self.no_meter:
            self.sent = meter.create_counter(SENT_MESSAGES, "{message}", "Messages sent")
            self.consumed = meter.create_counter(
                CONSUMED_MESSAGES, "{message}", "Messages handed to the application"
            )
        else:
            self.sent = Tally()
            self.consumed = Tally()
            meter.create_observable_counter(
                SENT_MESSAGES, [self.sent.observe], "{message}", "Messages sent"
            )
            meter.create_observable_counter(
                CONSUMED_MESSAGES,
                [self.consumed.observe],
                "{message}",
                "Messages handed to the application",
            )
        self.op_duration = meter.create_histogram(
            OPERATION_DURATION,
            "s",
            "Duration of publish-to-ack and request-to-reply",
        )
        self.process_duration = meter.create_histogram(
            PROCESS_DURATION, "s", "Duration of processing one message"
        )
        # The API's default provider (no SDK configured, or not yet): its proxy
        # records nothing, so every span would be a non-recording root. Until an
        # SDK provider is set, the paths take the sampled-off fast path
        # (docs/otel.md); the first call after one is set looks again.
        self._proxy = tracer_provider is None and _no_sdk_tracer_provider()
        self._drops = True if self._proxy else drops_roots(tracer_provider)
        #: Nothing to record at all: neither a tracer nor a meter provider was given
        #: or set (the API's proxies). The wrappers then call the original at once
        #: (see :func:`live`) until the application sets one.
        self.idle = self._proxy and meter_provider is None and _no_sdk_meter_provider()
        # (op, subject, span dest, metric dest, server url) -> span name, span and
        # metric attributes: a publish loop on one subject builds them once.
        self._shapes: dict[tuple[Any, ...], tuple[str, dict[str, Any], dict[str, Any]]] = {}
        self._metric_shapes: dict[tuple[Any, ...], dict[str, Any]] = {}
        # (subject, inbox prefix) -> a core publish's metric attributes and its counter.
        self._publish_counts: dict[tuple[str, str], tuple[dict[str, Any], Callable[[], Any]]] = {}

    @property
    def drops_roots(self) -> bool:
        """True when a root span would not be recorded (see :func:`drops_roots`); with
        the API's default provider, until an SDK provider is set."""
        if self._proxy:
            if _no_sdk_tracer_provider():
                return True
            self._proxy = False
            self._drops = drops_roots(None)
        return self._drops

    def counter(self, instrument: Any, attrs: Mapping[str, Any]) -> Callable[[], Any]:
        """A function that adds one to ``instrument`` for ``attrs`` (kept per shape)."""
        if isinstance(instrument, Tally):
            return instrument.counter(attrs)
        if self.no_meter:
            return _no_count
        return functools.partial(instrument.add, 1, attrs)

    def publish_count(self, client: Any, subject: str) -> tuple[dict[str, Any], Callable[[], Any]]:
        """A core publish's metric attributes (shared) and its sent-messages counter."""
        prefix = inbox_prefix(client)
        key = (subject, prefix)
        found = self._publish_counts.get(key)
        if found is None:
            m_attrs = self.metric_shape(client, SEND, subject, None, None)
            found = _kept(self._publish_counts, key, (m_attrs, self.counter(self.sent, m_attrs)))
        return found

    def process_metrics(
        self, client: Any, msg: Any, dest: str | None, metric_dest: str | None
    ) -> dict[str, Any]:
        """The metric attributes of a process whose span is not made (shared: copy before
        changing): ``metric_dest``, else the message's stream, else ``dest``; none for an inbox."""
        if metric_dest is None:
            metric_dest = stream_of(msg) or dest
        key = (PROCESS, metric_dest)
        m_attrs = self._metric_shapes.get(key)
        if m_attrs is None:
            temporary = metric_dest is not None and is_inbox(client, metric_dest)
            m_attrs = _kept(
                self._metric_shapes,
                key,
                metric_attrs(PROCESS, PROCESS, None if temporary else metric_dest),
            )
        return m_attrs

    def metric_shape(
        self,
        client: Any,
        op_name: str,
        subject: str,
        span_dest: str | None,
        metric_dest: str | None,
    ) -> dict[str, Any]:
        """The metric attributes of a send whose span is not made (shared: copy before changing)."""
        prefix = inbox_prefix(client)
        key = (op_name, subject, span_dest, metric_dest, prefix)
        m_attrs = self._metric_shapes.get(key)
        if m_attrs is None:
            m_dest = _send_metric_dest(
                subject, subject.startswith(prefix + "."), span_dest, metric_dest
            )
            m_attrs = _kept(self._metric_shapes, key, metric_attrs(SEND, op_name, m_dest))
        return m_attrs

    def send_shape(
        self,
        client: Any,
        op_name: str,
        subject: str,
        span_dest: str | None,
        metric_dest: str | None,
    ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """The span name, base span attributes and metric attributes of a send (shared: copy
        before changing)."""
        try:
            url = client.connected_url
        except Exception:
            url = None
        key = (op_name, subject, span_dest, metric_dest, url)
        shape = self._shapes.get(key)
        if shape is None:
            temporary = is_inbox(client, subject)
            dest = None if temporary else subject
            attrs = base_attrs(client, SEND, op_name, dest)
            if temporary:
                attrs[REPLY_TO] = subject
            name_dest = dest if span_dest is None or temporary else span_dest
            m_dest = _send_metric_dest(subject, temporary, span_dest, metric_dest)
            shape = _kept(
                self._shapes,
                key,
                (span_name(op_name, name_dest), attrs, metric_attrs(SEND, op_name, m_dest)),
            )
        return shape


_MAX_SHAPES = 1024
_V = TypeVar("_V")


def _kept(cache: dict[Any, _V], key: Any, value: _V) -> _V:
    """Store ``value`` in a shape cache and return it; a full cache is cleared first (many
    subjects: shapes are rebuilt on use, memory stays bounded)."""
    if len(cache) >= _MAX_SHAPES:
        cache.clear()
    cache[key] = value
    return value


def _send_metric_dest(
    subject: str, temporary: bool, span_dest: str | None, metric_dest: str | None
) -> str | None:
    """A send's metric destination: none for an inbox (unbounded), else ``metric_dest``,
    else the span's destination (``span_dest`` or the subject)."""
    if temporary:
        return None
    return metric_dest or (subject if span_dest is None else span_dest)


def _no_sdk_tracer_provider() -> bool:
    """True while no tracer provider was set globally (the API hands out its proxy,
    which records nothing). One module attribute read on the per-message paths."""
    try:
        return trace._TRACER_PROVIDER is None
    except AttributeError:  # pragma: no cover - a future API: the public way
        return isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _no_sdk_meter_provider() -> bool:
    """True while no meter provider was set globally (see :func:`_no_sdk_tracer_provider`)."""
    try:
        from opentelemetry.metrics import _internal as _metrics_internal

        return _metrics_internal._METER_PROVIDER is None
    except (ImportError, AttributeError):  # pragma: no cover - a future API: the public way
        from opentelemetry import metrics

        return type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider"


def live() -> Telemetry | None:
    """The telemetry for the wrappers' first test: None when not instrumented, or
    while nothing would be recorded (no SDK provider set: the API's defaults, the
    common case of ``instrument()`` with no SDK configured)."""
    t = ACTIVE
    if t is not None and t.idle:
        if _no_sdk_tracer_provider() and _no_sdk_meter_provider():
            return None
        t.idle = False  # an SDK was set since: record from now on
    return t


def drops_roots(tracer_provider: Any) -> bool:
    """True when the provider's sampler drops every root span (no span would be recorded
    for a message sent outside a trace): a no-op provider, ``AlwaysOff`` or
    ``ParentBased(AlwaysOff)``. Read from the sampler's public description."""
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    if isinstance(provider, trace.NoOpTracerProvider):
        return True
    sampler = getattr(provider, "sampler", None)
    if sampler is None:
        return False
    try:
        desc = str(sampler.get_description())
    except Exception:
        return False
    return desc == "AlwaysOffSampler" or desc.startswith("ParentBased{root:AlwaysOffSampler,")


try:  # the keys is_instrumentation_enabled() reads, read here from one context lookup
    from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY

    _SUPPRESS_KEYS: tuple[str, ...] | None = (
        _SUPPRESS_INSTRUMENTATION_KEY,
        "suppress_instrumentation",
    )
except ImportError:  # pragma: no cover - a future API without it: the public helper
    _SUPPRESS_KEYS = None


try:  # the key the current span is kept under in a context (what get_current_span reads)
    from opentelemetry.trace.propagation import _SPAN_KEY

    _SPAN_KEY_OR_NONE: str | None = _SPAN_KEY
except ImportError:  # pragma: no cover - a future API without it: the slow path
    _SPAN_KEY_OR_NONE = None


def root_dropped() -> bool:
    """True when a span started now would be a root the sampler drops (the caller has
    checked ``drops_roots``), and the call is the application's own (not nested in an
    instrumented operation, not the library's, not suppressed). One context read: the
    sampled-off paths take it and count only. False sends the caller the usual way."""
    if NESTED.get() or INTERNAL.get() or _SUPPRESS_KEYS is None or _SPAN_KEY_OR_NONE is None:
        return False
    ctx = otel_context.get_current()
    if ctx.get(_SUPPRESS_KEYS[0]) or ctx.get(_SUPPRESS_KEYS[1]):
        return False
    span: Span | None = ctx.get(_SPAN_KEY_OR_NONE)  # type: ignore[assignment]
    return span is None or not span.get_span_context().is_valid


def active() -> Telemetry | None:
    """The telemetry, or None when not instrumented, idle, or suppressed in this context."""
    t = live()
    if t is None or INTERNAL.get() or not is_instrumentation_enabled():
        return None
    return t


def active_in() -> tuple[Telemetry, otel_context.Context] | None:
    """``active()`` and the current context, read once (the per-message paths)."""
    t = live()
    if t is None or INTERNAL.get():
        return None
    ctx = otel_context.get_current()
    if _SUPPRESS_KEYS is None:
        if not is_instrumentation_enabled():
            return None
    elif ctx.get(_SUPPRESS_KEYS[0]) or ctx.get(_SUPPRESS_KEYS[1]):
        return None
    return t, ctx
