"""Typed errors. Each subclasses the matching nats-py error.

So ``except nats.errors.TimeoutError`` and ``except jsclient.errors.TimeoutError``
both catch a jsclient timeout, and (since nats-py's timeout derives from
``asyncio.TimeoutError``) so does the builtin ``TimeoutError``.

The classes live in submodules by area (``connection``, ``messages``,
``jetstream``, ``publish``, ``consume``, ``subscribe``, ``spark``; the roots in
``_base``) but belong to this module: import them from ``jsclient.errors``.
Their ``__module__`` is ``jsclient.errors``, so reprs, tracebacks and pickles
name them as before the split. The reference is ``docs/errors.md``.
"""

from __future__ import annotations

from jsclient.errors._base import (
    Error,
    JetStreamError,
)
from jsclient.errors.connection import (
    AuthorizationError,
    ConnectionClosedError,
    ConnectionDrainingError,
    ConnectionReconnectingError,
    DrainTimeoutError,
    FlushTimeoutError,
    ForkedConnectionError,
    InvalidUserCredentialsError,
    NoServersError,
    OutboundBufferLimitError,
    PermissionViolationError,
    ProtocolError,
    SecureConnFailedError,
    SecureConnRequiredError,
    SlowConsumerError,
    StaleConnectionError,
    TimeoutError,
    UnexpectedEOF,
)
from jsclient.errors.consume import (
    BadPullRequestError,
    ConcurrentFetchError,
    ConsumerDeletedError,
    ConsumerIsPushBasedError,
    HeartbeatAlarmError,
    MsgIteratorClosedError,
    NoHeartbeatError,
    SequenceMismatchError,
    StatusError,
)
from jsclient.errors.jetstream import (
    _API_ERRORS_BY_CODE as _API_ERRORS_BY_CODE,  # private; kept importable from here
)
from jsclient.errors.jetstream import (
    API_ERRORS_BY_ERR_CODE,
    APIError,
    BadRequestError,
    ConsumerAlreadyExistsError,
    ConsumerDoesNotExistError,
    ConsumerNotFoundError,
    InvalidConsumerNameError,
    InvalidStreamNameError,
    MessageNotFoundError,
    NotFoundError,
    ServerError,
    ServiceUnavailableError,
    StreamNameAlreadyInUseError,
    StreamNotFoundError,
    StreamNotMatchError,
    WrongLastMsgIDError,
    WrongLastSequenceError,
    api_error,
)
from jsclient.errors.messages import (
    BadHeaderError,
    BadSubjectError,
    BadSubscriptionError,
    BadTimeoutError,
    InvalidJSAckError,
    MaxPayloadError,
    MsgAlreadyAckdError,
    NoRespondersError,
    NotJSMessageError,
)
from jsclient.errors.publish import (
    NoStreamResponseError,
    PublishDisconnectedError,
    TooManyStalledMsgsError,
)
from jsclient.errors.spark import (
    DataLossError,
    SparkOptionError,
    SparkReadError,
    SparkWriteError,
)
from jsclient.errors.subscribe import (
    ConsumerBoundError,
    ConsumerConfigMismatchError,
    ConsumerIsQueueError,
    ConsumerNotQueueError,
    ConsumerRequiredError,
    DeleteConsumerPolicyError,
    DurableMismatchError,
    FilterSubjectMismatchError,
    MultipleStreamsMatchError,
    NoStreamMatchError,
    OrderedConfigError,
    OrderedQueueError,
    PullAckPolicyError,
    PullConsumerError,
    PullDeliverGroupError,
    PullDeliverSubjectError,
    PullHeartbeatError,
    PushConsumerError,
    QueueHeartbeatError,
    QueueMismatchError,
    SubjectRequiredError,
    SubscribeError,
)

__all__ = [
    "Error",
    "TimeoutError",
    "FlushTimeoutError",
    "DrainTimeoutError",
    "NoRespondersError",
    "ConnectionClosedError",
    "StaleConnectionError",
    "UnexpectedEOF",
    "OutboundBufferLimitError",
    "BadSubjectError",
    "BadHeaderError",
    "BadSubscriptionError",
    "BadTimeoutError",
    "MaxPayloadError",
    "AuthorizationError",
    "NoServersError",
    "ProtocolError",
    "SecureConnRequiredError",
    "SecureConnFailedError",
    "ConnectionDrainingError",
    "ConnectionReconnectingError",
    "InvalidUserCredentialsError",
    "NotJSMessageError",
    "MsgAlreadyAckdError",
    "ForkedConnectionError",
    "SlowConsumerError",
    "PermissionViolationError",
    "JetStreamError",
    "APIError",
    "ServiceUnavailableError",
    "ServerError",
    "NotFoundError",
    "BadRequestError",
    "StreamNotFoundError",
    "ConsumerNotFoundError",
    "MessageNotFoundError",
    "StreamNameAlreadyInUseError",
    "ConsumerAlreadyExistsError",
    "ConsumerDoesNotExistError",
    "WrongLastSequenceError",
    "WrongLastMsgIDError",
    "StreamNotMatchError",
    "NoStreamResponseError",
    "InvalidStreamNameError",
    "InvalidConsumerNameError",
    "InvalidJSAckError",
    "TooManyStalledMsgsError",
    "PublishDisconnectedError",
    "StatusError",
    "ConsumerDeletedError",
    "ConsumerIsPushBasedError",
    "BadPullRequestError",
    "NoHeartbeatError",
    "MsgIteratorClosedError",
    "ConcurrentFetchError",
    "SubscribeError",
    "PullDeliverGroupError",
    "PullDeliverSubjectError",
    "PullHeartbeatError",
    "QueueHeartbeatError",
    "NoStreamMatchError",
    "PushConsumerError",
    "PullConsumerError",
    "FilterSubjectMismatchError",
    "ConsumerBoundError",
    "ConsumerNotQueueError",
    "ConsumerIsQueueError",
    "QueueMismatchError",
    "ConsumerConfigMismatchError",
    "ConsumerRequiredError",
    "OrderedQueueError",
    "SubjectRequiredError",
    "MultipleStreamsMatchError",
    "PullAckPolicyError",
    "OrderedConfigError",
    "DeleteConsumerPolicyError",
    "DurableMismatchError",
    "HeartbeatAlarmError",
    "SequenceMismatchError",
    "SparkOptionError",
    "SparkReadError",
    "SparkWriteError",
    "DataLossError",
    "api_error",
    "API_ERRORS_BY_ERR_CODE",
]

# One public home: reprs, tracebacks and pickles say ``jsclient.errors.X``.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__
del _name, _obj
