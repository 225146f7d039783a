"""The Key-Value store (ADR-8): buckets of keys with revisions, on JetStream.

Get a bucket from the JetStream context: ``js.create_key_value(bucket="cfg")``
or ``js.key_value("cfg")``. See :class:`KeyValue` and :class:`KeyWatcher`.
"""

from __future__ import annotations

from jsclient.jetstream.kv._config import KeyValueStatus
from jsclient.jetstream.kv._entry import KeyValueEntry
from jsclient.jetstream.kv._watch import KeyWatcher
from jsclient.jetstream.kv.store import KeyValue

__all__ = ["KeyValue", "KeyValueEntry", "KeyValueStatus", "KeyWatcher"]
