"""Bucket management on the JetStream context: create, update, bind, delete, list.

:class:`KeyValueManager` is a mixin of :class:`~jsclient.jetstream.context.JetStream`;
a bucket is its stream ``KV_<bucket>`` (see :mod:`._config`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from jsclient import errors
from jsclient.api import KeyValueConfig, StreamInfo
from jsclient.jetstream.kv._config import (
    STREAM_PREFIX,
    KeyValueConfigLike,
    KeyValueStatus,
    check_bucket,
    is_kv_stream,
    kv_config,
    stream_config,
)
from jsclient.jetstream.kv.store import KeyValue

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context


class KeyValueManager:
    """The Key-Value store's part of the JetStream context."""

    def _ctx(self) -> Context:
        return cast("Context", self)

    def _kv_stream(self, action: str, cfg: KeyValueConfig) -> KeyValue:
        js = self._ctx()
        if cfg.limit_marker_ttl and js._api_level() < 1:
            raise errors.KeyValueLimitMarkerTTLNotSupportedError()
        sc = stream_config(cfg)
        resp = js._api_request(f"STREAM.{action}.{sc.name}", sc.as_dict())
        return KeyValue(js, StreamInfo.from_response(resp))

    def create_key_value(self, config: KeyValueConfigLike | None = None, **fields: Any) -> KeyValue:
        """Create a bucket. An identical one is returned as it is; one with another
        config raises StreamNameAlreadyInUseError."""
        return self._kv_stream("CREATE", kv_config(config, fields))

    def update_key_value(self, config: KeyValueConfigLike | None = None, **fields: Any) -> KeyValue:
        """Change a bucket's config; BucketNotFoundError when there is no such bucket."""
        cfg = kv_config(config, fields)
        try:
            return self._kv_stream("UPDATE", cfg)
        except errors.StreamNotFoundError as exc:
            raise _bucket_not_found(cfg.bucket, exc) from None

    def create_or_update_key_value(
        self, config: KeyValueConfigLike | None = None, **fields: Any
    ) -> KeyValue:
        """Update the bucket, or create it when there is none."""
        cfg = kv_config(config, fields)
        try:
            return self.update_key_value(cfg)
        except errors.BucketNotFoundError:
            return self.create_key_value(cfg)

    def key_value(self, bucket: str) -> KeyValue:
        """A handle on an existing bucket; BucketNotFoundError otherwise."""
        check_bucket(bucket)
        js = self._ctx()
        try:
            resp = js._api_request(f"STREAM.INFO.{STREAM_PREFIX}{bucket}")
        except errors.StreamNotFoundError as exc:
            raise _bucket_not_found(bucket, exc) from None
        info = StreamInfo.from_response(resp)
        if not is_kv_stream(info):
            raise errors.BadBucketError(
                code=400, description=f"stream {STREAM_PREFIX}{bucket} is not a key-value bucket"
            )
        return KeyValue(js, info)

    def delete_key_value(self, bucket: str) -> None:
        """Delete a bucket and every key in it; BucketNotFoundError when there is none."""
        check_bucket(bucket)
        js = self._ctx()
        try:
            js._api_request(f"STREAM.DELETE.{STREAM_PREFIX}{bucket}")
        except errors.StreamNotFoundError as exc:
            raise _bucket_not_found(bucket, exc) from None

    def key_value_names(self) -> Iterator[str]:
        """Names of every bucket, page by page."""
        js = self._ctx()
        # No subject filter: a mirror bucket's stream has no subjects of its own.
        for name in js._paged("STREAM.NAMES", "streams", {}):
            if isinstance(name, str) and name.startswith(STREAM_PREFIX):
                yield name[len(STREAM_PREFIX) :]

    def key_values(self) -> Iterator[KeyValueStatus]:
        """The status of every bucket, page by page."""
        js = self._ctx()
        for item in js._paged("STREAM.LIST", "streams", {}):
            info = StreamInfo.from_response(item)
            if is_kv_stream(info):
                yield KeyValueStatus.of(info)


def _bucket_not_found(bucket: str, exc: errors.APIError) -> errors.BucketNotFoundError:
    return errors.BucketNotFoundError(
        code=exc.code, description=f"bucket {bucket!r} not found", err_code=exc.err_code
    )
