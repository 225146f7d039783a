"""JetStream (ADR-37): the context, stream and consumer handles, KV and object store.

Where things live (each subpackage's own docstring lists its modules):

- ``context.py``: :class:`JetStream`, what ``nc.jetstream()`` returns. Every
  public method is defined there, with its docs; most hand the call in one line
  to an area object: ``manage/stream_admin.py`` (streams),
  ``manage/consumer_admin.py`` (consumers: create ... reset),
  ``publish/features.py`` (schedules, counters, batches), ``kv/_manage.py`` and
  ``obj/_manage.py`` (buckets), ``manage/api_level.py`` (the server's API level);
  ``publish``/``publish_async`` and the legacy subscribe calls are bound from
  ``publish/calls.py`` and ``subscribe/``. ``_ctx.py`` is the :class:`Context`
  protocol: what all of these use of it.
- ``manage/``: streams and consumers as resources. ``stream.py``: the
  :class:`Stream` handle (``js.stream(...)``): info, purge, ``get_msg``;
  ``direct.py``: every **direct get** (``get_msg``, ``get_batch``,
  ``get_last_msgs_for``, ``KeyValue.get``); ``names.py``: name and config checks.
- ``consume/``: the one pull engine and what runs on it. ``consumer.py``: the
  :class:`Consumer` handle; ``pull.py``: its **fetch**, ``next``, ``consume``,
  ``messages`` (``fetch.py``: one pull's iterator; ``engine.py``: the engine);
  ``ordered.py``: ``js.ordered_consumer``; ``priority.py``: priority groups;
  ``deleter.py``: the one background consumer deleter of a connection.
- ``publish/``: every way a message gets into a stream. ``js.publish`` is a
  request (``calls.py``); **publish_async** is ``async_pub.py`` on
  ``engine.py``, the one async-publish engine (window, ack timeouts, 503 and
  disconnect rules) that the managed :class:`~jsclient.Publisher`
  (``publisher.py``, ``publish_runner.py``, ``settle.py``, ``state.py``) and
  the Spark sink use too; ``batch.py``, ``fast.py``, ``counters.py``,
  ``schedule.py``: ADR-49/50/51.
- ``subscribe/``: the **legacy subscribe** calls (ADR-13, ADR-15).
  ``push_setup.py``: ``js.subscribe``; ``push.py``: the push subscription;
  ``pull.py``: ``js.pull_subscribe`` and ``psub.fetch``; ``workflow.py``: the
  consumer lookup both share.
- ``kv/``: the Key-Value store. ``store.py``: :class:`KeyValue` (get, put, keys,
  history, ``watch``); ``_watch.py``: the :class:`KeyWatcher` a **KV watch**
  returns, on ``read/watcher.py``.
- ``kv/codecs.py``: key and value codecs (ADR-54, orbit.go's ``kvcodec``) and
  the bucket that applies them, ``codecs.wrap(kv, ...)``.
- ``pcgroups/``: partitioned consumer groups, static and elastic (orbit.go's
  ``pcgroups``): ``config.py`` (the KV entries' JSON), ``partitions.py`` (who
  consumes which partition), ``static.py``, ``elastic.py``, ``_member.py``
  (a running member on ``consume()``).
- ``obj/``: the object store. ``store.py``: :class:`ObjectStore`; ``_reader.py``:
  :class:`ObjectReader`; ``_watch.py``: :class:`ObjectWatcher`.
- ``read/``: ordered reads of a stream that KV and the object store share:
  ``reader.py`` (the one ordered reader, bounded in time and bytes) under
  ``watcher.py`` (watches that live through restarts), ``scan.py`` (keys,
  history, list) and object reads.
- ``compat.py``: :class:`NatsPyCompat`, the mixin :class:`JetStream` inherits
  nats-py's names from (``add_stream``, ``stream_info``, ``add_consumer``,
  ``get_msg``, ``purge_stream``, ...): thin aliases with nats-py's
  signatures, each handing the call to the jsclient method it names.
- ``_wire.py``: API answers, pub acks, publish headers and their errors.

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
