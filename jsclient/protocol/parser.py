"""Incremental NATS frame parser (sans-I/O). This pure module is the specification.

``Parser.feed(data)`` takes bytes exactly as they came off the socket, split at
any boundary, and returns the complete frames they finish, as tuples:

=================  ==========================================================
``(OP_MSG, sid, subject, reply, header, payload, size)``
                   MSG and HMSG. ``subject``/``reply`` are ``str`` (UTF-8,
                   ``surrogateescape``), ``reply`` is ``""`` when absent,
                   ``header`` is the raw header block (``bytes``) for HMSG and
                   ``None`` for MSG, ``payload`` is ``bytes``, ``size`` is the
                   ADR-37 size: subject + reply + header block + payload bytes.
``(OP_PING,)``     ``(OP_PONG,)``  ``(OP_OK,)``
``(OP_ERR, text)`` ``-ERR``; text stripped of blanks and surrounding quotes.
``(OP_INFO, json)`` ``INFO``; the JSON text, not decoded.
=================  ==========================================================

Rules (both twins follow them to the byte):

- A control line ends at the first CRLF. It is split on ASCII whitespace
  (space, tab, LF, CR, VT, FF) like ``bytes.split()``; the first token is the
  operation, matched case-insensitively.
- Numbers (sid, sizes) are ASCII digits only, at most 18 of them.
- A control line longer than ``max_control_line`` bytes (``INFO``: 1 MiB) is an
  error, whether or not its CRLF has arrived yet (a trailing CR is not counted
  while its LF may still come, and a line that so far reads as a prefix of
  ``INFO`` gets the ``INFO`` limit), so the verdict never depends on where
  a read ended.
- A payload larger than ``max_payload``, a header size above the total size,
  or a payload not followed by CRLF is an error.
- Any error raises :class:`jsclient.errors.ProtocolError`; its ``events``
  attribute holds the frames completed before the bad one, and the parser is
  reset (the connection is expected to reconnect).
"""

from __future__ import annotations

from typing import Any

from jsclient.errors import ProtocolError

OP_MSG = 0
OP_PING = 1
OP_PONG = 2
OP_OK = 3
OP_ERR = 4
OP_INFO = 5

#: Default control-line limit, as the server's own.
MAX_CONTROL_LINE = 4096
#: INFO lines carry cluster URLs and can be long.
MAX_INFO_LINE = 1024 * 1024
#: Default payload limit before the server's INFO says otherwise.
MAX_PAYLOAD = 64 * 1024 * 1024
_MAX_DIGITS = 18

_PING = (OP_PING,)
_PONG = (OP_PONG,)
_OK = (OP_OK,)


def _number(tok: bytes, what: str) -> int:
    if not tok.isdigit() or len(tok) > _MAX_DIGITS:
        raise ProtocolError(f"nats: protocol error: invalid {what} {tok[:32]!r}")
    return int(tok)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class Parser:
    """Turns a byte stream into NATS frames; keeps partial frames between feeds."""

    __slots__ = ("_chunks", "_have", "_need", "max_control_line", "max_payload")

    def __init__(
        self, max_control_line: int = MAX_CONTROL_LINE, max_payload: int = MAX_PAYLOAD
    ) -> None:
        self.max_control_line = max_control_line
        self.max_payload = max_payload
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = 0

    @property
    def buffered(self) -> int:
        """Bytes held back because they do not finish a frame yet."""
        return self._have

    def reset(self) -> None:
        """Forget any partial frame (after a reconnect or an error)."""
        self._chunks = []
        self._have = 0
        self._need = 0

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        """Parse ``data`` (appended to what is buffered) into complete frames."""
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._have < self._need:
                return []
            data = b"".join(self._chunks)
            self._chunks = []
            self._have = 0
            self._need = 0
        events: list[tuple[Any, ...]] = []
        try:
            pos = self._parse(data, events)
        except ProtocolError as exc:
            self.reset()
            exc.events = events  # type: ignore[attr-defined]
            raise
        if pos < len(data):
            rest = data[pos:]
            self._chunks = [rest]
            self._have = len(rest)
        return events

    def _parse(self, data: bytes, events: list[tuple[Any, ...]]) -> int:
        n = len(data)
        pos = 0
        while pos < n:
            end = data.find(b"\r\n", pos)
            if end < 0 or end - pos > self.max_control_line:
                limit = self.max_control_line
                head4 = data[pos : pos + 4].upper()
                # A read may end inside "INFO": judge it by the INFO limit until
                # the name is complete (the bytes split anywhere rule).
                if head4 == b"INFO"[: len(head4)] and (end < 0 or len(head4) == 4):
                    limit = MAX_INFO_LINE
                if end < 0:
                    # A trailing CR may be the first half of the line's CRLF.
                    have = n - pos - (1 if data[n - 1] == 13 else 0)
                    if have > limit:
                        raise ProtocolError("nats: protocol error: control line too long")
                    self._need = n - pos + 1
                    return pos
                if end - pos > limit:
                    raise ProtocolError("nats: protocol error: control line too long")
            head = data[pos:end].split(None, 1)
            if not head:
                raise ProtocolError("nats: protocol error: empty control line")
            op = head[0].upper()
            if op == b"MSG" or op == b"HMSG":
                args = head[1].split() if len(head) > 1 else []
                hmsg = op == b"HMSG"
                nargs = len(args) - (1 if hmsg else 0)
                if nargs == 3:
                    reply = b""
                elif nargs == 4:
                    reply = args[2]
                else:
                    raise ProtocolError(
                        f"nats: protocol error: malformed {op.decode()} line {data[pos:end][:80]!r}"
                    )
                sid = _number(args[1], "sid")
                total = _number(args[-1], "size")
                hdr = _number(args[-2], "header size") if hmsg else 0
                if hdr > total:
                    raise ProtocolError("nats: protocol error: header size exceeds total size")
                if total > self.max_payload:
                    raise ProtocolError(
                        f"nats: protocol error: payload of {total} bytes exceeds "
                        f"max_payload {self.max_payload}"
                    )
                start = end + 2
                stop = start + total
                if stop + 2 > n:
                    self._need = stop + 2 - pos
                    return pos
                if data[stop : stop + 2] != b"\r\n":
                    raise ProtocolError("nats: protocol error: payload not followed by CRLF")
                subject = args[0]
                events.append(
                    (
                        OP_MSG,
                        sid,
                        _text(subject),
                        _text(reply),
                        data[start : start + hdr] if hmsg else None,
                        data[start + hdr : stop],
                        len(subject) + len(reply) + total,
                    )
                )
                pos = stop + 2
                continue
            if op == b"PING":
                events.append(_PING)
            elif op == b"PONG":
                events.append(_PONG)
            elif op == b"+OK":
                events.append(_OK)
            elif op == b"-ERR":
                text = head[1].strip().strip(b"'") if len(head) > 1 else b""
                events.append((OP_ERR, text.decode("utf-8", "replace")))
            elif op == b"INFO":
                events.append(
                    (OP_INFO, (head[1] if len(head) > 1 else b"").decode("utf-8", "replace"))
                )
            else:
                raise ProtocolError(f"nats: protocol error: unknown operation {op[:16]!r}")
            pos = end + 2
        return pos
