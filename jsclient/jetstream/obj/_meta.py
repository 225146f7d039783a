"""An object's meta message (ADR-20): :class:`ObjectInfo` as JSON, and its SHA-256 digest.

The JSON has nats.go's fields in nats.go's order, with its omissions: ``name``,
``description``, ``headers`` (each a list of values), ``metadata``,
``options`` (``link``, ``max_chunk_size``), ``bucket``, ``nuid``, ``size``,
``mtime``, ``chunks``, ``digest``, ``deleted``. The modification time is never
stored (the zero time is written, as nats.go does): a reader takes it from the
meta message's stream timestamp. The digest is ``SHA-256=`` and the padded
base64url of the hash; it is read leniently (either base64 alphabet, with or
without padding, any case of the algorithm name), as other clients write it.

Reading, only ``name`` is required: like nats.go (whose JSON decoding leaves a
missing field at its zero value) a missing or null ``bucket`` or ``nuid`` reads
as ``""``, ``size`` and ``chunks`` as 0, ``digest`` as None. nats.js writes a
link (``addLink``) as ``name``, ``bucket`` and ``options.link`` only.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from jsclient import errors
from jsclient.api import ObjectInfo, ObjectLink, ObjectMeta, ObjectMetaOptions

DIGEST_PREFIX = "SHA-256="
#: What nats.go writes for ``mtime``: the modification time is not stored.
ZERO_TIME = "0001-01-01T00:00:00Z"


def digest_value(sha256_digest: bytes) -> str:
    """``SHA-256=<padded base64url>`` of a finished hash."""
    return DIGEST_PREFIX + base64.urlsafe_b64encode(sha256_digest).decode()


def digest_bytes(value: str | None) -> bytes | None:
    """The hash a stored digest names; None when there is none (an empty object may
    have none). BadObjectMetaError for another algorithm or bad base64."""
    if not value:
        return None
    algo, sep, encoded = value.partition("=")
    if not sep or algo.upper() != "SHA-256":
        raise errors.BadObjectMetaError(f"nats: unsupported object digest {value!r}")
    text = encoded.strip().rstrip("=").replace("+", "-").replace("/", "_")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise errors.BadObjectMetaError(f"nats: object digest is not base64: {value!r}") from None
    if len(raw) != 32:
        raise errors.BadObjectMetaError(f"nats: object digest is not a SHA-256: {value!r}")
    return raw


def wire_headers(headers: Any) -> dict[str, list[str]] | None:
    """An object's headers as stored: each name with a list of values."""
    if not headers:
        return None
    if not isinstance(headers, Mapping):
        raise TypeError(f"object headers must be a mapping, not {type(headers).__name__}")
    out: dict[str, list[str]] = {}
    for k, v in headers.items():
        if not isinstance(k, str) or not k:
            raise TypeError(f"an object header name must be a non-empty str, not {k!r}")
        values = [v] if isinstance(v, str) else list(v)
        if not all(isinstance(x, str) for x in values):
            raise TypeError(f"object header {k!r}: values must be str")
        out[k] = values
    return out


def wire_metadata(metadata: Any) -> dict[str, str] | None:
    if not metadata:
        return None
    if not isinstance(metadata, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise TypeError("object metadata must map str to str")
    return dict(metadata)


def meta_json(info: ObjectInfo) -> bytes:
    """The meta message's payload for ``info``."""
    d: dict[str, Any] = {"name": info.name}
    if info.description:
        d["description"] = info.description
    headers = wire_headers(info.headers)
    if headers:
        d["headers"] = headers
    metadata = wire_metadata(getattr(info, "metadata", None))
    if metadata:
        d["metadata"] = metadata
    opts = info.options
    if opts is not None:
        o: dict[str, Any] = {}
        link = opts.link
        if link is not None:
            o["link"] = {"bucket": link.bucket, **({"name": link.name} if link.name else {})}
        if opts.max_chunk_size:
            o["max_chunk_size"] = int(opts.max_chunk_size)
        if o:
            d["options"] = o
    d["bucket"] = info.bucket
    d["nuid"] = info.nuid
    d["size"] = int(info.size or 0)
    d["mtime"] = ZERO_TIME
    d["chunks"] = int(info.chunks or 0)
    if info.digest:
        d["digest"] = info.digest
    if info.deleted:
        d["deleted"] = True
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()


#: What a field the meta lacks (or holds as null) reads as: Go's zero values.
_ZERO_VALUES: dict[str, Any] = {"bucket": "", "nuid": "", "size": 0, "chunks": 0}


def parse_meta(data: bytes, mtime: str | None) -> ObjectInfo:
    """The ObjectInfo a meta message holds, its ``mtime`` the message's time.

    BadObjectMetaError when it is not an object's meta.
    """
    try:
        d = json.loads(data)
        if not isinstance(d, dict):
            raise TypeError("not an object")
        opts = d.get("options")
        if opts is not None and not isinstance(opts, dict):
            raise TypeError("options is not an object")
        if opts and opts.get("link") is not None and not isinstance(opts["link"], dict):
            raise TypeError("options.link is not an object")
        if not isinstance(d.get("name"), str):
            raise TypeError("name is not a string")
        for k, zero in _ZERO_VALUES.items():
            if d.get(k) is None:
                d[k] = zero
        info: ObjectInfo = ObjectInfo.from_response(d)
        if not isinstance(info.bucket, str) or not isinstance(info.nuid, str):
            raise TypeError("bucket or nuid is not a string")
        for n in (info.size, info.chunks):
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise TypeError("size or chunks is not a count")
    except (ValueError, TypeError, KeyError) as exc:
        raise errors.BadObjectMetaError(f"nats: bad object meta: {exc}") from None
    info.mtime = mtime
    info.deleted = bool(info.deleted)
    return info


def new_info(
    bucket: str,
    nuid: str,
    meta: ObjectMeta,
    *,
    link: ObjectLink | None = None,
    chunk_size: int | None = None,
) -> ObjectInfo:
    """A fresh ObjectInfo for ``meta`` in ``bucket`` (no size, chunks or digest yet)."""
    opts = None
    if link is not None or chunk_size:
        opts = ObjectMetaOptions(link=link, max_chunk_size=chunk_size)
    return ObjectInfo(
        name=meta.name or "",
        bucket=bucket,
        nuid=nuid,
        size=0,
        chunks=0,
        description=meta.description,
        headers=wire_headers(meta.headers),
        options=opts,
        metadata=wire_metadata(getattr(meta, "metadata", None)),
    )


def now_rfc3339() -> str:
    """The current UTC time as the server writes times (RFC 3339, ``Z``)."""
    return format_ns(int(datetime.now(UTC).timestamp() * 1_000_000) * 1000)


def format_ns(ns: int) -> str:
    """A time in ns since the epoch as RFC 3339 with the fraction trimmed (as Go's RFC3339Nano)."""
    secs, frac = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        base += "." + f"{frac:09d}".rstrip("0")
    return base + "Z"
