"""Bucket management on the JetStream context: create, bind, delete, list.

:class:`ObjectStoreManager` is a mixin of :class:`~jsclient.jetstream.context.JetStream`;
a bucket is its stream ``OBJ_<bucket>`` (see :mod:`._config`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from jsclient import errors
from jsclient.api import StreamInfo
from jsclient.jetstream.obj._config import (
    ALL_CHUNKS_FILTER,
    STREAM_PREFIX,
    ObjectStoreConfigLike,
    ObjectStoreStatus,
    check_bucket,
    obj_config,
    stream_config,
)
from jsclient.jetstream.obj.store import ObjectStore

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context


class ObjectStoreManager:
    """The Object store's part of the JetStream context."""

    def _obs_ctx(self) -> Context:
        return cast("Context", self)

    def create_object_store(
        self, config: ObjectStoreConfigLike | None = None, **fields: Any
    ) -> ObjectStore:
        """Create a bucket (``nats.js.api.ObjectStoreConfig`` or its fields: bucket,
        description, ttl, max_bytes, storage, replicas, placement, metadata,
        compression). An identical one is returned as it is; one with another
        config raises StreamNameAlreadyInUseError."""
        js = self._obs_ctx()
        sc = stream_config(obj_config(config, fields))
        resp = js._api_request(f"STREAM.CREATE.{sc.name}", sc.as_dict())
        return ObjectStore(js, StreamInfo.from_response(resp))

    def object_store(self, bucket: str) -> ObjectStore:
        """A handle on an existing bucket; BucketNotFoundError otherwise."""
        return ObjectStore.bind(self._obs_ctx(), bucket)

    def delete_object_store(self, bucket: str) -> None:
        """Delete a bucket and every object in it; BucketNotFoundError when there is none."""
        check_bucket(bucket)
        try:
            self._obs_ctx()._api_request(f"STREAM.DELETE.{STREAM_PREFIX}{bucket}")
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                code=exc.code, description=f"bucket {bucket!r} not found", err_code=exc.err_code
            ) from None

    def object_store_names(self) -> Iterator[str]:
        """Names of every bucket, page by page."""
        for name in self._obs_ctx()._paged(
            "STREAM.NAMES", "streams", {"subject": ALL_CHUNKS_FILTER}
        ):
            if isinstance(name, str) and name.startswith(STREAM_PREFIX):
                yield name[len(STREAM_PREFIX) :]

    def object_stores(self) -> Iterator[ObjectStoreStatus]:
        """The status of every bucket, page by page."""
        for item in self._obs_ctx()._paged(
            "STREAM.LIST", "streams", {"subject": ALL_CHUNKS_FILTER}
        ):
            info = StreamInfo.from_response(item)
            if str(info.config.name).startswith(STREAM_PREFIX):
                yield ObjectStoreStatus.of(info)
