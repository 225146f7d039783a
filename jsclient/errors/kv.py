"""Errors of the Key-Value store (:mod:`jsclient.jetstream.kv`).

Each also subclasses nats-py's class of the same name, so code written for
nats-py's KV keeps catching them. Bucket and key checks are made before
anything is sent.
"""

from __future__ import annotations

from typing import Any

import nats.js.errors as _jse

from jsclient.errors._base import JetStreamError
from jsclient.errors.jetstream import (
    APIError,
    BadRequestError,
    NotFoundError,
    WrongLastSequenceError,
)


class KeyValueError(APIError, _jse.KeyValueError):
    """Base of the Key-Value store's errors that concern a bucket's contents."""


class BucketNotFoundError(NotFoundError, _jse.BucketNotFoundError):
    """No bucket of that name (its stream ``KV_<bucket>`` does not exist)."""


class BadBucketError(APIError, _jse.BadBucketError):
    """The stream ``KV_<bucket>`` exists but is not a Key-Value bucket."""


class KeyNotFoundError(KeyValueError, NotFoundError, _jse.KeyNotFoundError):
    """The key has no value: never set, deleted or purged (or no such revision).

    ``entry`` is the delete or purge marker when there is one, and ``op`` its
    operation (``"DEL"``/``"PURGE"``); both are None for a key never set.
    """

    def __init__(
        self,
        code: int | None = 404,
        description: str | None = "key not found",
        err_code: int | None = None,
        *,
        entry: Any = None,
        op: str | None = None,
    ) -> None:
        KeyValueError.__init__(self, code=code, description=description, err_code=err_code)
        self.entry = entry
        self.op = op


class KeyDeletedError(KeyNotFoundError, _jse.KeyDeletedError):
    """The key's latest entry is a delete or purge marker (``entry``, ``op``)."""


class KeyWrongLastSequenceError(
    KeyValueError, WrongLastSequenceError, _jse.KeyWrongLastSequenceError
):
    """An update (or a delete with ``last=``) named another revision than the key's latest."""


class KeyExistsError(KeyWrongLastSequenceError):
    """``create`` found the key holding a value."""


class NoKeysError(KeyValueError, _jse.NoKeysError):
    """No keys matched (kept for nats-py code; ``keys()`` returns ``[]`` instead)."""


class KeyHistoryTooLargeError(KeyValueError, BadRequestError, _jse.KeyHistoryTooLargeError):
    """A bucket's ``history`` must be between 1 and 64."""

    def __init__(self, description: str = "history limited to a max of 64") -> None:
        KeyValueError.__init__(self, code=400, description=description)


class InvalidKeyError(JetStreamError, _jse.InvalidKeyError):
    """A key (or a watch/keys filter) is empty, has a character outside
    ``[-/_=.a-zA-Z0-9]``, or starts or ends with a dot."""

    default_message = "nats: invalid key"


class InvalidBucketNameError(JetStreamError, _jse.InvalidBucketNameError):
    """A bucket name is empty or has a character outside ``[a-zA-Z0-9_-]``."""

    default_message = "nats: invalid bucket name"


class KeyValueLimitMarkerTTLNotSupportedError(
    JetStreamError, _jse.KeyValueLimitMarkerTTLNotSupportedError
):
    """``limit_marker_ttl`` (or a per-key TTL) needs server 2.11 (JetStream API level 1)."""

    default_message = "nats: limit marker TTLs not supported by server"
