"""The wrappers of services, the Key-Value and object stores and the Django worker
(see :mod:`jsclient.contrib.otel._patches`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.trace import SpanKind

from jsclient.contrib.otel import _telemetry as tm
from jsclient.contrib.otel._spans import (
    Send,
    process,
    send,
)
from jsclient.contrib.otel._telemetry import active, guarded, log

# -- services, key-value, objects -----------------------------------------------


def _serve(orig: Any) -> Callable[..., Any]:
    def serve(self: Any, msg: Any) -> Any:
        if tm.live() is None:
            return orig(self, msg)
        return process(
            self._nc,
            msg,
            lambda m: orig(self, m),
            dest=self.subject,
            metric_dest=self.subject,
            group=self.queue_group,
            kind=SpanKind.SERVER,
            extra={"messaging.nats.service.endpoint": self.name},
        )

    return serve


def _store_op(orig: Any, op_name: str, stream_of: Callable[[Any], str]) -> Callable[..., Any]:
    """KV put/create/update and object put: one send span named after the bucket's stream."""

    def op(self: Any, key: str, *args: Any, **kw: Any) -> Any:
        if tm.live() is None:
            return orig(self, key, *args, **kw)
        stream = stream_of(self)

        def result(sent: Send, value: Any) -> None:
            sent.span.set_attribute(tm.STREAM, stream)
            if isinstance(value, int):  # a KV revision
                sent.span.set_attribute(tm.STREAM_SEQ, value)

        return send(
            self._js._client,
            stream,
            None,
            lambda _h: orig(self, key, *args, **kw),
            op_name=op_name,
            span_dest=stream,
            metric_dest=stream,
            on_result=result,
        )

    return op


def _watch_callback(cb: Callable[[Any], Any], stream: str, client: Any) -> Any:
    def callback(entry: Any) -> Any:
        t = active()
        if t is None or entry is None:  # None: "the initial values are all here"
            return cb(entry)
        from opentelemetry import context, trace

        try:
            attrs = tm.base_attrs(client, tm.PROCESS, tm.PROCESS, stream)
            attrs[tm.STREAM] = stream
            seq = getattr(entry, "revision", None)
            if isinstance(seq, int):
                attrs[tm.STREAM_SEQ] = seq
            span = t.tracer.start_span(
                tm.span_name(tm.PROCESS, stream), kind=SpanKind.CONSUMER, attributes=attrs
            )
            token = context.attach(trace.set_span_in_context(span))
        except Exception:
            log.warning("jsclient otel: could not start a watch span", exc_info=True)
            return cb(entry)
        start = tm.now()
        m_attrs = tm.metric_attrs(tm.PROCESS, tm.PROCESS, stream)
        try:
            return cb(entry)
        except BaseException as exc:
            guarded(tm.fail, span, exc, m_attrs)
            raise
        finally:
            context.detach(token)
            span.end()
            t.consumed.add(1, m_attrs)
            t.process_duration.record(tm.now() - start, m_attrs)

    return callback


def _watch(orig: Any, stream_of: Callable[[Any], str]) -> Callable[..., Any]:
    def watch(self: Any, *args: Any, **kw: Any) -> Any:
        cb = kw.get("cb")
        if cb is not None and active() is not None:
            kw["cb"] = _watch_callback(cb, stream_of(self), self._js._client)
        return orig(self, *args, **kw)

    return watch


# -- Django -----------------------------------------------------------------------


def _django_handle(orig: Any) -> Callable[..., Any]:
    def handle(self: Any, msg: Any) -> Any:
        if tm.live() is None:
            return orig(self, msg)
        spec = self.spec
        return process(
            getattr(self.js, "_client", None),
            msg,
            lambda m: orig(self, m),
            dest=msg.subject,
            metric_dest=spec.stream,
            group=spec.durable,
            extra={"code.function.name": spec.handler_path},
        )

    return handle
