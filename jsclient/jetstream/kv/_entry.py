"""A bucket's entries: :class:`KeyValueEntry` and how one is read from a message.

An entry is built for every message a watcher or ``keys()`` reads, so it is a
plain ``__slots__`` object whose ``created`` datetime is made only when read.
The operation is a ``KV-Operation`` header (``DEL``/``PURGE``) or none (a put);
the headers are decoded only when their bytes name that header.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jsclient.api import RawStreamMsg
from jsclient.protocol import headers as _headers

PUT = "PUT"
DEL = "DEL"
PURGE = "PURGE"
OPERATION = "KV-Operation"
#: What the server writes where a key's last revision went by itself (server
#: 2.11 limit markers): its age limit or TTL ran out, or it was purged or removed.
MARKER_REASON = "Nats-Marker-Reason"
_OPERATION_BYTES = OPERATION.encode()
_MARKER_BYTES = MARKER_REASON.encode()
_OPS = {PUT: PUT, DEL: DEL, PURGE: PURGE}
_MARKERS = {"MaxAge": PURGE, "Purge": PURGE, "Remove": DEL}


class KeyValueEntry:
    """One revision of a key: ``bucket``, ``key``, ``value`` (bytes), ``revision``
    (its stream sequence), ``delta`` (how many newer revisions a watcher had
    still to deliver when this one came; 0 from ``get``), ``created`` (UTC) and
    ``operation`` (``"PUT"``, ``"DEL"`` or ``"PURGE"``)."""

    __slots__ = ("_created", "bucket", "delta", "key", "operation", "revision", "value")

    def __init__(
        self,
        bucket: str,
        key: str,
        value: bytes,
        revision: int,
        delta: int,
        created: int | str | datetime | None,
        operation: str = PUT,
    ) -> None:
        self.bucket = bucket
        self.key = key
        self.value = value
        self.revision = revision
        self.delta = delta
        self._created = created  # ns since the epoch, an RFC 3339 text, or a datetime
        self.operation = operation

    @property
    def created(self) -> datetime | None:
        """When the server stored this revision (UTC)."""
        c = self._created
        if isinstance(c, int):
            secs, ns = divmod(c, 1_000_000_000)
            c = datetime.fromtimestamp(secs, UTC).replace(microsecond=ns // 1000)
        elif isinstance(c, str):
            c = RawStreamMsg._parse_utc_iso(c)
        self._created = c
        return c

    def __repr__(self) -> str:
        return (
            f"KeyValueEntry(bucket={self.bucket!r}, key={self.key!r}, value={self.value!r}, "
            f"revision={self.revision}, delta={self.delta}, operation={self.operation!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KeyValueEntry):
            return NotImplemented
        return (
            self.bucket == other.bucket
            and self.key == other.key
            and self.value == other.value
            and self.revision == other.revision
            and self.operation == other.operation
        )

    def __hash__(self) -> int:
        return hash((self.bucket, self.key, self.revision))


def operation_of(raw_headers: bytes | None) -> str:
    """The KV operation a message's raw header block names (a put when none)."""
    if raw_headers is None or (
        _OPERATION_BYTES not in raw_headers and _MARKER_BYTES not in raw_headers
    ):
        return PUT
    return operation_in(_headers.decode(raw_headers)[2])


def operation_in(multi: dict[str, list[str]]) -> str:
    """The KV operation of decoded headers: ``KV-Operation``, else a limit marker's reason."""
    values = multi.get(OPERATION)
    if values:
        return _OPS.get(values[0].strip().upper(), PUT)
    reason = multi.get(MARKER_REASON)
    if reason:
        return _MARKERS.get(reason[0].strip(), PUT)
    return PUT


def op_headers(op: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    h: dict[str, Any] = {OPERATION: op}
    if extra:
        h.update(extra)
    return h
