"""The Object store (ADR-20): buckets of objects of any size, cut into chunks, on JetStream.

Get a bucket from the JetStream context: ``js.create_object_store(bucket="files")``
or ``js.object_store("files")``. See :class:`ObjectStore`, :class:`ObjectReader`
and :class:`ObjectWatcher`.
"""

from __future__ import annotations

from jsclient.jetstream.obj._config import ObjectStoreStatus
from jsclient.jetstream.obj._reader import ObjectReader
from jsclient.jetstream.obj._watch import ObjectWatcher
from jsclient.jetstream.obj.store import ObjectStore

__all__ = ["ObjectReader", "ObjectStore", "ObjectStoreStatus", "ObjectWatcher"]
