"""A bucket's config as its stream (ADR-8), name and key checks, and its status.

A bucket ``b`` is the stream ``KV_b`` holding one subject per key,
``$KV.b.<key>``; ``history`` is the stream's messages per subject. The mapping
here is what every NATS client writes, so a bucket made here reads the same in
the others, and back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jsclient import errors
from jsclient.api import (
    DiscardPolicy,
    KeyValueConfig,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamInfo,
    StreamSource,
    SubjectTransform,
)

STREAM_PREFIX = "KV_"
MAX_HISTORY = 64
#: The longest duplicate window a bucket gets (and the one of a bucket without a ttl).
DUPLICATE_WINDOW = 120.0

_BUCKET_RE = re.compile(r"[a-zA-Z0-9_-]+")
_KEY_RE = re.compile(r"[-/_=.a-zA-Z0-9]+")
_FILTER_RE = re.compile(r"[-/_=.a-zA-Z0-9*]*>?")

KeyValueConfigLike = KeyValueConfig | Mapping[str, Any]


def check_bucket(bucket: Any) -> str:
    """``bucket`` if it is a valid bucket name, else InvalidBucketNameError."""
    if not isinstance(bucket, str) or not _BUCKET_RE.fullmatch(bucket):
        raise errors.InvalidBucketNameError(f"nats: invalid bucket name {bucket!r}")
    return bucket


def check_key(key: Any) -> str:
    """``key`` if it can be stored, else InvalidKeyError (before anything is sent)."""
    if (
        not isinstance(key, str)
        or not _KEY_RE.fullmatch(key)
        or key[0] == "."
        or key[-1] == "."
        or ".." in key
    ):
        raise errors.InvalidKeyError(f"nats: invalid key {key!r}")
    return key


def check_filter(pattern: Any) -> str:
    """A key filter: a key whose tokens may be ``*``, or whose last token is ``>``."""
    if (
        not isinstance(pattern, str)
        or not pattern
        or not _FILTER_RE.fullmatch(pattern)
        or pattern[0] == "."
        or pattern[-1] == "."
        or ".." in pattern
    ):
        raise errors.InvalidKeyError(f"nats: invalid key filter {pattern!r}")
    for tok in pattern.split("."):
        if ("*" in tok and tok != "*") or (">" in tok and tok != ">"):
            raise errors.InvalidKeyError(f"nats: invalid key filter {pattern!r}")
    return pattern


def kv_config(config: KeyValueConfigLike | None, fields: dict[str, Any]) -> KeyValueConfig:
    """A KeyValueConfig from a config object or mapping plus keyword fields (which win)."""
    if config is None:
        cfg = KeyValueConfig(**fields)
    elif isinstance(config, KeyValueConfig):
        cfg = KeyValueConfig(**{**vars(config), **fields})
    elif isinstance(config, Mapping):
        cfg = KeyValueConfig(**{**config, **fields})
    elif hasattr(config, "bucket"):  # nats-py's own KeyValueConfig
        cfg = KeyValueConfig(**{**vars(config), **fields})
    else:
        raise TypeError(f"config must be a KeyValueConfig, not {type(config).__name__}")
    check_bucket(cfg.bucket)
    history = 1 if cfg.history is None else cfg.history
    if not isinstance(history, int) or history < 1:
        raise errors.KeyHistoryTooLargeError(f"history must be from 1 to 64, got {history!r}")
    if history > MAX_HISTORY:
        raise errors.KeyHistoryTooLargeError()
    return cfg


def _seconds(v: float | None) -> float:
    return float(v) if v else 0.0


def stream_config(cfg: KeyValueConfig) -> StreamConfig:
    """The stream ``KV_<bucket>`` that holds a bucket (ADR-8)."""
    bucket = cfg.bucket
    ttl = _seconds(cfg.ttl)
    dup = min(ttl, DUPLICATE_WINDOW) if ttl > 0 else DUPLICATE_WINDOW
    marker_ttl = _seconds(cfg.limit_marker_ttl)
    sc = StreamConfig(
        name=STREAM_PREFIX + bucket,
        description=cfg.description,
        max_msgs_per_subject=cfg.history or 1,
        max_bytes=cfg.max_bytes if cfg.max_bytes else -1,
        max_age=ttl,
        max_msg_size=cfg.max_value_size if cfg.max_value_size else -1,
        storage=cfg.storage or StorageType.FILE,
        num_replicas=cfg.replicas or 1,
        allow_rollup_hdrs=True,
        deny_delete=True,
        duplicate_window=dup,
        max_msgs=-1,
        max_consumers=-1,
        allow_direct=True if cfg.direct is None else bool(cfg.direct),
        discard=DiscardPolicy.NEW,
        placement=cfg.placement,
        republish=cfg.republish,
    )
    compression = getattr(cfg, "compression", None)
    if compression:
        sc.compression = StoreCompression(getattr(compression, "value", compression))
    if marker_ttl > 0:
        sc.subject_delete_marker_ttl = marker_ttl
        sc.allow_msg_ttl = True
    mirror = getattr(cfg, "mirror", None)
    sources = getattr(cfg, "sources", None)
    if mirror is not None:
        sc.mirror = _mirror(_source(mirror))
        sc.mirror_direct = True
    else:
        sc.subjects = [f"$KV.{bucket}.>"]
        if sources:
            sc.sources = [_kv_source(bucket, _source(s)) for s in sources]
    return sc


def _source(s: Any) -> StreamSource:
    if isinstance(s, StreamSource):
        return StreamSource(**vars(s))
    if isinstance(s, Mapping):
        src: StreamSource = StreamSource.from_response(dict(s))
        return src
    raise TypeError(f"a mirror or source must be a StreamSource, not {type(s).__name__}")


def _mirror(m: StreamSource) -> StreamSource:
    """The mirror as nats.go's ``prepareKeyValueConfig`` writes it: the origin's
    stream name, everything else as given. A mirror, local or in another domain,
    holds the origin's subjects (``$KV.<origin>.>``), which is where nats.go and
    nats.js read them (and ``KeyValue`` too)."""
    if not m.name.startswith(STREAM_PREFIX):
        m.name = STREAM_PREFIX + m.name
    return m


def _kv_source(bucket: str, s: StreamSource) -> StreamSource:
    """A source as nats.go writes it: given transforms are kept as they are (the
    name too, a full stream name); else the name gets its ``KV_`` and the origin's
    subjects are renamed to this bucket's, except for a bucket of the same name in
    another domain (``external``), whose subjects are already this bucket's."""
    if s.subject_transforms:
        return s
    origin = s.name.removeprefix(STREAM_PREFIX)
    s.name = STREAM_PREFIX + origin
    if s.external is None or origin != bucket:
        s.subject_transforms = [SubjectTransform(src=f"$KV.{origin}.>", dest=f"$KV.{bucket}.>")]
    return s


def is_kv_stream(info: StreamInfo) -> bool:
    cfg = info.config
    return (
        bool(cfg.name and cfg.name.startswith(STREAM_PREFIX))
        and (cfg.max_msgs_per_subject or 0) >= 1
    )


@dataclass
class KeyValueStatus:
    """A bucket's state and settings (``kv.status()``, ``js.key_values()``)."""

    bucket: str
    values: int
    history: int
    ttl: float
    bytes: int
    backing_store: str
    is_compressed: bool
    limit_marker_ttl: float
    stream_info: StreamInfo = field(repr=False)

    @classmethod
    def of(cls, info: StreamInfo) -> KeyValueStatus:
        """The status of the bucket whose stream info this is."""
        cfg = info.config
        compression = getattr(cfg.compression, "value", cfg.compression)
        return cls(
            bucket=str(cfg.name).removeprefix(STREAM_PREFIX),
            values=int(info.state.messages or 0),
            history=int(cfg.max_msgs_per_subject or 1),
            ttl=float(cfg.max_age or 0.0),
            bytes=int(info.state.bytes or 0),
            backing_store="JetStream",
            is_compressed=compression not in (None, "none"),
            limit_marker_ttl=float(getattr(cfg, "subject_delete_marker_ttl", None) or 0.0),
            stream_info=info,
        )
