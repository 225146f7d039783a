"""Status messages: the status line of a raw header block, and its kind.

This pure module is the specification of its Cython twin. No dict is built:
the hot path asks "is this a status?" of every message with headers, and for an
ordinary user header block the answer costs one byte comparison. The JetStream
headers that come with a status (pending counts, pin id) and the headers of a
direct get are read by :mod:`jsclient.protocol.jsheaders`.

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

_PREFIX = b"NATS/1.0"
_BLANK = b" \t"

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
