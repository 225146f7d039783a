"""Object store buckets of a JetStream context: create, bind, delete, list.

:class:`ObjectStoreBuckets` is the context's object store area;
``js.create_object_store`` and the rest delegate to it. A bucket is its stream
``OBJ_<bucket>`` (see :mod:`._config`); the objects are
:class:`~jsclient.jetstream.obj.store.ObjectStore`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

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


class ObjectStoreBuckets:
    """The object store buckets of a JetStream context (its ``_obs``).

    The public methods are :class:`~jsclient.jetstream.context.JetStream`'s of
    the same name and are documented there.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def create_object_store(
        self, config: ObjectStoreConfigLike | str | None, fields: dict[str, Any]
    ) -> ObjectStore:
        js = self._ctx
        if isinstance(config, str):
            # nats-py's form: create_object_store("files"), the bucket's name first.
            if "bucket" in fields:
                raise TypeError("give the bucket's name once: as the first argument or bucket=")
            config, fields = None, {**fields, "bucket": config}
        sc = stream_config(obj_config(config, fields))
        resp = js._api_request(f"STREAM.CREATE.{sc.name}", sc.as_dict())
        return ObjectStore(js, StreamInfo.from_response(resp))

    def object_store(self, bucket: str) -> ObjectStore:
        return ObjectStore.bind(self._ctx, bucket)

    def delete_object_store(self, bucket: str) -> None:
        check_bucket(bucket)
        try:
            self._ctx._api_request(f"STREAM.DELETE.{STREAM_PREFIX}{bucket}")
        except errors.StreamNotFoundError as exc:
            raise errors.BucketNotFoundError(
                code=exc.code, description=f"bucket {bucket!r} not found", err_code=exc.err_code
            ) from None

    def object_store_names(self) -> Iterator[str]:
        for name in self._ctx._paged("STREAM.NAMES", "streams", {"subject": ALL_CHUNKS_FILTER}):
            if isinstance(name, str) and name.startswith(STREAM_PREFIX):
                yield name[len(STREAM_PREFIX) :]

    def object_stores(self) -> Iterator[ObjectStoreStatus]:
        for item in self._ctx._paged("STREAM.LIST", "streams", {"subject": ALL_CHUNKS_FILTER}):
            info = StreamInfo.from_response(item)
            if str(info.config.name).startswith(STREAM_PREFIX):
                yield ObjectStoreStatus.of(info)
