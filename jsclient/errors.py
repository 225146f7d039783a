"""Typed errors. Each subclasses the matching nats-py error.

So ``except nats.errors.TimeoutError`` and ``except jsclient.errors.TimeoutError``
both catch a jsclient timeout, and (since nats-py's timeout derives from
``asyncio.TimeoutError``) so does the builtin ``TimeoutError``.
"""

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


class TimeoutError(Error, _ne.TimeoutError):
    """A blocking call did not complete within its timeout."""

    default_message = "nats: timeout"


class FlushTimeoutError(TimeoutError, _ne.FlushTimeoutError):
    """``flush()`` did not see the server's PONG in time."""

    default_message = "nats: flush timeout"


class DrainTimeoutError(TimeoutError, _ne.DrainTimeoutError):
    """``drain()`` did not finish in time."""

    default_message = "nats: draining connection timed out"


class NoRespondersError(Error, _ne.NoRespondersError):
    """A request found no subscriber (503 status)."""

    default_message = "nats: no responders available for request"


class ConnectionClosedError(Error, _ne.ConnectionClosedError):
    """The connection is closed."""

    default_message = "nats: connection closed"


class StaleConnectionError(Error, _ne.StaleConnectionError):
    """Too many PINGs went unanswered."""

    default_message = "nats: stale connection"


class UnexpectedEOF(StaleConnectionError, _ne.UnexpectedEOF):
    """The server closed the socket."""

    default_message = "nats: unexpected EOF"


class OutboundBufferLimitError(Error, _ne.OutboundBufferLimitError):
    """The reconnect buffer is full."""

    default_message = "nats: outbound buffer limit exceeded"


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


class AuthorizationError(Error, _ne.AuthorizationError):
    """The server refused the credentials or a permission."""

    default_message = "nats: authorization failed"


class NoServersError(Error, _ne.NoServersError):
    """No server in the pool could be reached."""

    default_message = "nats: no servers available for connection"


class ProtocolError(Error, _ne.ProtocolError):
    """The server sent bytes that are not valid NATS protocol."""

    default_message = "nats: protocol error"


class SecureConnRequiredError(Error, _ne.SecureConnRequiredError):
    """The server requires TLS but none was configured and none could be made."""

    default_message = "nats: secure connection required"


class SecureConnFailedError(Error, _ne.SecureConnFailedError):
    """The TLS handshake failed."""

    default_message = "nats: secure connection failed"


class ConnectionDrainingError(Error, _ne.ConnectionDrainingError):
    """The connection is draining and accepts no new subscriptions."""

    default_message = "nats: connection draining"


class ConnectionReconnectingError(Error, _ne.ConnectionReconnectingError):
    """The call needs a live connection and the client is reconnecting."""

    default_message = "nats: connection reconnecting"


class InvalidUserCredentialsError(Error, _ne.InvalidUserCredentialsError):
    """The creds file or nkey seed cannot be used."""

    default_message = "nats: invalid user credentials"


class NotJSMessageError(Error, _ne.NotJSMessageError):
    """A JetStream-only call on a message that did not come from a stream."""

    default_message = "nats: not a JetStream message"


class MsgAlreadyAckdError(Error, _ne.MsgAlreadyAckdError):
    """A terminal acknowledgement was already sent for this message."""

    default_message = "nats: message was already acknowledged"

    def __init__(self, message: str | None = None) -> None:
        Error.__init__(self, message)


class ForkedConnectionError(Error):
    """A client connected in one process was used after ``os.fork()`` in a child.

    The child shares the parent's socket, so it must never write to it (its
    bytes would interleave with the parent's) nor close it. Connect again in
    the child instead. ``owner_pid`` is the process that connected, ``pid``
    the process that tried to use the client.
    """

    default_message = "nats: connection was made in another process; connect again after fork"

    def __init__(self, owner_pid: int = 0, pid: int = 0, message: str | None = None) -> None:
        Error.__init__(
            self,
            message
            or (
                f"nats: this client was connected in process {owner_pid} and cannot be used "
                f"in process {pid} after os.fork(); call jsclient.connect() in the child "
                "process (the parent's connection is left untouched)"
            ),
        )
        self.owner_pid = owner_pid
        self.pid = pid


class SlowConsumerError(Error, _ne.SlowConsumerError):
    """A subscription's pending limits were exceeded; messages were dropped.

    ``dropped`` counts the messages this subscription has dropped so far.
    """

    default_message = "nats: slow consumer, messages dropped"

    def __init__(
        self, subject: str = "", sid: int = 0, dropped: int = 0, message: str | None = None
    ) -> None:
        Error.__init__(
            self,
            message or f"nats: slow consumer on subject {subject!r} (sid {sid}), {dropped} dropped",
        )
        self.subject = subject
        self.sid = sid
        self.dropped = dropped
        self.reply = ""
        self.sub = None  # type: ignore[assignment]


class PermissionViolationError(Error):
    """The server refused an operation for lack of permission (``-ERR 'Permissions
    Violation for Publish to "x"'``). The connection stays open.

    ``operation`` is ``"publish"`` or ``"subscription"`` (as the server words
    it, lower-cased; "" if unknown) and ``subject`` the subject refused.
    """

    default_message = "nats: permissions violation"

    def __init__(self, message: str | None = None, operation: str = "", subject: str = "") -> None:
        Error.__init__(self, message)
        self.operation = operation
        self.subject = subject


# --------------------------------------------------------------------------
# JetStream


class JetStreamError(Error, _jse.Error):
    """Base of JetStream errors raised by the client itself."""

    default_message = "nats: JetStream error"

    def __init__(self, message: str | None = None, *args: Any) -> None:
        Error.__init__(self, message, *args)
        self.description = message


class APIError(JetStreamError, _jse.APIError):
    """The JetStream API answered with an error.

    ``code`` is the HTTP-like status, ``err_code`` the JetStream error code
    (10059 stream not found, ...), ``description`` the server's text.
    """

    default_message = "nats: JetStream API error"

    def __init__(
        self,
        code: int | None = None,
        description: str | None = None,
        err_code: int | None = None,
        stream: str | None = None,
        seq: int | None = None,
    ) -> None:
        Error.__init__(self, description)
        self.code = code
        self.err_code = err_code
        self.description = description
        self.stream = stream
        self.seq = seq

    def __str__(self) -> str:
        return (
            f"nats: {type(self).__name__}: code={self.code} err_code={self.err_code} "
            f"description={self.description!r}"
        )


class ServiceUnavailableError(APIError, _jse.ServiceUnavailableError):
    """503: JetStream is not available (or no responders)."""


class ServerError(APIError, _jse.ServerError):
    """500 from the JetStream API."""


class NotFoundError(APIError, _jse.NotFoundError):
    """404 from the JetStream API."""


class BadRequestError(APIError, _jse.BadRequestError):
    """400 from the JetStream API."""


class StreamNotFoundError(NotFoundError):
    """err_code 10059."""


class ConsumerNotFoundError(NotFoundError):
    """err_code 10014."""


class MessageNotFoundError(NotFoundError):
    """err_code 10037."""


class StreamNameAlreadyInUseError(BadRequestError):
    """err_code 10058."""


class ConsumerAlreadyExistsError(BadRequestError):
    """err_code 10148 (or 10105): create found a consumer with a different config."""


class ConsumerDoesNotExistError(NotFoundError):
    """err_code 10149: update found no consumer."""


class WrongLastSequenceError(BadRequestError):
    """err_code 10071: an expected-last-sequence check failed."""


class WrongLastMsgIDError(BadRequestError):
    """err_code 10070: an expected-last-msg-id check failed."""


class StreamNotMatchError(BadRequestError):
    """err_code 10060: the message went to a stream other than the expected one."""


class NoStreamResponseError(JetStreamError, _jse.NoStreamResponseError):
    """A publish found no stream listening on its subject (503 no responders)."""

    default_message = "nats: no response from stream"


class InvalidStreamNameError(JetStreamError):
    """A stream name is empty or contains '.', '*', '>' or whitespace."""

    default_message = "nats: invalid stream name"


class InvalidConsumerNameError(JetStreamError):
    """A consumer name is empty or contains '.', '*', '>' or whitespace."""

    default_message = "nats: invalid consumer name"


class InvalidJSAckError(JetStreamError, NotJSMessageError):
    """A reply subject is not a valid ``$JS.ACK`` subject (v1: 9 tokens, v2: 11+)."""

    default_message = "nats: invalid JetStream ack subject"


class TooManyStalledMsgsError(JetStreamError, _jse.TooManyStalledMsgsError):
    """``publish_async`` waited too long for room under the max-pending limit."""

    default_message = "nats: stalled with too many outstanding async published messages"


class PublishDisconnectedError(JetStreamError):
    """The connection was lost while an async publish waited for its ack."""

    default_message = "nats: disconnected while waiting for the publish ack"


class StatusError(JetStreamError):
    """A pull request ended with a status the caller must see.

    ``status`` is the numeric code (400, 409, ...) and ``description`` the text.
    """

    default_message = "nats: pull request ended with an error status"

    def __init__(self, status: int = 0, description: str = "") -> None:
        JetStreamError.__init__(self, f"nats: status {status} {description}".rstrip())
        self.status = status
        self.description = description


class ConsumerDeletedError(StatusError):
    """409 Consumer Deleted."""


class ConsumerIsPushBasedError(StatusError):
    """409 Consumer is push based."""


class BadPullRequestError(StatusError):
    """400 Bad Request for a pull."""


class NoHeartbeatError(JetStreamError, _ne.TimeoutError):
    """No message or heartbeat within twice the idle heartbeat interval."""

    default_message = "nats: no heartbeat received"


class MsgIteratorClosedError(JetStreamError):
    """``next()`` on a messages() iterator that was stopped or drained."""

    default_message = "nats: messages iterator closed"


class ConcurrentFetchError(JetStreamError):
    """``fetch()`` on a pull subscription while another fetch on it is still running."""

    default_message = (
        "nats: a fetch is already running on this pull subscription; "
        "wait for it, or use one subscription per thread"
    )


# --------------------------------------------------------------------------
# Legacy subscribe (ADR-13 pull_subscribe, ADR-15 subscribe): checks made before
# anything is created. Each has a stable numeric ``code``; where the same check
# exists in nats.java's client-error catalogue the number is the same.


class SubscribeError(JetStreamError):
    """A ``subscribe``/``pull_subscribe`` call was refused; nothing was created.

    ``code`` is stable across releases (``id`` is ``"SUB-<code>"``); the message
    says what to change.
    """

    code = 90000
    default_message = "nats: invalid JetStream subscription"

    @property
    def id(self) -> str:
        return f"SUB-{self.code}"

    def __str__(self) -> str:
        return f"nats: [{self.id}] {self.message or self.default_message.removeprefix('nats: ')}"


class PullDeliverGroupError(SubscribeError):
    """A pull subscription's consumer config names a deliver group."""

    code = 90001
    default_message = "pull subscriptions can't have a deliver group (deliver_group is for push)"


class PullDeliverSubjectError(SubscribeError):
    """A pull subscription's consumer config names a deliver subject."""

    code = 90002
    default_message = (
        "pull subscriptions can't have a deliver subject (deliver_subject is for push)"
    )


class PullHeartbeatError(SubscribeError):
    """Flow control or idle heartbeats in a pull subscription's consumer config."""

    code = 90005
    default_message = (
        "flow control and idle heartbeats are for push subscriptions; "
        "remove them from the pull consumer's config"
    )


class QueueHeartbeatError(SubscribeError):
    """A queue subscription with idle heartbeats or flow control."""

    code = 90006
    default_message = (
        "a queue subscription can't use idle heartbeats or flow control (the server would send "
        "them to one random member); remove them or subscribe without a queue"
    )


class NoStreamMatchError(SubscribeError):
    """No stream listens on the subscription's subject."""

    code = 90007
    default_message = "no stream matches the subject; create one, or pass stream="


class PushConsumerError(SubscribeError):
    """``pull_subscribe`` on a push consumer (it has a deliver subject)."""

    code = 90008
    default_message = "the consumer is a push consumer; use js.subscribe() for it"


class PullConsumerError(SubscribeError):
    """``subscribe`` (push) on a pull consumer (it has no deliver subject)."""

    code = 90009
    default_message = "the consumer is a pull consumer; use js.pull_subscribe() for it"


class FilterSubjectMismatchError(SubscribeError):
    """The existing consumer filters on another subject than the one subscribed to."""

    code = 90011
    default_message = "the subject does not match the consumer's filter subject"


class ConsumerBoundError(SubscribeError):
    """The push consumer is already bound to a subscription (duplicate subscription)."""

    code = 90012
    default_message = (
        "duplicate subscription: the consumer is already bound to a subscription; "
        "use a queue group (deliver_group) to share it"
    )


class ConsumerNotQueueError(SubscribeError):
    """A queue subscription to a consumer made without a deliver group."""

    code = 90013
    default_message = (
        "the consumer was created without a deliver group; it can't serve a queue subscription"
    )


class ConsumerIsQueueError(SubscribeError):
    """A plain subscription to a consumer made for a queue group."""

    code = 90014
    default_message = "the consumer was created for a queue group; subscribe with that queue name"


class QueueMismatchError(SubscribeError):
    """A queue subscription whose queue is not the consumer's deliver group."""

    code = 90015
    default_message = "the consumer was created for a different queue group"


class ConsumerConfigMismatchError(SubscribeError):
    """The given config differs from the existing consumer's (only deliver_subject may change)."""

    code = 90016
    default_message = (
        "the consumer exists with a different configuration (only the deliver subject can "
        "change); update the consumer or drop the differing fields"
    )


class ConsumerRequiredError(SubscribeError):
    """``consumer=`` names a consumer that does not exist (binding needs an existing one)."""

    code = 90017
    default_message = "the named consumer does not exist; create it first, or pass durable="


class OrderedQueueError(SubscribeError):
    """An ordered consumer with a queue group."""

    code = 90018
    default_message = "an ordered consumer can't be used with a queue group"


class SubjectRequiredError(SubscribeError):
    """Neither a subject nor a stream was given, so no stream can be found."""

    code = 90021
    default_message = "a subject is required when no stream is given"


class MultipleStreamsMatchError(SubscribeError):
    """More than one stream listens on the subject; the caller must name one."""

    code = 90022
    default_message = "more than one stream matches the subject; pass stream="


class PullAckPolicyError(SubscribeError):
    """A pull subscription with ack policy ``none`` or ``all``."""

    code = 90023
    default_message = (
        "pull subscriptions need ack policy explicit (ADR-15: none and all are errors for pull)"
    )


class OrderedConfigError(SubscribeError):
    """An ordered consumer combined with an option it cannot honour."""

    code = 90024
    default_message = (
        "an ordered consumer is ephemeral and acks nothing: durable=, consumer=, manual_ack "
        "and ack policies other than none can't be used with it"
    )


class DeleteConsumerPolicyError(SubscribeError):
    """``delete_consumer`` is not one of ``"if_created"``, ``"never"``, ``"always"``."""

    code = 90025
    default_message = 'delete_consumer must be "if_created", "never" or "always"'


class DurableMismatchError(SubscribeError):
    """``durable=`` and the config's ``durable_name`` (or ``name``) name different consumers."""

    code = 90026
    default_message = "durable= and the config's durable_name differ; give the name once"


class HeartbeatAlarmError(JetStreamError):
    """No message or heartbeat of a push subscription for ``factor`` x its idle heartbeat.

    ``last_stream_seq`` and ``last_consumer_seq`` are the last sequences seen.
    """

    default_message = "nats: no heartbeat received (heartbeat alarm)"

    def __init__(
        self,
        message: str | None = None,
        last_stream_seq: int = 0,
        last_consumer_seq: int = 0,
    ) -> None:
        JetStreamError.__init__(self, message)
        self.last_stream_seq = last_stream_seq
        self.last_consumer_seq = last_consumer_seq


class SequenceMismatchError(JetStreamError, _jse.ConsumerSequenceMismatchError):
    """A gap in a push subscription's consumer sequence (messages were missed).

    ``stream_resume_sequence`` is where the stream should be resumed from;
    ``consumer_sequence`` is the last one delivered and ``last_consumer_sequence``
    what the server reports as sent.
    """

    default_message = "nats: consumer sequence mismatch"

    def __init__(
        self,
        message: str | None = None,
        stream_resume_sequence: int = 0,
        consumer_sequence: int = 0,
        last_consumer_sequence: int = 0,
    ) -> None:
        JetStreamError.__init__(self, message)
        self.stream_resume_sequence = stream_resume_sequence
        self.consumer_sequence = consumer_sequence
        self.last_consumer_sequence = last_consumer_sequence

    def __str__(self) -> str:
        if self.message:
            return self.message
        return (
            f"nats: consumer sequence mismatch: delivered up to consumer sequence "
            f"{self.consumer_sequence}, the server sent up to {self.last_consumer_sequence}; "
            f"resume from stream sequence {self.stream_resume_sequence}"
        )


# -- the PySpark data source (jsclient.spark) ----------------------------------
# Spark flattens exceptions from its Python workers into text, so each message
# says what was being done, where, and how far it got.


class SparkOptionError(Error, ValueError):
    """A ``jetstream`` data source option is missing, unknown or has a bad value."""

    default_message = "jetstream: invalid data source option"


class SparkReadError(JetStreamError):
    """Reading a stream for Spark failed (the cause is chained and in the message)."""

    default_message = "jetstream: read failed"


class SparkWriteError(JetStreamError):
    """Publishing a Spark partition failed; ``published`` messages were acked before."""

    default_message = "jetstream: write failed"

    def __init__(self, message: str | None = None, published: int = 0, duplicates: int = 0) -> None:
        JetStreamError.__init__(self, message)
        self.published = published
        self.duplicates = duplicates


class DataLossError(JetStreamError):
    """A streaming query's next messages were removed (purge, limits) before it read them."""

    default_message = "jetstream: messages were lost before the query read them"


# err_code -> class, for errors the server signals by JetStream error code.
API_ERRORS_BY_ERR_CODE: dict[int, type[APIError]] = {
    10059: StreamNotFoundError,
    10014: ConsumerNotFoundError,
    10037: MessageNotFoundError,
    10058: StreamNameAlreadyInUseError,
    10148: ConsumerAlreadyExistsError,
    10105: ConsumerAlreadyExistsError,
    10149: ConsumerDoesNotExistError,
    10071: WrongLastSequenceError,
    10070: WrongLastMsgIDError,
    10060: StreamNotMatchError,
}

_API_ERRORS_BY_CODE: dict[int, type[APIError]] = {
    400: BadRequestError,
    404: NotFoundError,
    500: ServerError,
    503: ServiceUnavailableError,
}


def api_error(err: dict[str, Any]) -> APIError:
    """Build the typed error for a JetStream API ``{"error": {...}}`` body."""
    code = err.get("code")
    err_code = err.get("err_code")
    cls: type[APIError] = APIError
    if isinstance(err_code, int) and err_code in API_ERRORS_BY_ERR_CODE:
        cls = API_ERRORS_BY_ERR_CODE[err_code]
    elif isinstance(code, int) and code in _API_ERRORS_BY_CODE:
        cls = _API_ERRORS_BY_CODE[code]
    return cls(
        code=code,
        description=err.get("description"),
        err_code=err_code,
        stream=err.get("stream"),
        seq=err.get("seq"),
    )


__all__ = [
    name for name, obj in globals().items() if isinstance(obj, type) and issubclass(obj, Exception)
]
__all__ += ["api_error", "API_ERRORS_BY_ERR_CODE"]
