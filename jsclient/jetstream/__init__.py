"""JetStream (ADR-37): the context, stream and consumer handles.

Loaded lazily: ``import jsclient.jetstream`` imports nothing until a name is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsclient.jetstream.consume.consumer import Consumer
    from jsclient.jetstream.context import JetStream
    from jsclient.jetstream.kv import KeyValue, KeyValueEntry, KeyValueStatus, KeyWatcher
    from jsclient.jetstream.manage.stream import Stream
    from jsclient.jetstream.obj import ObjectReader, ObjectStore, ObjectStoreStatus, ObjectWatcher

__all__ = [
    "Consumer",
    "JetStream",
    "KeyValue",
    "KeyValueEntry",
    "KeyValueStatus",
    "KeyWatcher",
    "ObjectReader",
    "ObjectStore",
    "ObjectStoreStatus",
    "ObjectWatcher",
    "Stream",
]

_WHERE = {
    "JetStream": "jsclient.jetstream.context",
    "Stream": "jsclient.jetstream.manage.stream",
    "Consumer": "jsclient.jetstream.consume.consumer",
    "KeyValue": "jsclient.jetstream.kv",
    "KeyValueEntry": "jsclient.jetstream.kv",
    "KeyValueStatus": "jsclient.jetstream.kv",
    "KeyWatcher": "jsclient.jetstream.kv",
    "ObjectReader": "jsclient.jetstream.obj",
    "ObjectStore": "jsclient.jetstream.obj",
    "ObjectStoreStatus": "jsclient.jetstream.obj",
    "ObjectWatcher": "jsclient.jetstream.obj",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
