"""JetStream publish errors raised by the client (the server's are API errors)."""

from __future__ import annotations

import nats.js.errors as _jse

from jsclient.errors._base import JetStreamError


class NoStreamResponseError(JetStreamError, _jse.NoStreamResponseError):
    """A publish found no stream listening on its subject (503 no responders)."""

    default_message = "nats: no response from stream"


class TooManyStalledMsgsError(JetStreamError, _jse.TooManyStalledMsgsError):
    """``publish_async`` waited too long for room under the max-pending limit."""

    default_message = "nats: stalled with too many outstanding async published messages"


class PublishDisconnectedError(JetStreamError):
    """The connection was lost while an async publish waited for its ack."""

    default_message = "nats: disconnected while waiting for the publish ack"
