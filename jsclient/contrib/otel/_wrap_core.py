"""The core client's wrappers: publish, request, subscriptions' callbacks and takes,
acks and replies (see :mod:`jsclient.contrib.otel._patches`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import SpanKind

from jsclient.contrib.otel import _telemetry as tm
from jsclient.contrib.otel._shared import INTERNAL_SUBJECTS
from jsclient.contrib.otel._spans import (
    count_process,
    now_ns,
    process,
    receive,
    send,
    settle,
)
from jsclient.contrib.otel._telemetry import active, guarded

# -- core client ----------------------------------------------------------


def _client_publish(orig: Any) -> Callable[..., Any]:
    def publish(
        self: Any,
        subject: str,
        payload: bytes = b"",
        reply: str | None = None,
        headers: Any = None,
    ) -> None:
        t = tm.live()
        if t is None or subject.startswith(INTERNAL_SUBJECTS):
            return orig(self, subject, payload, reply=reply, headers=headers)  # type: ignore[no-any-return]
        if t.drops_roots and tm.root_dropped():
            # The per-message cost with sampling off: a root the sampler drops is
            # not made, nothing is propagated; only the sent-messages counter counts
            # (one context read, a cached shape, a lock-free count).
            m_attrs, count = t.publish_count(self, subject)
            try:
                orig(self, subject, payload, reply=reply, headers=headers)
            except BaseException as exc:
                guarded(t.sent.add, 1, {**m_attrs, tm.ERROR_TYPE: type(exc).__qualname__})
                raise
            count()
            return None
        return send(  # type: ignore[no-any-return]
            self,
            subject,
            headers,
            lambda h: orig(self, subject, payload, reply=reply, headers=h),
            body_size=len(payload),
            leaf=True,
        )

    return publish


def _client_request(orig: Any) -> Callable[..., Any]:
    def request(
        self: Any,
        subject: str,
        payload: bytes = b"",
        timeout: float | None = 1.0,
        *,
        headers: Any = None,
    ) -> Any:
        if tm.live() is None:
            return orig(self, subject, payload, timeout=timeout, headers=headers)
        return send(
            self,
            subject,
            headers,
            lambda h: orig(self, subject, payload, timeout=timeout, headers=h),
            op_name="request",
            kind=SpanKind.CLIENT,
            body_size=len(payload),
            duration=True,
            leaf=True,
        )

    return request


def _process_callback(
    client: Any,
    cb: Callable[[Any], Any],
    group: str | None,
    dest: str | None,
    metric_dest: str | None,
) -> Any:
    """``cb`` wrapped in a process span (``dest`` None: each message's subject). With
    sampling off and a message with no trace context, only the metrics, when their
    destination is known (``metric_dest``: a subscription's subject, a stream)."""
    # The telemetry it was made for, the metric attributes and the consumed counter:
    # a subscription's messages share them.
    shape: list[Any] = [None, None, None]

    def callback(msg: Any) -> Any:
        t = tm.live()
        if t is None:
            return cb(msg)
        if metric_dest is not None and t.drops_roots and msg._hdr is None and tm.root_dropped():
            if shape[0] is not t:
                m_attrs = t.process_metrics(client, msg, dest, metric_dest)
                shape[:] = [t, m_attrs, t.counter(t.consumed, m_attrs)]
            return count_process(t, msg, cb, shape[1], shape[2])
        to = msg.subject if dest is None else dest
        return process(client, msg, cb, dest=to, metric_dest=metric_dest, group=group)

    return callback


def _client_subscribe(orig: Any) -> Callable[..., Any]:
    def subscribe(
        self: Any, subject: str, queue: str | None = None, cb: Any = None, **kw: Any
    ) -> Any:
        if cb is not None and active() is not None and not tm.internal_subject(self, subject):
            cb = _process_callback(self, cb, queue, subject, subject)
        return orig(self, subject, queue, cb, **kw)

    return subscribe


def _sub_receive(orig: Any, endpoint_cls: type | None) -> Callable[..., Any]:
    def take(self: Any, *args: Any, **kw: Any) -> Any:
        if tm.live() is None or (endpoint_cls is not None and isinstance(self, endpoint_cls)):
            return orig(self, *args, **kw)
        client = self._client
        subject = self.subject
        if tm.internal_subject(client, subject):
            return orig(self, *args, **kw)
        start = now_ns()
        msg = orig(self, *args, **kw)  # a timeout or the end makes no span
        js = msg.reply is not None and msg.reply.startswith("$JS.ACK.")
        guarded(
            functools.partial(
                receive, client, [msg], start, dest=None if js else subject, group=self.queue
            )
        )
        return msg

    return take


# -- acks ------------------------------------------------------------------------


def _settle(orig: Any, op_name: str) -> Callable[..., Any]:
    def ack(self: Any, *args: Any, **kw: Any) -> Any:
        t = tm.live()
        if (
            t is None
            or self._ackd != 0  # settled already, or ack policy none: no span
            or (t.drops_roots and tm.root_dropped())
        ):
            return orig(self, *args, **kw)
        return settle(self, op_name, lambda: orig(self, *args, **kw))

    return ack


def _respond(orig: Any) -> Callable[..., Any]:
    def respond(self: Any, payload: bytes = b"", headers: Any = None) -> Any:
        if active() is not None:
            hdrs = guarded(tm.inject, headers)
            if hdrs is not None:
                headers = hdrs
        return orig(self, payload, headers)

    return respond
