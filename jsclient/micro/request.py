"""A service request as a handler sees it, and ADR-32's error headers.

``Request.respond_error`` answers with the ``Nats-Service-Error`` and
``Nats-Service-Error-Code`` headers and records the error for the
endpoint's ``num_errors`` / ``last_error`` (as nats.go does: ``"<code>:<description>"``).
``ServiceError.check(msg)`` is the other side: it raises when a reply
carries those headers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient._threads import log
from jsclient.micro._types import ERROR_CODE_HEADER, ERROR_HEADER

if TYPE_CHECKING:
    from jsclient.msg import Msg
    from jsclient.protocol.headers import HeadersIn

__all__ = ["Request", "ServiceError"]


class ServiceError(errors.Error):
    """An error reply of a service: ``code`` and ``description`` from its headers."""

    default_message = "nats: service error"

    def __init__(self, code: int, description: str) -> None:
        errors.Error.__init__(self, f"nats: service error {code}: {description}")
        self.code = code
        self.description = description

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.description))

    @classmethod
    def check(cls, msg: Msg) -> Msg:
        """``msg`` itself, or raise :class:`ServiceError` when it carries ADR-32's error headers."""
        if msg._hdr is None:
            return msg
        hdrs = msg.headers or {}
        description = hdrs.get(ERROR_HEADER)
        code_text = hdrs.get(ERROR_CODE_HEADER)
        if description is None and code_text is None:
            return msg
        code_text = (code_text or "").strip()
        # ASCII digits only (int() would take " 5", "+5", "1_0" and other scripts' digits).
        code = int(code_text) if code_text.isascii() and code_text.isdigit() else 0
        raise cls(code, description or "")


def _one_line(text: str) -> str:
    """A header value cannot hold a line break."""
    return " ".join(text.splitlines()) if ("\r" in text or "\n" in text) else text


class Request:
    """A request to an endpoint, handed to its handler on a handler thread.

    It records what its endpoint's statistics need (an error, whether it was
    answered); the endpoint counts it, in one step, when the handler returns.
    A reply that cannot be sent (larger than the server's ``max_payload``, a
    header that cannot be encoded) is answered with a 500 error reply instead,
    so the requester never waits out its timeout, and the error is raised to
    the handler.
    """

    __slots__ = ("_error", "_responded", "msg")

    def __init__(self, msg: Msg) -> None:
        self.msg = msg
        self._responded = False
        self._error: str | None = None  # "code:description", for the endpoint's stats

    def __repr__(self) -> str:
        return f"<Request subject={self.subject!r} reply={self.reply!r}>"

    @property
    def subject(self) -> str:
        """The subject the request was sent to."""
        return self.msg.subject

    @property
    def reply(self) -> str:
        """The requester's reply subject (empty for a request sent without one)."""
        return self.msg.reply

    @property
    def data(self) -> bytes:
        """The request's payload."""
        data: bytes = self.msg.data
        return data

    @property
    def headers(self) -> dict[str, str] | None:
        """Header names to their first value (``msg.header_values`` has them all)."""
        return self.msg.headers

    def respond(self, data: bytes = b"", headers: HeadersIn | None = None) -> None:
        """Reply to the requester.

        A reply that cannot be sent raises its error (``MaxPayloadError``,
        ``BadHeaderError``, ``TypeError``) after a 500 error reply naming it
        went out instead.
        """
        try:
            self.msg.respond(data, headers=headers)  # type: ignore[arg-type]
        except (errors.MaxPayloadError, errors.BadHeaderError, TypeError, ValueError) as exc:
            self._answer_500(exc)
            raise
        self._responded = True

    def _answer_500(self, exc: BaseException) -> None:
        """The reply could not be sent: answer 500 with the reason (a small reply,
        no user headers), record the error, and count the request as answered."""
        description = _one_line(f"{type(exc).__name__}: {exc}")[:1024]
        self._error = f"500:{description}"
        self._responded = True
        try:
            self.msg.respond(b"", headers={ERROR_HEADER: description, ERROR_CODE_HEADER: "500"})
        except errors.Error as again:  # the connection closed, or worse: nothing to answer on
            log.warning("jsclient: could not answer 500 for an unsendable reply: %s", again)

    def respond_error(
        self,
        code: int,
        description: str,
        data: bytes = b"",
        headers: HeadersIn | None = None,
    ) -> None:
        """Reply with ADR-32's error headers; counted in the endpoint's ``num_errors``."""
        if isinstance(code, bool) or not isinstance(code, int):
            raise TypeError(f"nats: service error code must be an int, got {code!r}")
        if not description:
            raise ValueError("nats: a service error needs a description")
        description = _one_line(description)
        hdrs: dict[str, Any] = dict(headers) if headers else {}
        hdrs[ERROR_HEADER] = description
        hdrs[ERROR_CODE_HEADER] = str(code)
        self._error = f"{code}:{description}"
        self.respond(data, hdrs)
