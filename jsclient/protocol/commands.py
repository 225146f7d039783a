"""Encoders for the commands a client sends: CONNECT, PUB, HPUB, SUB, UNSUB, PING, PONG.

Subjects are validated by the caller (see :func:`check_subject`); the encoders
only format. All return ``bytes`` ready to append to the write buffer.
"""

from __future__ import annotations

import json
from typing import Any

from jsclient.errors import BadSubjectError

PING = b"PING\r\n"
PONG = b"PONG\r\n"
CRLF = b"\r\n"

_BAD_SUBJECT_CHARS = frozenset(" \t\r\n\x0b\x0c")


def check_subject(subject: str, what: str = "subject") -> None:
    """Raise BadSubjectError for an empty subject or one containing whitespace,
    TypeError (naming ``what``) for one that is not a ``str``."""
    if type(subject) is not str:
        if isinstance(subject, str):
            return check_subject(str(subject), what)  # a str subclass: checked as its value
        raise TypeError(
            f"nats: {what} must be a str, not {type(subject).__name__} ({subject!r:.60})"
        )
    if not subject or not _BAD_SUBJECT_CHARS.isdisjoint(subject):
        raise BadSubjectError(f"nats: invalid {what} {subject!r}")


def check_payload(payload: object) -> None:
    """Raise TypeError for a payload that is not bytes-like (a ``str`` among them:
    encode it first)."""
    if not isinstance(payload, bytes | bytearray | memoryview):
        hint = " (encode it: payload.encode())" if isinstance(payload, str) else ""
        raise TypeError(
            "nats: the payload must be bytes-like (bytes, bytearray, memoryview), "
            f"not {type(payload).__name__}{hint}"
        )


def connect(options: dict[str, Any]) -> bytes:
    """``CONNECT {json}``."""
    return b"CONNECT " + json.dumps(options, separators=(",", ":")).encode() + CRLF


def pub(subject: bytes, reply: bytes, payload: bytes) -> bytes:
    """``PUB <subject> [reply] <#bytes>`` plus payload."""
    if reply:
        return b"PUB %s %s %d\r\n%s\r\n" % (subject, reply, len(payload), payload)
    return b"PUB %s %d\r\n%s\r\n" % (subject, len(payload), payload)


def hpub(subject: bytes, reply: bytes, header: bytes, payload: bytes) -> bytes:
    """``HPUB <subject> [reply] <#header bytes> <#total bytes>`` plus header block and payload."""
    hl = len(header)
    if reply:
        return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (
            subject,
            reply,
            hl,
            hl + len(payload),
            header,
            payload,
        )
    return b"HPUB %s %d %d\r\n%s%s\r\n" % (subject, hl, hl + len(payload), header, payload)


def sub(subject: str, queue: str | None, sid: int) -> bytes:
    """``SUB <subject> [queue] <sid>``."""
    if queue:
        return f"SUB {subject} {queue} {sid}\r\n".encode()
    return f"SUB {subject} {sid}\r\n".encode()


def unsub(sid: int, max_msgs: int = 0) -> bytes:
    """``UNSUB <sid> [max_msgs]``."""
    if max_msgs > 0:
        return b"UNSUB %d %d\r\n" % (sid, max_msgs)
    return b"UNSUB %d\r\n" % sid


def frame_start(buf: bytes | memoryview, offset: int) -> int:
    """Where the command containing byte ``offset`` of ``buf`` starts.

    ``buf`` holds whole commands as this module encodes them, back to back,
    starting at a command boundary. A write cut short after ``offset`` bytes
    leaves the command that starts at the returned index half sent: after a
    reconnect, sending resumes from there, so the new server sees whole
    commands only. Returns ``offset`` itself when it falls on a boundary, and
    ``len(buf)`` when it lies beyond the last command.
    """
    data = bytes(buf) if isinstance(buf, memoryview) else buf
    end = len(data)
    pos = 0
    while pos < end and pos < offset:
        eol = data.find(CRLF, pos)
        if eol < 0:
            raise ValueError(f"frame_start: no command line at {pos}")
        nxt = eol + 2
        words = data[pos:eol].split()
        op = words[0].upper() if words else b""
        if op in (b"PUB", b"HPUB"):
            nxt += int(words[-1]) + 2
        if nxt > offset:
            return pos
        pos = nxt
    return min(pos, end)
