"""What both kinds of group share: opening their bucket, reading a config entry."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jsclient import errors
from jsclient.jetstream.pcgroups.errors import ConsumerGroupConfigError, ConsumerGroupNotFoundError

if TYPE_CHECKING:
    from jsclient.jetstream.context import JetStream
    from jsclient.jetstream.kv import KeyValue, KeyValueEntry


def require_names(stream: str, group: str) -> None:
    """ConsumerGroupConfigError unless both names are given."""
    if not stream or not group:
        raise ConsumerGroupConfigError("nats: invalid stream name or consumer group name")


def open_bucket(js: JetStream, bucket: str) -> KeyValue:
    """The bucket; ConsumerGroupNotFoundError when it does not exist."""
    try:
        return js.key_value(bucket)
    except errors.NotFoundError:
        raise ConsumerGroupNotFoundError(
            f"nats: the consumer group bucket {bucket!r} does not exist"
        ) from None


def open_or_create_bucket(js: JetStream, bucket: str, replicas: int) -> KeyValue:
    """The bucket, made (file storage, the stream's replicas) when missing."""
    try:
        return js.key_value(bucket)
    except errors.NotFoundError:
        return js.create_key_value(bucket=bucket, replicas=replicas, storage="file")


def read_entry(kv: KeyValue, key: str) -> KeyValueEntry:
    """The group's entry; ConsumerGroupNotFoundError when it has none."""
    try:
        return kv.get(key)
    except errors.KeyNotFoundError:
        raise ConsumerGroupNotFoundError(f"nats: consumer group {key!r} not found") from None


def group_names(js: JetStream, bucket: str, stream: str) -> list[str]:
    """The groups of ``stream`` a bucket holds configs of (``[]`` without the bucket)."""
    try:
        kv = js.key_value(bucket)
    except errors.NotFoundError:
        return []
    out: list[str] = []
    for key in kv.keys(f"{stream}.>"):
        parts = key.split(".")
        if parts[0] == stream and len(parts) >= 2:
            out.append(parts[1])
    return out
