"""JetStream and direct-get headers, read straight from the raw header block.

This pure module is the specification of its Cython twin. Like
:mod:`jsclient.protocol.status` (which tells a status from a message), it
builds no dict: it scans the header lines for the few names it wants.

``header_value(header, name)`` and ``js_headers(header)``
    Header lines are the CRLF-separated lines after the first one. A line
    without ``:`` is skipped. The name (before the first ``:``) and the value
    (after it) are stripped of ASCII whitespace; names compare ASCII
    case-insensitively; the first matching line wins. Values are decoded as
    UTF-8 with ``surrogateescape`` (as :mod:`jsclient.protocol.headers` does).
    ``js_headers`` returns ``(pending_messages, pending_bytes, last_consumer,
    last_stream, consumer_stalled, pin_id)`` from ``Nats-Pending-Messages``,
    ``Nats-Pending-Bytes``, ``Nats-Last-Consumer``, ``Nats-Last-Stream``,
    ``Nats-Consumer-Stalled`` and ``Nats-Pin-Id``. A numeric value is -1 when
    absent, when it is not one or more ASCII digits, or when it is above
    18446744073709551615 (uint64); the string values are ``None`` when absent.

``direct_headers(header)``
    The headers a batched direct get (ADR-31) adds to a stored message, by the
    same line rules: ``(subject, sequence, time_ns, num_pending, last_sequence,
    others)`` from ``Nats-Subject``, ``Nats-Sequence``, ``Nats-Time-Stamp``,
    ``Nats-Num-Pending`` and ``Nats-Last-Sequence``. Numbers as in
    ``js_headers``; ``subject`` is ``None`` when absent. ``time_ns`` is the
    stamp in nanoseconds since the epoch, ``None`` when absent or not exactly
    ``YYYY-MM-DDTHH:MM:SS[.F]Z`` (what nats-server writes: UTC, ``F`` one to
    nine ASCII digits, a real calendar date from year 1 to 9999, hour 0-23,
    minute and second 0-59). ``others`` counts the lines with a ``:`` that are
    none of those five nor ``Nats-Stream``: the publisher's own headers.
"""

from __future__ import annotations

PENDING_MESSAGES_HDR = "Nats-Pending-Messages"
PENDING_BYTES_HDR = "Nats-Pending-Bytes"
LAST_CONSUMER_HDR = "Nats-Last-Consumer"
LAST_STREAM_HDR = "Nats-Last-Stream"
CONSUMER_STALLED_HDR = "Nats-Consumer-Stalled"
PIN_ID_HDR = "Nats-Pin-Id"

_MAX_UINT64 = 18446744073709551615
_JS_NAMES = {
    b"nats-pending-messages": 0,
    b"nats-pending-bytes": 1,
    b"nats-last-consumer": 2,
    b"nats-last-stream": 3,
    b"nats-consumer-stalled": 4,
    b"nats-pin-id": 5,
}


def _u64_or_minus_one(raw: bytes) -> int:
    # bytes.isdigit() is ASCII-only and False for b"".
    if not raw.isdigit():
        return -1
    sig = raw.lstrip(b"0")
    if len(sig) > 20 or (len(sig) == 20 and int(sig) > _MAX_UINT64):
        return -1
    return int(sig) if sig else 0


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def header_value(header: bytes, name: str) -> str | None:
    """The first value of header ``name`` (ASCII case-insensitive), or ``None``."""
    want = name.encode("utf-8", "surrogateescape").lower()
    lines = header.split(b"\r\n")
    for k in range(1, len(lines)):
        key, sep, value = lines[k].partition(b":")
        if sep and key.strip().lower() == want:
            return _text(value.strip())
    return None


def js_headers(header: bytes) -> tuple[int, int, int, int, str | None, str | None]:
    """``(pending_messages, pending_bytes, last_consumer, last_stream, consumer_stalled,
    pin_id)``; -1 / ``None`` for what is absent (or, for numbers, not a uint64)."""
    found: list[bytes | None] = [None, None, None, None, None, None]
    lines = header.split(b"\r\n")
    for k in range(1, len(lines)):
        key, sep, value = lines[k].partition(b":")
        if not sep:
            continue
        slot = _JS_NAMES.get(key.strip().lower())
        if slot is not None and found[slot] is None:
            found[slot] = value.strip()
    pm, pb, lc, ls, stalled, pin = found
    return (
        -1 if pm is None else _u64_or_minus_one(pm),
        -1 if pb is None else _u64_or_minus_one(pb),
        -1 if lc is None else _u64_or_minus_one(lc),
        -1 if ls is None else _u64_or_minus_one(ls),
        None if stalled is None else _text(stalled),
        None if pin is None else _text(pin),
    )


_DIRECT_NAMES = {
    b"nats-subject": 0,
    b"nats-sequence": 1,
    b"nats-time-stamp": 2,
    b"nats-num-pending": 3,
    b"nats-last-sequence": 4,
    b"nats-stream": 5,
}
_DAYS_BEFORE_MONTH = (0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)


def _leap(y: int) -> bool:
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


def _digits(raw: bytes, a: int, b: int) -> int:
    """The ASCII digits ``raw[a:b]`` as an int, -1 if any is not one."""
    part = raw[a:b]
    return int(part) if part.isdigit() else -1


def stamp_ns(raw: bytes) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS[.F]Z`` as nanoseconds since the epoch (see the module docstring)."""
    n = len(raw)
    if n < 20 or raw[n - 1] != 0x5A:  # "Z"
        return None
    if raw[4] != 0x2D or raw[7] != 0x2D or raw[10] != 0x54 or raw[13] != 0x3A or raw[16] != 0x3A:
        return None  # "-", "-", "T", ":", ":"
    y, mo, d = _digits(raw, 0, 4), _digits(raw, 5, 7), _digits(raw, 8, 10)
    h, mi, s = _digits(raw, 11, 13), _digits(raw, 14, 16), _digits(raw, 17, 19)
    if y < 1 or not 1 <= mo <= 12 or d < 1 or h < 0 or h > 23 or mi < 0 or mi > 59:
        return None
    if s < 0 or s > 59:
        return None
    dim = 29 if mo == 2 and _leap(y) else (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[mo - 1]
    if d > dim:
        return None
    frac = 0
    if n > 20:
        if raw[19] != 0x2E or n - 21 > 9 or n - 21 < 1:  # "." and 1-9 digits
            return None
        frac = _digits(raw, 20, n - 1)
        if frac < 0:
            return None
        frac *= 10 ** (9 - (n - 21))
    elif n != 20:
        return None
    yy = y - 1
    days = yy * 365 + yy // 4 - yy // 100 + yy // 400 - 719162  # days from 1970-01-01
    days += _DAYS_BEFORE_MONTH[mo] + (1 if mo > 2 and _leap(y) else 0) + d - 1
    return ((days * 24 + h) * 60 + mi) * 60 * 1_000_000_000 + s * 1_000_000_000 + frac


def direct_headers(header: bytes) -> tuple[str | None, int, int | None, int, int, int]:
    """``(subject, sequence, time_ns, num_pending, last_sequence, others)`` of a
    direct-get answer (see the module docstring)."""
    found: list[bytes | None] = [None, None, None, None, None, None]
    others = 0
    lines = header.split(b"\r\n")
    for k in range(1, len(lines)):
        key, sep, value = lines[k].partition(b":")
        if not sep:
            continue
        slot = _DIRECT_NAMES.get(key.strip().lower())
        if slot is None:
            others += 1
        elif found[slot] is None:
            found[slot] = value.strip()
    subj, seq, stamp, pending, last, _stream = found
    return (
        None if subj is None else _text(subj),
        -1 if seq is None else _u64_or_minus_one(seq),
        None if stamp is None else stamp_ns(stamp),
        -1 if pending is None else _u64_or_minus_one(pending),
        -1 if last is None else _u64_or_minus_one(last),
        others,
    )
