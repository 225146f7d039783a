"""A bucket's entries: :class:`KeyValueEntry` and how one is read from a message.

An entry is built for every message a watcher or ``history()`` reads, so it is
a tuple-based record whose ``created`` datetime is made only when read.
The operation is a ``KV-Operation`` header (``DEL``/``PURGE``) or none (a put);
the headers are decoded only when their bytes name that header.
"""

from __future__ import annotations

from datetime import UTC, datetime
from operator import itemgetter
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


class KeyValueEntry(tuple[str, str, bytes, int, int, Any, str]):
    """One revision of a key: ``bucket``, ``key``, ``value`` (bytes), ``revision``
    (its stream sequence), ``delta`` (how many newer revisions a watcher had
    still to deliver when this one came; 0 from ``get``), ``created`` (UTC) and
    ``operation`` (``"PUT"``, ``"DEL"`` or ``"PURGE"``).

    An immutable record. It is a tuple underneath because a watcher or a scan
    makes one per message, and a tuple is the cheapest object Python builds;
    read it by its field names. Two entries are equal when bucket, key, value,
    revision and operation are.
    """

    __slots__ = ()

    def __new__(
        cls,
        bucket: str,
        key: str,
        value: bytes,
        revision: int,
        delta: int,
        created: int | str | datetime | None,
        operation: str = PUT,
    ) -> KeyValueEntry:
        # created: ns since the epoch, an RFC 3339 text, or a datetime
        return _new(cls, (bucket, key, value, revision, delta, created, operation))

    bucket = property(itemgetter(0), doc="The bucket's name.")
    key = property(itemgetter(1), doc="The key.")
    value = property(itemgetter(2), doc="The value (empty for a delete or purge marker).")
    revision = property(itemgetter(3), doc="The revision: the entry's stream sequence.")
    delta = property(itemgetter(4), doc="Newer revisions a watcher had yet to deliver.")
    operation = property(itemgetter(6), doc='"PUT", "DEL" or "PURGE".')

    @property
    def created(self) -> datetime | None:
        """When the server stored this revision (UTC)."""
        c = self[5]
        if isinstance(c, int):
            secs, ns = divmod(c, 1_000_000_000)
            return datetime.fromtimestamp(secs, UTC).replace(microsecond=ns // 1000)
        if isinstance(c, str):
            parsed: datetime = RawStreamMsg._parse_utc_iso(c)
            return parsed
        done: datetime | None = c
        return done

    def __repr__(self) -> str:
        return (
            f"KeyValueEntry(bucket={self[0]!r}, key={self[1]!r}, value={self[2]!r}, "
            f"revision={self[3]}, delta={self[4]}, operation={self[6]!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KeyValueEntry):
            return NotImplemented
        return (
            self[0] == other[0]
            and self[1] == other[1]
            and self[2] == other[2]
            and self[3] == other[3]
            and self[6] == other[6]
        )

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash((self[0], self[1], self[3]))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (KeyValueEntry, tuple(self))


_new = tuple.__new__


def operation_of(raw_headers: bytes | None) -> str:
    """The KV operation a message's raw header block names (a put when none)."""
    # find, not `in`: bytes `in` first tries its operand as an integer (a
    # TypeError made and cleared per call), which costs more than the search.
    if raw_headers is None or (
        raw_headers.find(_OPERATION_BYTES) < 0 and raw_headers.find(_MARKER_BYTES) < 0
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
