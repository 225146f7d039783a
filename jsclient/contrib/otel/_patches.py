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

from jsclient.contrib.otel._shared import SKIP_CALLBACKS
from jsclient.contrib.otel._telemetry import log
from jsclient.contrib.otel._wrap_core import (
    _client_publish,
    _client_request,
    _client_subscribe,
    _respond,
    _settle,
    _sub_receive,
)
from jsclient.contrib.otel._wrap_js import (
    _api_request,
    _batch_next,
    _consume,
    _fetch,
    _js_publish,
    _js_publish_async,
    _js_subscribe,
    _legacy_fetch,
    _next,
    _publisher_publish_async,
)
from jsclient.contrib.otel._wrap_stores import _django_handle, _serve, _store_op, _watch

_PATCHED: list[tuple[type, str, Any]] = []


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
    SKIP_CALLBACKS.clear()


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


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
        SKIP_CALLBACKS.add(runners.ConsumerRunner.__dict__["_dispatch"])


def _django_runners() -> Any:
    """The Django worker's runners, when Django is installed (importing them needs no settings)."""
    if _module("django") is None:
        return None
    try:
        return importlib.import_module("jsclient.contrib.django.runners")
    except Exception:
        log.debug("jsclient otel: Django worker not instrumented", exc_info=True)
        return None
