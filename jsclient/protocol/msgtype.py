"""The storage of a message: the fields the reader thread fills for every inbound message.

``jsclient.msg.Msg`` adds behaviour (headers, metadata, acks) on top of this
base. The Cython twin makes constructing one a single C call, which matters
because one is built per inbound message.

Fields: ``_client``, ``subject`` (str), ``reply`` (str, "" when absent),
``data`` (bytes), ``_hdr`` (raw header block or None), ``_size`` (ADR-37 size
or -1 when not known yet), ``sid`` (int), and the lazily filled ``_headers``
(None until decoded), ``_meta`` (None until parsed), ``_ackd`` (0 not acked,
1 terminal ack sent, 2 ack policy none).
"""

from __future__ import annotations

from typing import Any


class MsgBase:
    """Plain message storage; see the module docstring."""

    __slots__ = (
        "_ackd",
        "_client",
        "_hdr",
        "_headers",
        "_meta",
        "_size",
        "data",
        "reply",
        "sid",
        "subject",
    )

    def __init__(
        self,
        client: Any,
        subject: str,
        reply: str,
        data: bytes,
        hdr: bytes | None = None,
        size: int = -1,
        sid: int = 0,
    ) -> None:
        self._client = client
        self.subject = subject
        self.reply = reply
        self.data = data
        self._hdr = hdr
        self._size = size
        self.sid = sid
        self._headers: dict[str, str] | None = None
        self._meta: Any = None
        self._ackd = 0
