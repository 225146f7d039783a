"""What ``instrument()`` wraps, and how ``uninstrument()`` puts it back.

Every wrapper replaces a class attribute (a function in the class's
``__dict__``); the originals are kept in ``_PATCHED`` and restored in
reverse order. Nothing in the core modules checks for instrumentation: an
uninstrumented process runs the original functions.

Callbacks handed to ``subscribe(cb=)``, ``consume``, ``js.subscribe(cb=)``
and the watchers are wrapped when they are handed over; such a wrapper
looks at the active telemetry on each call, so after ``uninstrument()`` it
only calls the user's function.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import SpanKind

from jsclient.contrib.otel import _telemetry as tm
from jsclient.contrib.otel._spans import (
    DEFERRED,
    Send,
    count_process,
    now_ns,
    process,
    receive,
    send,
    settle,
)
from jsclient.contrib.otel._telemetry import INTERNAL, NESTED, active, guarded, log

_PATCHED: list[tuple[type, str, Any]] = []
_INTERNAL = ("$JS.", "$SRV.", "$SYS.")
#: Functions whose callbacks are wrapped elsewhere (the Django runner's dispatch).
_SKIP_CALLBACKS: set[Any] = set()


def _patch(owner: type, name: str, make: Callable[[Any], Callable[..., Any]]) -> None:
    orig = owner.__dict__[name]
    wrapper = make(orig)
    functools.update_wrapper(wrapper, orig)
    _PATCHED.append((owner, name, orig))
    setattr(owner, name, wrapper)


def unpatch_all() -> None:
    while _PATCHED:
        owner, name, orig = _PATCHED.pop()
        setattr(owner, name, orig)
    _SKIP_CALLBACKS.clear()


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# -- core client ----------------------------------------------------------


def _client_publish(orig: Any) -> Callable[..., Any]:
    def publish(
        self: Any,
        subject: str,
        payload: bytes = b"",
        *,
        reply: str | None = None,
        headers: Any = None,
    ) -> None:
        t = tm.live()
        if t is None or subject.startswith(_INTERNAL):
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
        *,
        timeout: float | None = 1.0,
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
    def subscribe(self: Any, subject: str, queue: str | None = None, **kw: Any) -> Any:
        cb = kw.get("cb")
        if cb is not None and active() is not None and not tm.internal_subject(self, subject):
            kw["cb"] = _process_callback(self, cb, queue, subject, subject)
        return orig(self, subject, queue, **kw)

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


# -- JetStream publish ------------------------------------------------------


def _pub_ack(op: Send, ack: Any) -> None:
    span = op.span
    span.set_attribute(tm.STREAM, ack.stream)
    span.set_attribute(tm.STREAM_SEQ, ack.seq)
    if ack.duplicate:
        span.set_attribute(tm.DUPLICATE, True)


def _js_publish(orig: Any) -> Callable[..., Any]:
    def publish(
        self: Any, subject: str, payload: bytes = b"", *, headers: Any = None, **kw: Any
    ) -> Any:
        if tm.live() is None:
            return orig(self, subject, payload, headers=headers, **kw)
        return send(
            self._client,
            subject,
            headers,
            lambda h: orig(self, subject, payload, headers=h, **kw),
            body_size=len(payload),
            msg_id=kw.get("msg_id"),
            duration=True,
            on_result=_pub_ack,
        )

    return publish


def _end_on_future(op: Send, fut: Any, ack_of: Callable[[Any], Any]) -> Any:
    def done(f: Any) -> None:
        exc = f.exception()
        if exc is None:
            ack = ack_of(f)
            if ack is not None:
                _pub_ack(op, ack)
        op.end(exc)

    fut.add_done_callback(lambda f: guarded(done, f))
    return DEFERRED


def _js_publish_async(orig: Any) -> Callable[..., Any]:
    def publish_async(
        self: Any, subject: str, payload: bytes = b"", *, headers: Any = None, **kw: Any
    ) -> Any:
        t = tm.live()
        if t is None:
            return orig(self, subject, payload, headers=headers, **kw)
        if t.drops_roots and not subject.startswith(_INTERNAL) and tm.root_dropped():
            # Sampling off, as a core publish: counted when sent (its ack is not
            # followed: a done-callback per message would cost a thread hop).
            m_attrs, count = t.publish_count(self._client, subject)
            try:
                fut = orig(self, subject, payload, headers=headers, **kw)
            except BaseException as exc:
                guarded(t.sent.add, 1, {**m_attrs, tm.ERROR_TYPE: type(exc).__qualname__})
                raise
            count()
            return fut
        return send(
            self._client,
            subject,
            headers,
            lambda h: orig(self, subject, payload, headers=h, **kw),
            body_size=len(payload),
            msg_id=kw.get("msg_id"),
            duration=True,
            on_result=lambda op, fut: _end_on_future(op, fut, lambda f: f.result()),
            deferred=True,
        )

    return publish_async


def _publisher_publish_async(orig: Any) -> Callable[..., Any]:
    def publish_async(
        self: Any, subject: str, payload: bytes = b"", *, headers: Any = None, **kw: Any
    ) -> Any:
        if tm.live() is None:
            return orig(self, subject, payload, headers=headers, **kw)
        return send(
            self._js._client,
            subject,
            headers,
            lambda h: orig(self, subject, payload, headers=h, **kw),
            body_size=len(payload),
            msg_id=kw.get("msg_id"),
            duration=True,
            # The flight is done once written; its ack future once settled.
            on_result=lambda op, fl: _end_on_future(
                op, fl.publish_ack_future, lambda f: f.result()
            ),
            deferred=True,
        )

    return publish_async


def _api_request(orig: Any) -> Callable[..., Any]:
    def api_request(self: Any, *args: Any, **kw: Any) -> Any:
        if tm.live() is None:
            return orig(self, *args, **kw)
        token = INTERNAL.set(True)
        try:
            return orig(self, *args, **kw)
        finally:
            INTERNAL.reset(token)

    return api_request


# -- JetStream consume -------------------------------------------------------


def _consume(orig: Any) -> Callable[..., Any]:
    def consume(self: Any, callback: Callable[[Any], Any], *args: Any, **kw: Any) -> Any:
        if (
            active() is not None
            and callable(callback)
            and getattr(callback, "__func__", None) not in _SKIP_CALLBACKS
        ):
            stream = getattr(self, "stream_name", None)
            callback = _process_callback(self._js._client, callback, self.name, None, stream)
        return orig(self, callback, *args, **kw)

    return consume


def _js_subscribe(orig: Any) -> Callable[..., Any]:
    def subscribe(self: Any, *args: Any, **kw: Any) -> Any:
        cb = kw.get("cb")
        if cb is not None and active() is not None:
            group = kw.get("durable") or kw.get("consumer") or (args[1] if len(args) > 1 else None)
            group = group or kw.get("queue")
            if not kw.get("manual_ack"):
                # The subscription acks after the callback returns; acked here, in
                # the process span, the ack is its child (the later ack is a no-op).
                user_cb = cb

                def cb(msg: Any) -> None:
                    user_cb(msg)
                    msg.ack()

            kw["cb"] = _process_callback(self._client, cb, group, None, None)
        return orig(self, *args, **kw)

    return subscribe


class _Batch:
    """What a fetch's batch carries for its receive span (set by the fetch wrapper)."""

    __slots__ = ("client", "group", "msgs", "parent", "start")

    def __init__(self, client: Any, group: str | None) -> None:
        from opentelemetry import context

        self.client = client
        self.group = group
        self.msgs: list[Any] = []
        self.parent = context.get_current()
        self.start = now_ns()


_BATCH_ATTR = "_jsclient_otel_batch"


def _fetch(orig: Any) -> Callable[..., Any]:
    def fetch(self: Any, *args: Any, **kw: Any) -> Any:
        if active() is None or NESTED.get():
            return orig(self, *args, **kw)
        token = NESTED.set(True)  # an ordered consumer's fetch makes an inner one
        try:
            batch = orig(self, *args, **kw)
        finally:
            NESTED.reset(token)
        try:
            setattr(batch, _BATCH_ATTR, _Batch(self._js._client, self.name))
        except Exception:
            log.debug("jsclient otel: cannot follow this batch", exc_info=True)
        return batch

    return fetch


def _end_batch(batch: Any, state: _Batch, error: BaseException | None) -> None:
    setattr(batch, _BATCH_ATTR, None)
    receive(
        state.client,
        state.msgs,
        state.start,
        dest=None,
        group=state.group,
        parent=state.parent,
        error=error,
    )


def _batch_next(orig: Any) -> Callable[..., Any]:
    def __next__(self: Any) -> Any:
        state: _Batch | None = getattr(self, _BATCH_ATTR, None)
        if state is None:
            return orig(self)
        token = NESTED.set(True)
        try:
            msg = orig(self)
        except StopIteration:
            guarded(_end_batch, self, state, None)
            raise
        except BaseException as exc:
            guarded(_end_batch, self, state, exc)
            raise
        finally:
            NESTED.reset(token)
        state.msgs.append(msg)
        return msg

    return __next__


def _next(orig: Any) -> Callable[..., Any]:
    """``consumer.next()`` and ``messages().next()``: one receive span per message."""

    def next_msg(self: Any, *args: Any, **kw: Any) -> Any:
        if active() is None or NESTED.get():
            return orig(self, *args, **kw)
        start = now_ns()
        token = NESTED.set(True)
        try:
            msg = orig(self, *args, **kw)
        finally:
            NESTED.reset(token)
        client = getattr(self, "_client", None) or self._js._client
        guarded(
            functools.partial(
                receive, client, [msg], start, dest=None, group=getattr(self, "name", None)
            )
        )
        return msg

    return next_msg


def _legacy_fetch(orig: Any) -> Callable[..., Any]:
    def fetch(self: Any, *args: Any, **kw: Any) -> Any:
        if active() is None:
            return orig(self, *args, **kw)
        start = now_ns()
        msgs = orig(self, *args, **kw)
        guarded(functools.partial(receive, self._js._client, msgs, start, dest=None))
        return msgs

    return fetch


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


# -- instrument ----------------------------------------------------------------------


def patch_all() -> None:
    from jsclient.client import Client
    from jsclient.jetstream.consume.contexts import MessagesContext
    from jsclient.jetstream.consume.fetch import FetchBatch
    from jsclient.jetstream.consume.ordered import OrderedConsumer
    from jsclient.jetstream.consume.ordered_source import OrderedBatch
    from jsclient.jetstream.consume.pull import PullConsumerMixin
    from jsclient.jetstream.context import JetStream
    from jsclient.jetstream.kv.store import KeyValue
    from jsclient.jetstream.obj.store import ObjectStore
    from jsclient.jetstream.publish.publisher import Publisher
    from jsclient.jetstream.subscribe.pull import PullSubscription
    from jsclient.micro.endpoint import Endpoint, _EndpointSubscription
    from jsclient.msg import Msg
    from jsclient.subscription import Subscription

    _patch(Client, "publish", _client_publish)
    _patch(Client, "request", _client_request)
    _patch(Client, "subscribe", _client_subscribe)
    _patch(Subscription, "next_msg", lambda o: _sub_receive(o, _EndpointSubscription))
    _patch(Subscription, "__next__", lambda o: _sub_receive(o, _EndpointSubscription))

    _patch(JetStream, "publish", _js_publish)
    _patch(JetStream, "publish_async", _js_publish_async)
    _patch(JetStream, "_api_request", _api_request)
    _patch(JetStream, "subscribe", _js_subscribe)
    _patch(Publisher, "publish_async", _publisher_publish_async)

    for cls in (PullConsumerMixin, OrderedConsumer):
        _patch(cls, "consume", _consume)
        _patch(cls, "next", _next)
        for name in ("fetch", "fetch_bytes", "fetch_no_wait"):
            _patch(cls, name, _fetch)
    _patch(FetchBatch, "__next__", _batch_next)
    _patch(OrderedBatch, "__next__", _batch_next)
    _patch(MessagesContext, "next", _next)
    _patch(PullSubscription, "fetch", _legacy_fetch)

    for name, op_name in (
        ("ack", "ack"),
        ("nak", "nak"),
        ("term", "term"),
        ("in_progress", "in_progress"),
        ("ack_sync", "ack"),
    ):
        _patch(Msg, name, lambda o, n=op_name: _settle(o, n))  # type: ignore[misc]
    _patch(Msg, "respond", _respond)

    _patch(Endpoint, "_serve", _serve)

    def kv_stream(kv: Any) -> str:
        return f"KV_{kv.bucket}"

    def obj_stream(store: Any) -> str:
        return f"OBJ_{store.bucket}"

    for name in ("put", "create", "update"):
        _patch(KeyValue, name, lambda o, n=name: _store_op(o, n, kv_stream))  # type: ignore[misc]
    _patch(ObjectStore, "put", lambda o: _store_op(o, "put", obj_stream))
    _patch(KeyValue, "watch", lambda o: _watch(o, kv_stream))
    _patch(ObjectStore, "watch", lambda o: _watch(o, obj_stream))

    runners = _django_runners()
    if runners is not None:
        _patch(runners.ConsumerRunner, "_handle", _django_handle)
        _SKIP_CALLBACKS.add(runners.ConsumerRunner.__dict__["_dispatch"])


def _django_runners() -> Any:
    """The Django worker's runners, when Django is installed (importing them needs no settings)."""
    if _module("django") is None:
        return None
    try:
        return importlib.import_module("jsclient.contrib.django.runners")
    except Exception:
        log.debug("jsclient otel: Django worker not instrumented", exc_info=True)
        return None
