"""JetStream's wrappers: publish, publish_async, the Publisher, API requests, consume,
fetch, next and the legacy subscriptions (see :mod:`jsclient.contrib.otel._patches`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from jsclient.contrib.otel import _telemetry as tm
from jsclient.contrib.otel._shared import INTERNAL_SUBJECTS, SKIP_CALLBACKS
from jsclient.contrib.otel._spans import (
    DEFERRED,
    Send,
    now_ns,
    receive,
    send,
)
from jsclient.contrib.otel._telemetry import INTERNAL, NESTED, active, guarded, log
from jsclient.contrib.otel._wrap_core import _process_callback

# -- JetStream publish ------------------------------------------------------


def _pub_ack(op: Send, ack: Any) -> None:
    span = op.span
    span.set_attribute(tm.STREAM, ack.stream)
    span.set_attribute(tm.STREAM_SEQ, ack.seq)
    if ack.duplicate:
        span.set_attribute(tm.DUPLICATE, True)


def _send_publish(
    orig: Any,
    client: Any,
    this: Any,
    subject: str,
    payload: bytes,
    headers: Any,
    kw: Any,
    **how: Any,
) -> Any:
    """A JetStream publish in a producer span: ``orig`` with the span's headers."""
    return send(
        client,
        subject,
        headers,
        lambda h: orig(this, subject, payload, headers=h, **kw),
        body_size=len(payload),
        msg_id=kw.get("msg_id"),
        duration=True,
        **how,
    )


def _js_publish(orig: Any) -> Callable[..., Any]:
    def publish(
        self: Any, subject: str, payload: bytes = b"", *, headers: Any = None, **kw: Any
    ) -> Any:
        if tm.live() is None:
            return orig(self, subject, payload, headers=headers, **kw)
        return _send_publish(
            orig, self._client, self, subject, payload, headers, kw, on_result=_pub_ack
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
        if t.drops_roots and not subject.startswith(INTERNAL_SUBJECTS) and tm.root_dropped():
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
        return _send_publish(
            orig,
            self._client,
            self,
            subject,
            payload,
            headers,
            kw,
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
        return _send_publish(
            orig,
            self._js._client,
            self,
            subject,
            payload,
            headers,
            kw,
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
            and getattr(callback, "__func__", None) not in SKIP_CALLBACKS
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
