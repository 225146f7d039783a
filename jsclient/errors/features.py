"""Errors of the message features of servers 2.11-2.14.

Per-message TTL (ADR-43), message schedules (ADR-51), distributed counters
(ADR-49), atomic and fast-ingest batch publish (ADR-50). The server's refusals
are API errors found by their ``err_code`` (registered in
``API_ERRORS_BY_ERR_CODE`` below); the rest are the client's own checks: a
server too old for a feature, a batch used after it ended, lost messages of a
fast-ingest batch, a counter with no value.
"""

from __future__ import annotations

from typing import Any

from jsclient.errors._base import JetStreamError
from jsclient.errors.jetstream import (
    API_ERRORS_BY_ERR_CODE,
    APIError,
    BadRequestError,
    MessageNotFoundError,
)

# -- the server's API level ----------------------------------------------------


class FeatureNotSupportedError(JetStreamError):
    """The server is too old for a feature: its JetStream API level is below the one needed.

    ``feature`` names it, ``required_level`` is the level it needs (1: server
    2.11, 2: 2.12, 4: 2.14) and ``server_level`` what ``$JS.API.INFO``
    reported. Checked before the request that needs it is sent.
    """

    default_message = "nats: the server does not support this JetStream feature"
    #: JetStream API level -> the first server release with it.
    SERVERS = {1: "2.11", 2: "2.12", 3: "2.12.5", 4: "2.14", 5: "2.15"}

    def __init__(self, feature: str = "", required_level: int = 0, server_level: int = 0) -> None:
        server = self.SERVERS.get(required_level, f"with API level {required_level}")
        super().__init__(
            f"nats: {feature} needs nats-server {server} or later (JetStream API level "
            f"{required_level}); the server has level {server_level}"
            if feature
            else None
        )
        self.feature = feature
        self.required_level = required_level
        self.server_level = server_level


class RequiredApiLevelError(APIError):
    """err_code 10185 (412): the server refused a message needing a higher API level."""


# -- per-message TTL (ADR-43) ----------------------------------------------------


class MessageTTLInvalidError(BadRequestError):
    """err_code 10165: a ``Nats-TTL`` the server cannot read, or below one second."""


class MessageTTLDisabledError(BadRequestError):
    """err_code 10166: a message with a TTL to a stream without ``allow_msg_ttl``."""


# -- message schedules (ADR-51) --------------------------------------------------


class MessageSchedulesError(BadRequestError):
    """Base of the server's refusals of a message schedule."""


class MessageSchedulesDisabledError(MessageSchedulesError):
    """err_code 10188: a schedule to a stream without ``allow_msg_schedules``."""


class MessageSchedulesPatternInvalidError(MessageSchedulesError):
    """err_code 10189: the server cannot read the schedule (``@at``, ``@every``, cron)."""


class MessageSchedulesTargetInvalidError(MessageSchedulesError):
    """err_code 10190: the target is not a subject of the stream, or is the schedule's own."""


class MessageSchedulesTTLInvalidError(MessageSchedulesError):
    """err_code 10191: the schedule's TTL for the messages it makes is invalid."""


class MessageSchedulesRollupInvalidError(MessageSchedulesError):
    """err_code 10192: a schedule rollup other than ``sub``."""


class MessageSchedulesSourceInvalidError(MessageSchedulesError):
    """err_code 10203: the source is not a subject of the stream, or is the
    target or the schedule's own subject."""


class MessageSchedulesSchedulerInvalidError(MessageSchedulesError):
    """err_code 10212: a ``Nats-Scheduler`` header that is empty, invalid or the publish subject."""


class MessageSchedulesTimeZoneInvalidError(MessageSchedulesError):
    """err_code 10223: a time zone the server does not know, or one on a non-cron schedule."""


# -- distributed counters (ADR-49) -----------------------------------------------


class MessageCounterError(BadRequestError):
    """Base of the server's refusals of a counter increment."""


class MessageCounterDisabledError(MessageCounterError):
    """err_code 10168: an increment to a stream without ``allow_msg_counter``."""


class MessageCounterIncrementError(MessageCounterError):
    """err_code 10169, 10170, 10171: a counter message without a valid ``Nats-Incr``,
    with a payload, or with a header the server does not allow on counters."""


class MessageCounterBrokenError(MessageCounterError):
    """err_code 10172: the subject's last message is not a counter value."""


class CounterNotFoundError(MessageNotFoundError):
    """``counters.get`` found no value on the subject (``subject``)."""

    def __init__(
        self,
        code: int | None = 404,
        description: str | None = "counter not found",
        err_code: int | None = None,
        stream: str | None = None,
        seq: int | None = None,
        *,
        subject: str | None = None,
    ) -> None:
        super().__init__(code, description, err_code, stream, seq)
        self.subject = subject


# -- atomic batch publish (ADR-50) -----------------------------------------------


class AtomicPublishError(APIError):
    """Base of the server's refusals of an atomic batch; nothing of it is stored."""


class AtomicPublishDisabledError(AtomicPublishError, BadRequestError):
    """err_code 10174: an atomic batch to a stream without ``allow_atomic``."""


class AtomicPublishMissingSeqError(AtomicPublishError, BadRequestError):
    """err_code 10175: a batch message without ``Nats-Batch-Sequence``."""


class AtomicPublishIncompleteBatchError(AtomicPublishError, BadRequestError):
    """err_code 10176: the server lost part of the batch (a gap, its inactivity
    timeout, a restart) and abandoned it."""


class AtomicPublishUnsupportedHeaderError(AtomicPublishError, BadRequestError):
    """err_code 10177: a header batches do not allow (``Nats-Expected-Last-Msg-Id``)."""


class AtomicPublishInvalidBatchIDError(AtomicPublishError, BadRequestError):
    """err_code 10179: a batch id longer than 64 characters."""


class AtomicPublishTooLargeBatchError(AtomicPublishError, BadRequestError):
    """err_code 10199: more messages than the server allows in a batch (1000 by default)."""


class AtomicPublishInvalidBatchCommitError(AtomicPublishError, BadRequestError):
    """err_code 10200: a ``Nats-Batch-Commit`` other than ``1`` or ``eob``."""


class AtomicPublishDuplicateMessageError(AtomicPublishError, BadRequestError):
    """err_code 10201: the batch holds a message id the stream has already seen."""


class AtomicPublishTooManyInflightError(AtomicPublishError):
    """err_code 10210 (429): the stream or server has too many open batches (50 / 1000)."""


# -- fast-ingest batch publish (ADR-50) ------------------------------------------


class BatchPublishError(APIError):
    """Base of the server's refusals of a fast-ingest batch."""


class BatchPublishDisabledError(BatchPublishError, BadRequestError):
    """err_code 10205: a fast-ingest batch to a stream without ``allow_batched``."""


class BatchPublishInvalidPatternError(BatchPublishError, BadRequestError):
    """err_code 10206: the server cannot read the batch's reply subject."""


class BatchPublishInvalidBatchIDError(BatchPublishError, BadRequestError):
    """err_code 10207: a batch id longer than 64 characters."""


class BatchPublishUnknownBatchIDError(BatchPublishError, BadRequestError):
    """err_code 10208: the server no longer knows the batch (ended, or idle past its timeout)."""


class BatchPublishTooManyInflightError(BatchPublishError):
    """err_code 10211 (429): the stream or server has too many open fast batches."""


class BatchPublishGapError(JetStreamError):
    """The server reported messages of a fast-ingest batch lost: batch sequences
    ``expected`` up to (not including) ``received``. ``ack`` is the batch's final
    PubAck when the batch ended on it (gap mode ``fail``), else None."""

    default_message = "nats: messages of a fast-ingest batch were lost"

    def __init__(self, expected: int = 0, received: int = 0, ack: Any = None) -> None:
        super().__init__(
            f"nats: fast-ingest batch lost messages {expected} to {received - 1}"
            if received
            else None
        )
        self.expected = expected
        self.received = received
        self.ack = ack


class BatchClosedError(JetStreamError):
    """``add`` or ``commit`` on a batch that was committed, discarded or failed."""

    default_message = "nats: the batch is closed"


API_ERRORS_BY_ERR_CODE.update(
    {
        10165: MessageTTLInvalidError,
        10166: MessageTTLDisabledError,
        10168: MessageCounterDisabledError,
        10169: MessageCounterIncrementError,
        10170: MessageCounterIncrementError,
        10171: MessageCounterIncrementError,
        10172: MessageCounterBrokenError,
        10174: AtomicPublishDisabledError,
        10175: AtomicPublishMissingSeqError,
        10176: AtomicPublishIncompleteBatchError,
        10177: AtomicPublishUnsupportedHeaderError,
        10179: AtomicPublishInvalidBatchIDError,
        10185: RequiredApiLevelError,
        10188: MessageSchedulesDisabledError,
        10189: MessageSchedulesPatternInvalidError,
        10190: MessageSchedulesTargetInvalidError,
        10191: MessageSchedulesTTLInvalidError,
        10192: MessageSchedulesRollupInvalidError,
        10199: AtomicPublishTooLargeBatchError,
        10200: AtomicPublishInvalidBatchCommitError,
        10201: AtomicPublishDuplicateMessageError,
        10203: MessageSchedulesSourceInvalidError,
        10205: BatchPublishDisabledError,
        10206: BatchPublishInvalidPatternError,
        10207: BatchPublishInvalidBatchIDError,
        10208: BatchPublishUnknownBatchIDError,
        10210: AtomicPublishTooManyInflightError,
        10211: BatchPublishTooManyInflightError,
        10212: MessageSchedulesSchedulerInvalidError,
        10223: MessageSchedulesTimeZoneInvalidError,
    }
)
