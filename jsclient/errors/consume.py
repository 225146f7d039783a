"""Consuming errors: pull statuses, heartbeats, iterators, push sequence gaps."""

from __future__ import annotations

import nats.errors as _ne
import nats.js.errors as _jse

from jsclient.errors._base import JetStreamError


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


class PinIdMismatchError(StatusError):
    """423: the pull carried a pin id that is no longer the consumer's (ADR-42).

    The client lost the pin of a ``pinned_client`` priority group; it forgets the
    id and pulls on as an unpinned client. A consume/messages sends it to the
    error callback as a notice.
    """


class PriorityGroupError(JetStreamError, ValueError):
    """A pull's priority-group options do not fit the consumer (ADR-42).

    Checked against the consumer's cached info before anything is sent.
    """

    default_message = "nats: pull options do not fit the consumer's priority groups"


class PriorityGroupRequiredError(PriorityGroupError):
    """The consumer has priority groups and the pull names none (``group=``)."""

    default_message = "nats: this consumer has priority groups: pass group="


class InvalidPriorityGroupError(PriorityGroupError):
    """The pull names a group the consumer does not have (or it has no groups)."""

    default_message = "nats: invalid priority group for this consumer"


class PriorityPolicyError(PriorityGroupError):
    """A pull option needs another priority policy: ``min_pending`` and
    ``min_ack_pending`` need ``overflow``, ``priority`` needs ``prioritized``."""

    default_message = "nats: pull option not valid for the consumer's priority policy"
