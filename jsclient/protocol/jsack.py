"""JetStream ack subjects (ADR-15 "JSAck"). This pure module is the specification.

``parse_jsack(reply)`` reads the delivery metadata the server encodes in the
reply subject of every JetStream message and returns the tuple
``(stream, consumer, num_delivered, stream_seq, consumer_seq, timestamp_ns,
num_pending, domain)``.

Rules (the Cython twin follows them to the character):

- The subject is split on ``.`` (every dot; empty tokens are kept and counted).
- Token 0 must be ``$JS`` and token 1 ``ACK`` (case-sensitive).
- v1: exactly 9 tokens,
  ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``;
  ``domain`` is ``None``.
- v2: 11 or more tokens,
  ``$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``
  and any further tokens are ignored (the server may append more). A domain
  token of ``_`` (the server's "no domain") or an empty one gives ``None``.
  The account hash is not checked.
- 10 tokens, fewer than 9, or a wrong prefix is invalid.
- ``stream`` and ``consumer`` must be non-empty.
- The five numbers are ASCII digits ``0``-``9`` only: no sign, blank,
  underscore, non-ASCII digit or empty token (``int()`` accepts all of those,
  so it is never used on an unchecked token). Leading zeros are allowed. A value
  above 18446744073709551615 (uint64) is rejected as an overflow.
- Anything invalid raises :class:`jsclient.errors.InvalidJSAckError`, whose
  message names the problem.
- ``parse_jsack(reply, stream, consumer)``: a reader that knows which stream
  and consumer to expect passes their names; a token equal to one is returned
  as that very object (no new string per message). The result compares equal
  either way.

``pub_ack_fields(data)`` is the fast path for a JetStream publish
acknowledgement (the server's reply to a publish, read once per published
message on the socket reader thread). It returns ``(stream, seq)`` for the
usual ack and ``None`` for anything else; the caller then decodes the reply as
JSON in full (``duplicate``, ``domain``, errors, escapes...).

Rules (the Cython twin follows them byte for byte):

- ``data`` must be exactly ``{"stream":"<name>","seq":<digits>}``: these bytes
  in this order, no whitespace anywhere, nothing before or after, no other
  field.
- ``<name>`` is 1 or more bytes, none of them ``"`` (0x22), ``\\`` (0x5C) or
  below 0x20 (a JSON control character), and it must decode as strict UTF-8
  (no overlong forms, no surrogates, nothing above U+10FFFF); ``stream`` is
  that decoding. So the name ends at the first ``"``; a name with an escape
  is left to the JSON decoder.
- ``<digits>`` is 1 to 20 ASCII digits ``0``-``9`` with no leading zero
  (``0`` alone is fine) and a value of at most 18446744073709551615 (uint64);
  ``seq`` is that value as an ``int``. No sign, fraction or exponent.
- Anything else gives ``None``; it never raises.
- Input types: ``bytes`` is read as is. A ``bytearray``, a ``memoryview`` or
  a ``bytes`` subclass is read as ``bytes(data)`` (the bytes it holds); a
  released memoryview gives ``None``. Any other type (``str``, ``None``,
  ``int``...) gives ``None``.
"""

from __future__ import annotations

import re as _re

from jsclient.errors import InvalidJSAckError

#: Largest value a numeric token may hold (the server's uint64).
MAX_UINT64 = 18446744073709551615
_MAX_UINT64_DIGITS = 20

JSAck = tuple[str, str, int, int, int, int, int, str | None]


def _u64(tok: str, what: str, reply: str) -> int:
    # "" is not isdigit(); isascii() rules out the non-ASCII digits isdigit() accepts.
    if tok.isdigit() and tok.isascii():
        if len(tok) < _MAX_UINT64_DIGITS:  # 19 digits always fit
            return int(tok)
        sig = tok.lstrip("0")
        if len(sig) < _MAX_UINT64_DIGITS or (
            len(sig) == _MAX_UINT64_DIGITS and int(sig) <= MAX_UINT64
        ):
            return int(sig) if sig else 0
        raise InvalidJSAckError(
            f"nats: {what} {tok[:32]!r} overflows uint64 in ack subject {reply[:120]!r}"
        )
    raise InvalidJSAckError(f"nats: invalid {what} {tok[:32]!r} in ack subject {reply[:120]!r}")


def parse_jsack(
    reply: str, stream_hint: str | None = None, consumer_hint: str | None = None
) -> JSAck:
    """Parse a ``$JS.ACK`` reply subject (v1 or v2) into its delivery metadata.

    ``stream_hint``/``consumer_hint``: the names expected, returned in place of
    equal tokens."""
    toks = reply.split(".")
    n = len(toks)
    if n < 2 or toks[0] != "$JS" or toks[1] != "ACK":
        raise InvalidJSAckError(f"nats: ack subject does not start with $JS.ACK: {reply[:120]!r}")
    if n == 9:
        base = 2
        domain: str | None = None
    elif n >= 11:
        base = 4
        domain = toks[2]
        if domain in ("_", ""):
            domain = None
    else:
        raise InvalidJSAckError(
            f"nats: ack subject has {n} tokens (expected 9 or at least 11): {reply[:120]!r}"
        )
    stream = toks[base]
    consumer = toks[base + 1]
    if not stream:
        raise InvalidJSAckError(f"nats: empty stream name in ack subject {reply[:120]!r}")
    if not consumer:
        raise InvalidJSAckError(f"nats: empty consumer name in ack subject {reply[:120]!r}")
    if stream == stream_hint:
        stream = stream_hint
    if consumer == consumer_hint:
        consumer = consumer_hint
    return (
        stream,
        consumer,
        _u64(toks[base + 2], "num delivered", reply),
        _u64(toks[base + 3], "stream sequence", reply),
        _u64(toks[base + 4], "consumer sequence", reply),
        _u64(toks[base + 5], "timestamp", reply),
        _u64(toks[base + 6], "num pending", reply),
        domain,
    )


# The whole publish-ack rule as one pattern (bytes mode: [0-9] is ASCII only);
# the value bound and the UTF-8 check are made on the match.
_PUB_ACK = _re.compile(rb'\{"stream":"([^"\\\x00-\x1f]+)","seq":(0|[1-9][0-9]{0,19})\}')


def pub_ack_fields(data: object) -> tuple[str, int] | None:
    """``(stream, seq)`` of a plain ``{"stream":"<name>","seq":<n>}`` publish ack, else ``None``."""
    if type(data) is not bytes:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            return None
        try:
            data = bytes(data)
        except ValueError:  # a released memoryview
            return None
    m = _PUB_ACK.fullmatch(data)
    if m is None:
        return None
    name, digits = m.groups()
    seq = int(digits)  # 1 to 20 ASCII digits: checked by the pattern
    if seq > MAX_UINT64:
        return None
    try:
        stream = name.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return (stream, seq)
