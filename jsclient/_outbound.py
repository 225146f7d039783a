"""Core publishes off the fast path: subject checks, the subject cache, PUB/HPUB frames.

``Client.publish`` without a reply or headers is one call into the write
queue (``pub_str``), which looks the subject up in the shared subject cache
and queues the frame. Everything else is here: a subject the cache does not
hold yet (checked, encoded, cached), a reply subject or headers (checked
every time, never cached: replies are often unique inboxes), and the
``max_payload`` rule with its error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jsclient import _impl, errors
from jsclient.protocol import commands
from jsclient.protocol import headers as _headers

if TYPE_CHECKING:
    from jsclient._io.writer import Writer
    from jsclient.connection import Connection

_TOO_BIG = _impl.writer.TOO_BIG
_UNKNOWN_SUBJECT = _impl.writer.UNKNOWN_SUBJECT
SUBJECT_CACHE_MAX = 4096


class Outbound:
    """The publish paths of one connection other than the write queue's fast path.

    ``subjects`` is the subject cache (subject -> its checked bytes), shared
    with the write queue's fast path; it is cleared when it reaches
    ``SUBJECT_CACHE_MAX`` entries.
    """

    def __init__(self, conn: Connection, w: Writer, subjects: dict[str, bytes]) -> None:
        self.conn = conn
        self.w = w
        self.wq = w.wq
        self.subjects = subjects

    def subject_bytes(self, subject: str) -> bytes:
        b = self.subjects.get(subject)
        if b is None:
            commands.check_subject(subject)
            b = subject.encode()
            if len(self.subjects) >= SUBJECT_CACHE_MAX:
                self.subjects.clear()
            self.subjects[subject] = b
        return b

    def too_big(self, size: int) -> errors.MaxPayloadError:
        return errors.MaxPayloadError(
            f"nats: payload of {size} bytes exceeds max_payload {self.conn.max_payload}"
        )

    def publish(
        self, subject: str, payload: bytes, reply: str | None, headers: _headers.HeadersIn | None
    ) -> None:
        """``Client.publish`` with a reply subject or headers."""
        subj = self.subjects.get(subject)
        if subj is None:
            subj = self.subject_bytes(subject)
        self.w.send(*self._frame(subj, payload, reply, headers))

    def respond(self, subject: str, payload: bytes, headers: _headers.HeadersIn | None) -> None:
        """A reply (``Msg.respond``): written from this thread when no other is
        writing, as a request is, since the requester waits for it. Reply
        subjects are unique (inboxes): checked, never cached."""
        commands.check_subject(subject, "reply subject")
        self.w.send_inline(*self._frame(subject.encode(), payload, None, headers))

    def _frame(
        self, subj: bytes, payload: bytes, reply: str | None, headers: _headers.HeadersIn | None
    ) -> tuple[bytes, int, int]:
        """The PUB/HPUB frame, its payload length, 1 (one message)."""
        if type(payload) is not bytes:
            commands.check_payload(payload)
            payload = bytes(payload)
        conn = self.conn
        plen = len(payload)
        if reply:
            # Replies are often unique (inboxes): checked, never cached.
            commands.check_subject(reply, "reply subject")
            rep = reply.encode()
        else:
            rep = b""
        if headers:
            hdr = _headers.encode(headers)
            if len(hdr) + plen > conn.max_payload:
                raise self.too_big(len(hdr) + plen)
            data = commands.hpub(subj, rep, hdr, payload)
        else:
            if plen > conn.max_payload:
                raise self.too_big(plen)
            data = commands.pub(subj, rep, payload)
        return data, plen, 1

    def declined(self, subject: str, payload: bytes, rc: int) -> None:
        """``Client.publish`` without reply or headers, when the fast path declined."""
        if type(payload) is not bytes:
            commands.check_payload(payload)
        conn = self.conn
        subj = self.subject_bytes(subject)
        if rc == _UNKNOWN_SUBJECT:
            rc = self.wq.pub(subj, payload, conn.max_payload)
            if self.w.queued(rc):
                return
        if rc == _TOO_BIG:
            raise self.too_big(len(payload))
        data = payload if type(payload) is bytes else memoryview(payload).tobytes()
        self.w.send(b"PUB %s %d\r\n%s\r\n" % (subj, len(data), data), len(data), 1)
