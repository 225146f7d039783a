"""The span shapes the wrappers share: send, receive, process and settle.

Each takes the original call as a function and runs it unchanged when the
instrumentation is off, suppressed, or the subject is the library's own. A
failure of the instrumentation itself is logged and the user's call goes on.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind

from jsclient.contrib.otel import _telemetry as tm
from jsclient.contrib.otel._telemetry import (
    BODY_SIZE,
    DEST,
    DEST_TEMPLATE,
    GROUP,
    MSG_ID,
    NESTED,
    PROCESS,
    RECEIVE,
    SEND,
    SETTLE,
    STREAM,
    Telemetry,
    active,
    active_in,
    base_attrs,
    extract,
    fail,
    guarded,
    inject,
    is_inbox,
    log,
    metric_attrs,
    msg_attrs,
    span_name,
)

#: What an ``on_result`` hook returns to keep the span open (publish_async).
DEFERRED = object()


class Send:
    """An open send/request span and its metric attributes (ended by ``end``)."""

    __slots__ = ("duration", "m_attrs", "span", "start", "t")

    def __init__(self, t: Telemetry, span: Span, m_attrs: dict[str, Any], duration: bool) -> None:
        self.t = t
        self.span = span
        self.m_attrs = m_attrs  # shared with the shape cache: replaced, never changed
        self.start = time.perf_counter()
        self.duration = duration

    def end(self, exc: BaseException | None = None) -> None:
        if exc is not None:
            self.m_attrs = dict(self.m_attrs)
            fail(self.span, exc, self.m_attrs)
        self.span.end()
        self.t.sent.add(1, self.m_attrs)
        if self.duration:
            self.t.op_duration.record(time.perf_counter() - self.start, self.m_attrs)


def sampled_out(t: Telemetry) -> bool:
    """True when a span started now would be dropped: a root under a sampler that drops roots."""
    return t.drops_roots and not trace.get_current_span().get_span_context().is_valid


def send(
    client: Any,
    subject: str,
    headers: Mapping[str, Any] | None,
    call: Callable[[Any], Any],
    *,
    op_name: str = SEND,
    kind: SpanKind = SpanKind.PRODUCER,
    body_size: int | None = None,
    msg_id: str | None = None,
    duration: bool = False,
    span_dest: str | None = None,
    metric_dest: str | None = None,
    on_result: Callable[[Send, Any], Any] | None = None,
    leaf: bool = False,
    deferred: bool = False,
) -> Any:
    """Run ``call(headers)`` in a send (or request) span, the headers carrying its context.

    ``span_dest`` names the span (default: the subject); ``metric_dest`` is
    the metrics' destination (default: the same). ``on_result(send, result)``
    may add attributes; when it returns DEFERRED it ends the span itself.
    ``leaf``: the call makes no other instrumented call (core publish and
    request), so the span need not be made current around it. ``deferred``:
    ``on_result`` ends the span later (an async publish's ack).

    A root span the sampler would drop is not made at all (only the metrics
    count), and the headers stay as given: nothing to propagate.
    """
    state = active_in()
    if state is None or subject.startswith(("$JS.", "$SRV.", "$SYS.")):
        return call(headers)
    if NESTED.get():
        # Inside another instrumented operation: its span is current; carry it.
        hdrs = guarded(inject, headers)
        return call(headers if hdrs is None and headers is not None else hdrs)
    t, ctx = state
    dropped = t.drops_roots and not trace.get_current_span(ctx).get_span_context().is_valid
    if dropped and ((leaf and on_result is None) or deferred):
        # The sampler drops this root: no span, nothing to propagate; only the metrics
        # count. An async publish is counted when sent, its ack not waited for: a
        # done-callback per message would cost a callback-thread hop (docs/otel.md).
        return _count_send(
            t,
            client,
            subject,
            headers,
            call,
            op_name,
            span_dest,
            metric_dest,
            duration and not deferred,
        )
    try:
        name, base, m_attrs = t.send_shape(client, op_name, subject, span_dest, metric_dest)
        if dropped:
            span: Span = trace.INVALID_SPAN
            hdrs = headers
        else:
            attrs = dict(base)
            if body_size is not None:
                attrs[BODY_SIZE] = body_size
            if msg_id is None and headers:
                msg_id = headers.get("Nats-Msg-Id")
                if isinstance(msg_id, list | tuple):  # a multi-valued header: the first
                    msg_id = msg_id[0] if msg_id else None
            if msg_id:
                attrs[MSG_ID] = str(msg_id)
            span = t.tracer.start_span(name, kind=kind, attributes=attrs)
            hdrs = inject(headers, span)
        op = Send(t, span, m_attrs, duration)
    except Exception:
        log.warning("jsclient otel: could not start a send span", exc_info=True)
        return call(headers)
    if leaf:
        try:
            result = call(hdrs)
        except BaseException as exc:
            guarded(op.end, exc)
            raise
    else:
        token = NESTED.set(True)
        ctx_token = None if dropped else otel_context.attach(trace.set_span_in_context(span))
        try:
            result = call(hdrs)
        except BaseException as exc:
            if ctx_token is not None:
                otel_context.detach(ctx_token)
            NESTED.reset(token)
            guarded(op.end, exc)
            raise
        if ctx_token is not None:
            otel_context.detach(ctx_token)
        NESTED.reset(token)
    if on_result is not None and guarded(on_result, op, result) is DEFERRED:
        return result
    guarded(op.end)
    return result


def _count_send(
    t: Telemetry,
    client: Any,
    subject: str,
    headers: Any,
    call: Callable[[Any], Any],
    op_name: str,
    span_dest: str | None,
    metric_dest: str | None,
    duration: bool,
) -> Any:
    try:
        m_attrs = t.metric_shape(client, op_name, subject, span_dest, metric_dest)
    except Exception:
        log.warning("jsclient otel: could not count a send", exc_info=True)
        return call(headers)
    start = time.perf_counter() if duration else 0.0
    try:
        result = call(headers)
    except BaseException as exc:
        m_attrs = {**m_attrs, tm.ERROR_TYPE: type(exc).__qualname__}
        guarded(t.sent.add, 1, m_attrs)
        if duration:
            guarded(t.op_duration.record, time.perf_counter() - start, m_attrs)
        raise
    t.sent.add(1, m_attrs)
    if duration:
        t.op_duration.record(time.perf_counter() - start, m_attrs)
    return result


def consumer_attrs(
    client: Any, msg: Any, op_type: str, op_name: str, dest: str | None, group: str | None
) -> dict[str, Any]:
    attrs = base_attrs(client, op_type, op_name, dest)
    subject = msg.subject
    if dest is not None and subject != dest:
        attrs[DEST_TEMPLATE] = dest
        attrs[DEST] = subject
    if group:
        attrs[GROUP] = group
    msg_attrs(attrs, msg)
    return attrs


def process(
    client: Any,
    msg: Any,
    call: Callable[[Any], Any],
    *,
    dest: str | None,
    metric_dest: str | None,
    group: str | None = None,
    kind: SpanKind = SpanKind.CONSUMER,
    extra: Mapping[str, Any] | None = None,
) -> Any:
    """Run ``call(msg)`` in a process span, a child of the producer's context.

    The span is made current on this thread for the call, so what the
    callback publishes (or acks) belongs to it.
    """
    state = active_in()
    if state is None:
        return call(msg)
    t, ctx = state
    try:
        parent = extract(msg)
        if (
            parent is None
            and t.drops_roots
            and not trace.get_current_span(ctx).get_span_context().is_valid
        ):
            # A root the sampler drops: no span, no context; only the metrics count.
            return _count_process(t, msg, call, t.process_metrics(client, msg, dest, metric_dest))
        temporary = dest is not None and is_inbox(client, dest)
        if temporary:
            dest = metric_dest = None
        attrs = consumer_attrs(client, msg, PROCESS, PROCESS, dest, group)
        if extra:
            attrs.update(extra)
        span = t.tracer.start_span(span_name(PROCESS, dest), parent, kind=kind, attributes=attrs)
        if metric_dest is None and not temporary:
            metric_dest = attrs.get(STREAM) or dest
        m_attrs = metric_attrs(PROCESS, PROCESS, metric_dest)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
    except Exception:
        log.warning("jsclient otel: could not start a process span", exc_info=True)
        return call(msg)
    start = time.perf_counter()
    error: BaseException | None = None
    try:
        return call(msg)
    except BaseException as exc:
        error = exc
        raise
    finally:
        otel_context.detach(token)
        guarded(_end_process, t, span, m_attrs, start, error)


def _count_process(
    t: Telemetry, msg: Any, call: Callable[[Any], Any], m_attrs: dict[str, Any]
) -> Any:
    start = time.perf_counter()
    try:
        return call(msg)
    except BaseException as exc:
        m_attrs = {**m_attrs, tm.ERROR_TYPE: type(exc).__qualname__}  # shared: copied
        raise
    finally:
        t.consumed.add(1, m_attrs)
        t.process_duration.record(time.perf_counter() - start, m_attrs)


#: On the sampled-off path one callback in PROCESS_DURATION_EVERY has its duration
#: recorded in ``messaging.process.duration`` (errors: every one): the SDK's
#: histogram ``record`` costs ~5-6 µs, more than the rest of the wrapper, and a
#: histogram has no asynchronous form. Counts come from the consumed counter.
PROCESS_DURATION_EVERY = 16
_unsampled_callbacks = itertools.count()  # next() is one C call: safe across threads


def count_process(
    t: Telemetry,
    msg: Any,
    call: Callable[[Any], Any],
    m_attrs: dict[str, Any],
    count: Callable[[], Any],
) -> Any:
    """``call(msg)`` with only the metrics (a root the sampler drops); ``count`` is the
    consumed-messages counter of ``m_attrs`` (shared: copied for an error)."""
    perf_counter = time.perf_counter
    start = perf_counter()
    try:
        result = call(msg)
    except BaseException as exc:
        attrs = {**m_attrs, tm.ERROR_TYPE: type(exc).__qualname__}
        guarded(t.consumed.add, 1, attrs)
        guarded(t.process_duration.record, perf_counter() - start, attrs)
        raise
    count()
    if not t.no_meter and not next(_unsampled_callbacks) % PROCESS_DURATION_EVERY:
        t.process_duration.record(perf_counter() - start, m_attrs)
    return result


def _end_process(
    t: Telemetry, span: Span, m_attrs: dict[str, Any], start: float, error: BaseException | None
) -> None:
    if error is not None:
        fail(span, error, m_attrs)
    span.end()
    t.consumed.add(1, m_attrs)
    t.process_duration.record(time.perf_counter() - start, m_attrs)


def receive(
    client: Any,
    msgs: Iterable[Any],
    start_ns: int,
    *,
    dest: str | None,
    group: str | None = None,
    parent: otel_context.Context | None = None,
    error: BaseException | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """A receive span (CLIENT) from ``start_ns`` to now, linked to each message's producer.

    ``dest`` None takes the stream of the first JetStream message.
    """
    t = active()
    if t is None:
        return
    msgs = list(msgs)
    if sampled_out(t) and (parent is None or not _valid(parent)):
        if msgs and dest is None:
            dest = tm.stream_of(msgs[0])
        m_attrs = metric_attrs(RECEIVE, RECEIVE, dest)
        if msgs:
            t.consumed.add(len(msgs), m_attrs)
        return
    if dest is None and msgs:
        dest = tm.stream_of(msgs[0])
    links: list[Link] = []
    for m in msgs:
        link = tm.link_of(m)
        if link is not None:
            links.append(link)
    if len(msgs) == 1:
        attrs = consumer_attrs(client, msgs[0], RECEIVE, RECEIVE, dest, group)
        if dest is not None and dest == attrs.get(STREAM):
            # Pulled from a stream: the stream is the destination, as for a batch.
            attrs.pop(DEST_TEMPLATE, None)
            attrs[DEST] = dest
            attrs[tm.SUBJECT] = msgs[0].subject
    else:
        attrs = base_attrs(client, RECEIVE, RECEIVE, dest)
        if msgs:
            first: dict[str, Any] = {}
            msg_attrs(first, msgs[0])
            for key in (STREAM, tm.CONSUMER):
                if key in first:
                    attrs[key] = first[key]
        if group:
            attrs[GROUP] = group
    if dest is None:
        attrs.pop(tm.DEST_TEMPORARY, None)  # unknown, not temporary
    attrs[tm.BATCH_COUNT] = len(msgs)
    if extra:
        attrs.update(extra)
    span = t.tracer.start_span(
        span_name(RECEIVE, dest),
        parent,
        kind=SpanKind.CLIENT,
        attributes=attrs,
        links=links,
        start_time=start_ns,
    )
    m_attrs = metric_attrs(RECEIVE, RECEIVE, dest)
    if error is not None:
        fail(span, error, m_attrs)
    span.end()
    if msgs:
        t.consumed.add(len(msgs), m_attrs)


def settle(msg: Any, op_name: str, call: Callable[[], Any]) -> Any:
    """An ack/nak/term/in_progress/ack_sync as a short CLIENT span (type ``settle``)."""
    t = active()
    if t is None or NESTED.get() or msg._ackd != 0 or sampled_out(t):
        return call()  # not for a settled or ack-none message, nor a dropped root
    try:
        attrs: dict[str, Any] = {}
        msg_attrs(attrs, msg)
        stream = attrs.get(STREAM)
        attrs.update(base_attrs(msg._client, SETTLE, op_name, stream))
        if stream is None:
            attrs.pop(tm.DEST_TEMPORARY, None)
        links: list[Link] = []
        if not trace.get_current_span().get_span_context().is_valid:
            link = tm.link_of(msg)
            if link is not None:
                links.append(link)
        span = t.tracer.start_span(
            span_name(op_name, stream), kind=SpanKind.CLIENT, attributes=attrs, links=links
        )
    except Exception:
        log.warning("jsclient otel: could not start a settle span", exc_info=True)
        return call()
    token = NESTED.set(True)
    try:
        return call()
    except BaseException as exc:
        guarded(fail, span, exc)
        raise
    finally:
        NESTED.reset(token)
        span.end()


def _valid(ctx: otel_context.Context) -> bool:
    return trace.get_current_span(ctx).get_span_context().is_valid


def now_ns() -> int:
    return time.time_ns()
