"""Span and metric attributes, the library's own subjects, and W3C trace context
propagation in message headers (see :mod:`jsclient.contrib.otel._telemetry`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, Span, Status, StatusCode

from jsclient.contrib.otel._names import (
    _INTERNAL_PREFIXES,
    BODY_SIZE,
    CONSUMER,
    DELIVERED,
    DEST,
    DEST_TEMPORARY,
    ERROR_TYPE,
    MSG_ID,
    OP_NAME,
    OP_TYPE,
    SERVER_ADDRESS,
    SERVER_PORT,
    STREAM,
    STREAM_SEQ,
    SYSTEM,
    log,
)


def internal_subject(client: Any, subject: str) -> bool:
    """True for the library's own subjects: API, acks, and the client's inboxes."""
    if subject.startswith(_INTERNAL_PREFIXES):
        return True
    return is_inbox(client, subject)


def inbox_prefix(client: Any) -> str:
    """The client's inbox prefix (``_INBOX`` for an object without options)."""
    try:
        prefix: str = client._opts.inbox_prefix
    except AttributeError:
        prefix = "_INBOX"
    return prefix


def is_inbox(client: Any, subject: str) -> bool:
    return subject.startswith(inbox_prefix(client) + ".")


@lru_cache(maxsize=64)
def _server(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url)
        return (parts.hostname or "", parts.port or 4222)
    except ValueError:
        return None


def base_attrs(client: Any, op_type: str, op_name: str, dest: str | None) -> dict[str, Any]:
    """The attributes every span has; ``dest`` None for a temporary destination."""
    attrs: dict[str, Any] = {SYSTEM: "nats", OP_TYPE: op_type, OP_NAME: op_name}
    if dest is None:
        attrs[DEST_TEMPORARY] = True
    else:
        attrs[DEST] = dest
    try:
        url = client.connected_url
    except Exception:  # a forked child, a closed connection
        url = None
    if url:
        server = _server(url)
        if server is not None:
            attrs[SERVER_ADDRESS], attrs[SERVER_PORT] = server
    return attrs


def metric_attrs(op_type: str, op_name: str, dest: str | None) -> dict[str, Any]:
    """Bounded-cardinality attributes: no inboxes, no message ids, no sequences."""
    attrs: dict[str, Any] = {SYSTEM: "nats", OP_TYPE: op_type, OP_NAME: op_name}
    if dest is not None:
        attrs[DEST] = dest
    return attrs


def span_name(op_name: str, dest: str | None) -> str:
    return op_name if dest is None else f"{op_name} {dest}"


def fail(span: Span, exc: BaseException, attrs: dict[str, Any] | None = None) -> None:
    """Record ``exc`` on ``span`` (and its type in ``attrs``, the metric's attributes)."""
    kind = type(exc).__qualname__
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, str(exc) or kind))
    span.set_attribute(ERROR_TYPE, kind)
    if attrs is not None:
        attrs[ERROR_TYPE] = kind


def inject(headers: Mapping[str, Any] | None, span: Span | None = None) -> Any:
    """A copy of ``headers`` with the current (or ``span``'s) trace context added.

    The caller's mapping is never changed. With no valid context to send (no
    span, or a root span dropped by the sampler) the headers come back as
    they were, so a message without headers stays without them.
    """
    ctx = None
    if span is not None:
        if not span.is_recording() and not trace.get_current_span().get_span_context().is_valid:
            return headers
        ctx = trace.set_span_in_context(span)
    elif not trace.get_current_span().get_span_context().is_valid:
        return headers
    carrier: dict[str, Any] = dict(headers) if headers else {}
    propagate.inject(carrier, ctx)
    return carrier


def extract(msg: Any) -> otel_context.Context | None:
    """The producer's context from a message's headers, or None."""
    if getattr(msg, "_hdr", None) is None:
        return None
    try:
        hdrs = msg.headers
    except Exception:
        return None
    if not hdrs or ("traceparent" not in hdrs and "Traceparent" not in hdrs):
        return None
    return propagate.extract(hdrs, otel_context.Context())


def link_of(msg: Any) -> Link | None:
    ctx = extract(msg)
    if ctx is None:
        return None
    sc = trace.get_current_span(ctx).get_span_context()
    return Link(sc) if sc.is_valid else None


def msg_attrs(attrs: dict[str, Any], msg: Any) -> None:
    """Message attributes: body size, id, subject, and JetStream delivery metadata."""
    try:
        attrs[BODY_SIZE] = len(msg.data)
        if msg._hdr is not None:
            hdrs = msg.headers or {}
            mid = hdrs.get("Nats-Msg-Id")
            if mid:
                attrs[MSG_ID] = mid
        reply = msg.reply
        if reply and reply.startswith("$JS.ACK."):
            meta = msg.metadata
            attrs[STREAM] = meta.stream
            attrs[CONSUMER] = meta.consumer
            attrs[STREAM_SEQ] = meta.sequence.stream
            attrs[DELIVERED] = meta.num_delivered
    except Exception:  # a malformed ack subject: the span goes without
        log.debug("jsclient otel: no metadata for %r", msg, exc_info=True)


def stream_of(msg: Any) -> str | None:
    """The stream of a JetStream message (from its ack subject), else None."""
    reply = msg.reply
    if reply and reply.startswith("$JS.ACK."):
        try:
            stream: str = msg.metadata.stream
            return stream
        except Exception:
            return None
    return None


def now() -> float:
    return time.perf_counter()


def guarded(fn: Callable[..., Any], *args: Any) -> Any:
    """Run an instrumentation step; its failure is logged, never raised to the user."""
    try:
        return fn(*args)
    except Exception:
        log.warning("jsclient otel: instrumentation step failed", exc_info=True)
        return None
