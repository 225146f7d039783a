"""JetStream API errors, the ``err_code`` table and :func:`api_error`.

Also the client-side checks of stream and consumer names made before an API call.
"""

from __future__ import annotations

from typing import Any

import nats.js.errors as _jse

from jsclient.errors._base import Error, JetStreamError
from jsclient.errors.messages import NoRespondersError


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


class ConsumerNotFoundError(NotFoundError, NoRespondersError):
    """err_code 10014: the consumer does not exist (also raised by a pull on a
    consumer that is gone, whose request nothing answers: hence also a
    :class:`NoRespondersError`, as nats.go reports it)."""


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


if hasattr(_jse, "ConsumerInvalidResetError"):  # nats-py 2.16 and later

    class ConsumerInvalidResetError(BadRequestError, _jse.ConsumerInvalidResetError):
        """err_code 10204: a consumer reset to a sequence its deliver policy does not allow."""

else:

    class ConsumerInvalidResetError(BadRequestError):  # type: ignore[no-redef]
        """err_code 10204: a consumer reset to a sequence its deliver policy does not allow."""


class InvalidStreamNameError(JetStreamError):
    """A stream name is empty or contains '.', '*', '>' or whitespace."""

    default_message = "nats: invalid stream name"


class InvalidConsumerNameError(JetStreamError):
    """A consumer name is empty or contains '.', '*', '>' or whitespace."""

    default_message = "nats: invalid consumer name"


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
    10204: ConsumerInvalidResetError,
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
