"""Key-Value buckets of a JetStream context: create, update, bind, delete, list.

:class:`KeyValueBuckets` is the context's KV area; ``js.create_key_value`` and
the rest delegate to it. A bucket is its stream ``KV_<bucket>`` (see
:mod:`._config`); the keys are :class:`~jsclient.jetstream.kv.store.KeyValue`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

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


class KeyValueBuckets:
    """The Key-Value buckets of a JetStream context (its ``_kv``).

    The public methods are :class:`~jsclient.jetstream.context.JetStream`'s of
    the same name and are documented there.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def _kv_stream(self, action: str, cfg: KeyValueConfig) -> KeyValue:
        js = self._ctx
        if cfg.limit_marker_ttl and js._api_level() < 1:
            raise errors.KeyValueLimitMarkerTTLNotSupportedError()
        sc = stream_config(cfg)
        resp = js._api_request(f"STREAM.{action}.{sc.name}", sc.as_dict())
        return KeyValue(js, StreamInfo.from_response(resp))

    def create_key_value(
        self, config: KeyValueConfigLike | None, fields: dict[str, Any]
    ) -> KeyValue:
        return self._kv_stream("CREATE", kv_config(config, fields))

    def update_key_value(
        self, config: KeyValueConfigLike | None, fields: dict[str, Any]
    ) -> KeyValue:
        cfg = kv_config(config, fields)
        try:
            return self._kv_stream("UPDATE", cfg)
        except errors.StreamNotFoundError as exc:
            raise _bucket_not_found(cfg.bucket, exc) from None

    def create_or_update_key_value(
        self, config: KeyValueConfigLike | None, fields: dict[str, Any]
    ) -> KeyValue:
        cfg = kv_config(config, fields)
        try:
            return self.update_key_value(cfg, {})
        except errors.BucketNotFoundError:
            return self.create_key_value(cfg, {})

    def key_value(self, bucket: str) -> KeyValue:
        check_bucket(bucket)
        js = self._ctx
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
        check_bucket(bucket)
        js = self._ctx
        try:
            js._api_request(f"STREAM.DELETE.{STREAM_PREFIX}{bucket}")
        except errors.StreamNotFoundError as exc:
            raise _bucket_not_found(bucket, exc) from None

    def key_value_names(self) -> Iterator[str]:
        js = self._ctx
        # No subject filter: a mirror bucket's stream has no subjects of its own.
        for name in js._paged("STREAM.NAMES", "streams", {}):
            if isinstance(name, str) and name.startswith(STREAM_PREFIX):
                yield name[len(STREAM_PREFIX) :]

    def key_values(self) -> Iterator[KeyValueStatus]:
        js = self._ctx
        for item in js._paged("STREAM.LIST", "streams", {}):
            info = StreamInfo.from_response(item)
            if is_kv_stream(info):
                yield KeyValueStatus.of(info)


def _bucket_not_found(bucket: str, exc: errors.APIError) -> errors.BucketNotFoundError:
    return errors.BucketNotFoundError(
        code=exc.code, description=f"bucket {bucket!r} not found", err_code=exc.err_code
    )
