"""The roots: :class:`Error` (every jsclient error) and :class:`JetStreamError`."""

from __future__ import annotations

from typing import Any

import nats.errors as _ne
import nats.js.errors as _jse


class Error(_ne.Error):
    """Base of every jsclient error; carries an optional human-readable message."""

    default_message = "nats: error"

    def __init__(self, message: str | None = None, *args: Any) -> None:
        # Not super(): some nats-py bases have __init__ signatures of their own
        # (SlowConsumerError(subject, reply, sid, sub)); ours take a message.
        Exception.__init__(self, *((message, *args) if message is not None else args))
        self.message = message

    def __str__(self) -> str:
        return self.message if self.message else self.default_message


class JetStreamError(Error, _jse.Error):
    """Base of JetStream errors raised by the client itself."""

    default_message = "nats: JetStream error"

    def __init__(self, message: str | None = None, *args: Any) -> None:
        Error.__init__(self, message, *args)
        self.description = message
