"""Status messages and JetStream headers, read straight from the raw header block.

This pure module is the specification of its Cython twin. No dict is built:
the hot path asks "is this a status?" of every message with headers, and for an
ordinary user header block the answer costs one byte comparison.

``status_of(header)``
    ``None`` for ``None``. A block that does not start with ``NATS/1.0`` raises
    :class:`jsclient.errors.BadHeaderError`. The first line runs to the first
    CRLF (or the end of the block). It is a status line when, after
    ``NATS/1.0``, it has one or more spaces/tabs, then exactly three ASCII
    digits, then the end of the line or a space/tab. The result is then
    ``(code, description)``: the rest of the line stripped of ASCII whitespace
    (space, tab, LF, CR, VT, FF) and decoded as UTF-8 with ``replace``.
    Anything else (``NATS/1.0`` alone, ``NATS/1.0 abc``, ``NATS/1.0 4040``) is
    not a status: ``None``.

``classify(code, description)``
    Maps a status to one of the kinds below. Descriptions are compared ASCII
    case-insensitively and as given (not stripped again):

    ===============  ========================================================
    HEARTBEAT        100 ``Idle Heartbeat``
    FLOW_CONTROL     100 ``FlowControl Request``
    NO_MESSAGES      404 (any description)
    REQUEST_TIMEOUT  408 (any: ``Request Timeout``, ``Interest Expired``...)
    PULL_ENDED       409 ``Message Size Exceeds MaxBytes``, 409 ``Batch Completed``
    WARNING          409 starting with ``Exceeded MaxRequestBatch``,
                     ``Exceeded MaxRequestExpires``, ``Exceeded MaxRequestMaxBytes``
                     or ``Exceeded MaxWaiting`` (they end with a number)
    RESET            409 ``Leadership Change``; 423 (any, e.g. ``Nats-Wrong-Pin-Id``)
    TERMINAL         400 (any); 409 ``Consumer Deleted``; 409 ``Consumer is push based``
    NO_RESPONDERS    503 (any)
    UNKNOWN          anything else (another 100, an unknown 409, other codes)
    ===============  ========================================================

    ``USER`` (0) is the kind the pull engine gives a message with no status.

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

from jsclient.errors import BadHeaderError

USER = 0
HEARTBEAT = 1
FLOW_CONTROL = 2
NO_MESSAGES = 3
REQUEST_TIMEOUT = 4
PULL_ENDED = 5
WARNING = 6
RESET = 7
TERMINAL = 8
NO_RESPONDERS = 9
UNKNOWN = 10

#: Kind -> name, for logs and error messages.
KIND_NAMES = (
    "USER",
    "HEARTBEAT",
    "FLOW_CONTROL",
    "NO_MESSAGES",
    "REQUEST_TIMEOUT",
    "PULL_ENDED",
    "WARNING",
    "RESET",
    "TERMINAL",
    "NO_RESPONDERS",
    "UNKNOWN",
)

PENDING_MESSAGES_HDR = "Nats-Pending-Messages"
PENDING_BYTES_HDR = "Nats-Pending-Bytes"
LAST_CONSUMER_HDR = "Nats-Last-Consumer"
LAST_STREAM_HDR = "Nats-Last-Stream"
CONSUMER_STALLED_HDR = "Nats-Consumer-Stalled"
PIN_ID_HDR = "Nats-Pin-Id"

_MAX_UINT64 = 18446744073709551615
_PREFIX = b"NATS/1.0"
_BLANK = b" \t"

_JS_NAMES = {
    b"nats-pending-messages": 0,
    b"nats-pending-bytes": 1,
    b"nats-last-consumer": 2,
    b"nats-last-stream": 3,
    b"nats-consumer-stalled": 4,
    b"nats-pin-id": 5,
}

_409_EXACT = {
    b"message size exceeds maxbytes": PULL_ENDED,
    b"batch completed": PULL_ENDED,
    b"leadership change": RESET,
    b"consumer deleted": TERMINAL,
    b"consumer is push based": TERMINAL,
}
_409_WARNING_PREFIXES = (
    b"exceeded maxrequestbatch",
    b"exceeded maxrequestexpires",
    b"exceeded maxrequestmaxbytes",
    b"exceeded maxwaiting",
)


def status_of(header: bytes | None) -> tuple[int, str] | None:
    """``(code, description)`` if the block's first line is a status line, else ``None``."""
    if header is None:
        return None
    if not header.startswith(_PREFIX):
        raise BadHeaderError(f"nats: header block does not start with NATS/1.0: {header[:40]!r}")
    # Ordinary user headers: "NATS/1.0\r\n..." -- decided by one byte.
    if len(header) < 12 or header[8] not in _BLANK:
        return None
    end = header.find(b"\r\n", 8)
    line = header[8:] if end < 0 else header[8:end]
    i = 1
    n = len(line)
    while i < n and line[i] in _BLANK:
        i += 1
    code = line[i : i + 3]
    if len(code) != 3 or not (code.isdigit()) or (i + 3 < n and line[i + 3] not in _BLANK):
        return None
    # bytes.isdigit() is ASCII-only, so int() sees three ASCII digits.
    return int(code), line[i + 3 :].strip().decode("utf-8", "replace")


def _ascii_lower(text: str) -> bytes:
    # bytes.lower() folds A-Z only; str.lower() would also fold e.g. KELVIN SIGN to "k".
    return text.encode("utf-8", "surrogatepass").lower()


def classify(code: int, description: str) -> int:
    """The kind of a status (see the module docstring for the table)."""
    if code == 100:
        d = _ascii_lower(description)
        if d == b"idle heartbeat":
            return HEARTBEAT
        if d == b"flowcontrol request":
            return FLOW_CONTROL
        return UNKNOWN
    if code == 404:
        return NO_MESSAGES
    if code == 408:
        return REQUEST_TIMEOUT
    if code == 409:
        d = _ascii_lower(description)
        kind = _409_EXACT.get(d)
        if kind is not None:
            return kind
        if d.startswith(_409_WARNING_PREFIXES):
            return WARNING
        return UNKNOWN
    if code == 400:
        return TERMINAL
    if code == 423:
        return RESET
    if code == 503:
        return NO_RESPONDERS
    return UNKNOWN


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
