"""Errors in a call's subject, header, payload, subscription or message (core NATS)."""

from __future__ import annotations

import nats.errors as _ne

from jsclient.errors._base import Error, JetStreamError


class NoRespondersError(Error, _ne.NoRespondersError):
    """A request found no subscriber (503 status)."""

    default_message = "nats: no responders available for request"


class BadSubjectError(Error, _ne.BadSubjectError):
    """A subject is empty or contains whitespace."""

    default_message = "nats: invalid subject"


class BadHeaderError(Error, _ne.BadHeaderError):
    """A header name or value cannot be encoded, or a header block is malformed."""

    default_message = "nats: invalid header"


class BadSubscriptionError(Error, _ne.BadSubscriptionError):
    """The subscription is not (or no longer) valid for this call."""

    default_message = "nats: invalid subscription"


class BadTimeoutError(Error, _ne.BadTimeoutError):
    """A timeout argument is invalid."""

    default_message = "nats: timeout invalid"


class MaxPayloadError(Error, _ne.MaxPayloadError):
    """A payload (with headers) exceeds the server's ``max_payload``."""

    default_message = "nats: maximum payload exceeded"


class NotJSMessageError(Error, _ne.NotJSMessageError):
    """A JetStream-only call on a message that did not come from a stream."""

    default_message = "nats: not a JetStream message"


class MsgAlreadyAckdError(Error, _ne.MsgAlreadyAckdError):
    """A terminal acknowledgement was already sent for this message."""

    default_message = "nats: message was already acknowledged"

    def __init__(self, message: str | None = None) -> None:
        Error.__init__(self, message)


class InvalidJSAckError(JetStreamError, NotJSMessageError):
    """A reply subject is not a valid ``$JS.ACK`` subject (v1: 9 tokens, v2: 11+)."""

    default_message = "nats: invalid JetStream ack subject"
