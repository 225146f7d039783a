"""Errors of the batched direct gets (ADR-31): ``get_batch`` and ``get_last_msgs_for``."""

from __future__ import annotations

from jsclient.errors._base import JetStreamError
from jsclient.errors.jetstream import APIError, ServiceUnavailableError


class DirectGetNotAllowedError(ServiceUnavailableError):
    """The stream does not allow direct gets (``allow_direct`` is false), so no
    server answers ``$JS.API.DIRECT.GET.<stream>`` (code 503)."""


class TooManyResultsError(APIError):
    """413: a ``get_last_msgs_for`` matched more subjects than the server answers
    at once (1024 in nats-server 2.11-2.15); narrow the subjects or split them."""


class BatchGetNotSupportedError(JetStreamError):
    """The server is older than 2.11 (JetStream API level below 1): it has no
    batched or multi-subject direct get. ``api_level`` is what the server reported."""

    default_message = "nats: batched direct get needs nats-server 2.11 or later"

    def __init__(self, message: str | None = None, api_level: int | None = None) -> None:
        JetStreamError.__init__(self, message)
        self.api_level = api_level
