"""Messages: core fields, lazy headers, ADR-37 size, JetStream metadata and acks.

A ``Msg`` is built on the reader thread for every inbound message, so it is a
plain ``__slots__`` object whose expensive parts (header dict, metadata) are
computed only when read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from jsclient import _impl, errors
from jsclient.protocol import headers as _headers

if TYPE_CHECKING:
    from jsclient._core import Core

_ACK = b"+ACK"
_NAK = b"-NAK"
_WPI = b"+WPI"
_TERM = b"+TERM"

#: Values of ``Msg._ackd``.
ACK_NOT_YET = 0
ACK_DONE = 1
ACK_NONE_POLICY = 2


@dataclass(frozen=True, slots=True)
class SequencePair:
    """Stream and consumer sequence of a delivered JetStream message."""

    stream: int
    consumer: int


@dataclass(frozen=True, slots=True)
class MsgMetadata:
    """Delivery information parsed from a ``$JS.ACK`` reply subject (v1 or v2)."""

    sequence: SequencePair
    num_delivered: int
    num_pending: int
    timestamp_ns: int
    stream: str
    consumer: str
    domain: str | None

    @property
    def timestamp(self) -> datetime:
        """Server timestamp of the message, UTC."""
        secs, ns = divmod(self.timestamp_ns, 1_000_000_000)
        return datetime.fromtimestamp(secs, UTC).replace(microsecond=ns // 1000)


if TYPE_CHECKING:
    from jsclient.protocol.delivery import MsgBase
else:
    MsgBase = _impl.delivery.MsgBase


class Msg(MsgBase):
    """A message received from (or to be published to) NATS.

    Fields (``subject``, ``reply``, ``data``, ...) live in ``MsgBase``, whose
    Cython twin makes building one per inbound message a single C call.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<Msg subject={self.subject!r} reply={self.reply!r} data={self.data[:32]!r}...>"

    # -- headers -----------------------------------------------------------

    @property
    def headers(self) -> dict[str, str] | None:
        """Header names to their first value; ``Status``/``Description`` for status lines."""
        if self._headers is None and self._hdr is not None:
            self._headers = _headers.to_dict(self._hdr)
        return self._headers

    @headers.setter
    def headers(self, value: dict[str, str] | None) -> None:
        hdr = _headers.encode(value) if value is not None else None  # checked first
        self._headers = value
        self._hdr = hdr
        self._size = -1

    @property
    def header(self) -> dict[str, str] | None:
        """nats-py's name for :attr:`headers`."""
        return self.headers

    def header_values(self, name: str) -> list[str]:
        """Every value of a (possibly multi-valued) header, in wire order."""
        if self._hdr is None:
            return []
        return _headers.decode(self._hdr)[2].get(name, [])

    @property
    def raw_headers(self) -> bytes | None:
        """The header block exactly as it came off the wire."""
        return self._hdr

    @property
    def status(self) -> tuple[int, str] | None:
        """(code, description) when this is a status message, else None."""
        if self._hdr is None:
            return None
        result: tuple[int, str] | None = _impl.status.status_of(self._hdr)
        return result

    @property
    def size(self) -> int:
        """ADR-37 size: subject + reply + raw header block + payload, in bytes."""
        if self._size < 0:
            self._size = _impl.sizes.msg_size(self.subject, self.reply, self._hdr, self.data)
        return self._size

    # -- JetStream ---------------------------------------------------------

    @property
    def metadata(self) -> MsgMetadata:
        """Delivery metadata from the ``$JS.ACK`` reply; raises NotJSMessageError otherwise."""
        meta: MsgMetadata | None = self._meta
        if meta is not None:
            return meta
        if not self.reply:
            raise errors.NotJSMessageError()
        stream, consumer, delivered, sseq, cseq, ts, pending, domain = _impl.jsack.parse_jsack(
            self.reply
        )
        meta = MsgMetadata(
            SequencePair(sseq, cseq), delivered, pending, ts, stream, consumer, domain
        )
        self._meta = meta
        return meta

    def respond(self, payload: bytes = b"", headers: dict[str, str] | None = None) -> None:
        """Publish a reply to this message's reply subject.

        Written from this thread when no other thread is writing, as a request
        is: the requester waits for it, and waking the flusher thread for one
        frame would add a thread hop to every round trip. Bounded as
        ``publish`` is (``pending_size`` / the reconnect buffer)."""
        if not self.reply:
            raise errors.Error("nats: message has no reply subject")
        self._require_client()._out.respond(self.reply, payload, headers)

    def ack(self) -> None:
        """Acknowledge (terminal). Ignored after another terminal ack or with ack policy none."""
        # Replaced by MsgBase.ack below the class (this body is what it does).
        MsgBase.ack(self)

    def nak(self, delay: float | None = None) -> None:
        """Negative ack (terminal): redeliver, after ``delay`` seconds if given."""
        if delay is not None and delay > 0:
            body = _NAK + b" " + json.dumps({"delay": int(delay * 1e9)}).encode()
        else:
            body = _NAK
        self._send_ack(body)

    def in_progress(self) -> None:
        """Tell the server work is ongoing (resets the ack wait); may be repeated."""
        if self._ack_state() != ACK_NOT_YET:
            return
        self._check_js()
        self._require_client()._publish_ack(self.reply, _WPI)

    def term(self, reason: str | None = None) -> None:
        """Terminate (terminal): the server will not redeliver this message."""
        self._send_ack(_TERM + b" " + reason.encode() if reason else _TERM)

    def ack_sync(self, timeout: float = 5.0) -> None:
        """Acknowledge and wait until the server confirms it (double ack)."""
        state = self._ack_state()
        if state == ACK_NONE_POLICY:
            return
        if state == ACK_DONE:
            raise errors.MsgAlreadyAckdError(f"nats: message was already acknowledged: {self!r}")
        self._check_js()
        self._require_client().request(self.reply, _ACK, timeout=timeout)
        self._ackd = ACK_DONE

    @property
    def is_acked(self) -> bool:
        """True once a terminal ack (``ack``, ``ack_sync``, ``nak``, ``term``) was sent."""
        return self._ack_state() == ACK_DONE

    def _ack_state(self) -> int:
        state: int = self._ackd
        return state

    def _check_js(self) -> None:
        if not self.reply or not self.reply.startswith("$JS.ACK."):
            raise errors.NotJSMessageError()

    def _require_client(self) -> Core:
        """The message's client: for an inbound message, a weak proxy of it (see
        :mod:`jsclient.connection`); ConnectionClosedError once it is gone."""
        client: Core | None = self._client
        if client is None:
            raise errors.Error("nats: message is not bound to a connection")
        try:
            client.__class__  # noqa: B018 (a dead proxy raises here)
        except ReferenceError:
            raise errors.ConnectionClosedError() from None
        return client


# The ack is queued by MsgBase.ack itself (in C in the speedups build: no
# Python frame per ack). Bound here rather than in the class body so that the
# API reference, read from the source, documents the method above.
Msg.ack = MsgBase.ack  # type: ignore[method-assign]
