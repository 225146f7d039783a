"""JetStream publish errors raised by the client (the server's are API errors)."""

from __future__ import annotations

from typing import Any

import nats.js.errors as _jse

from jsclient.errors._base import JetStreamError
from jsclient.errors.connection import TimeoutError


class NoStreamResponseError(JetStreamError, _jse.NoStreamResponseError):
    """A publish found no stream listening on its subject (503 no responders)."""

    default_message = "nats: no response from stream"


class TooManyStalledMsgsError(JetStreamError, _jse.TooManyStalledMsgsError):
    """``publish_async`` waited too long for room under the max-pending limit."""

    default_message = "nats: stalled with too many outstanding async published messages"


class PublishDisconnectedError(JetStreamError):
    """The socket an async publish was written to was lost before its ack came:
    the stream may or may not have stored it (retry with the same msg id)."""

    default_message = "nats: disconnected while waiting for the publish ack"


class PublishAckTimeoutError(TimeoutError):
    """An async publish got no ack within its ack timeout.

    ``sent`` tells the two outcomes apart: False, the publish was never written
    (it waited in the reconnect buffer or the write queue) and was withdrawn in
    the same step that failed it, so it is not stored and never will be; True,
    it was written, and whether the stream stored it is unknown (retry with the
    same msg id).
    """

    default_message = "nats: timeout waiting for the publish ack"

    def __init__(self, message: str | None = None, *args: Any, sent: bool = True) -> None:
        super().__init__(message, *args)
        self.sent = sent
