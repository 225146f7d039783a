"""A bucket's config as its stream (ADR-20), object names as subjects, and its status.

A bucket ``b`` is the stream ``OBJ_b``. An object's chunks are the messages on
``$O.b.C.<nuid>`` (a fresh NUID for every put, so a new version never mixes
with the old one); its meta is one message, rolled up, on
``$O.b.M.<name>`` where the name is base64url-encoded *with* padding (what
nats.go's ``base64.URLEncoding`` writes), so a name may hold any character.
This mapping is what every NATS client writes.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jsclient import errors
from jsclient.api import (
    DiscardPolicy,
    ObjectStoreConfig,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamInfo,
)
from jsclient.jetstream.kv._config import check_bucket

STREAM_PREFIX = "OBJ_"
#: What every client cuts an object into unless told otherwise.
DEFAULT_CHUNK_SIZE = 128 * 1024
#: The subject filter that finds every object store's stream (as nats.go lists them).
ALL_CHUNKS_FILTER = "$O.*.C.>"

ObjectStoreConfigLike = ObjectStoreConfig | Mapping[str, Any]

__all__ = [
    "ALL_CHUNKS_FILTER",
    "DEFAULT_CHUNK_SIZE",
    "STREAM_PREFIX",
    "ObjectStoreStatus",
    "check_bucket",
    "check_name",
    "encode_name",
    "obj_config",
    "stream_config",
]


def check_name(name: Any) -> str:
    """``name`` if it can name an object (any non-empty text), else InvalidObjectNameError."""
    if not isinstance(name, str) or not name:
        raise errors.InvalidObjectNameError(f"nats: invalid object name {name!r}")
    try:
        name.encode()
    except UnicodeEncodeError:
        raise errors.InvalidObjectNameError(
            f"nats: object name {name!r} cannot be encoded as UTF-8"
        ) from None
    return name


def encode_name(name: str) -> str:
    """The subject token of an object's name: its UTF-8 bytes in padded base64url."""
    return base64.urlsafe_b64encode(name.encode()).decode()


def obj_config(config: ObjectStoreConfigLike | None, fields: dict[str, Any]) -> ObjectStoreConfig:
    """An ObjectStoreConfig from a config object or mapping plus keyword fields (which win)."""
    if config is None:
        cfg = ObjectStoreConfig(**fields)
    elif isinstance(config, Mapping):
        cfg = ObjectStoreConfig(**{**config, **fields})
    elif hasattr(config, "bucket"):  # ours, or nats-py's own ObjectStoreConfig
        cfg = ObjectStoreConfig(**{**vars(config), **fields})
    else:
        raise TypeError(f"config must be an ObjectStoreConfig, not {type(config).__name__}")
    check_bucket(cfg.bucket)
    return cfg


def stream_config(cfg: ObjectStoreConfig) -> StreamConfig:
    """The stream ``OBJ_<bucket>`` that holds a bucket (ADR-20)."""
    bucket = cfg.bucket
    sc = StreamConfig(
        name=STREAM_PREFIX + str(bucket),
        description=cfg.description,
        subjects=[f"$O.{bucket}.C.>", f"$O.{bucket}.M.>"],
        max_age=float(cfg.ttl) if cfg.ttl else 0.0,
        max_bytes=cfg.max_bytes if cfg.max_bytes else -1,
        storage=cfg.storage or StorageType.FILE,
        num_replicas=cfg.replicas or 1,
        placement=cfg.placement,
        discard=DiscardPolicy.NEW,
        allow_rollup_hdrs=True,
        allow_direct=True,
    )
    metadata = getattr(cfg, "metadata", None)
    if metadata:
        sc.metadata = dict(metadata)
    if getattr(cfg, "compression", False):
        sc.compression = StoreCompression.S2
    return sc


@dataclass
class ObjectStoreStatus:
    """A bucket's state and settings (``obs.status()``, ``js.object_stores()``).

    ``size`` is every byte the bucket's stream holds (chunks and meta);
    ``ttl`` is seconds (0: objects do not expire).
    """

    bucket: str
    description: str | None
    ttl: float
    storage: str
    replicas: int
    sealed: bool
    size: int
    backing_store: str
    metadata: dict[str, str] | None
    is_compressed: bool
    stream_info: StreamInfo = field(repr=False)

    @classmethod
    def of(cls, info: StreamInfo) -> ObjectStoreStatus:
        """The status of the bucket whose stream info this is."""
        cfg = info.config
        compression = getattr(cfg.compression, "value", cfg.compression)
        return cls(
            bucket=str(cfg.name).removeprefix(STREAM_PREFIX),
            description=cfg.description,
            ttl=float(cfg.max_age or 0.0),
            storage=str(getattr(cfg.storage, "value", cfg.storage) or "file"),
            replicas=int(cfg.num_replicas or 1),
            sealed=bool(cfg.sealed),
            size=int(info.state.bytes or 0),
            backing_store="JetStream",
            metadata=_user_metadata(getattr(cfg, "metadata", None)),
            is_compressed=compression not in (None, "none"),
            stream_info=info,
        )


def _user_metadata(md: dict[str, str] | None) -> dict[str, str] | None:
    """The bucket's metadata without what the server adds of its own (``_nats.*``)."""
    own = {k: v for k, v in (md or {}).items() if not k.startswith("_nats.")}
    return own or None
