"""Connection errors: connect, auth, TLS, protocol, state, timeouts, slow consumers, fork."""

from __future__ import annotations

import nats.errors as _ne

from jsclient.errors._base import Error


class TimeoutError(Error, _ne.TimeoutError):
    """A blocking call did not complete within its timeout."""

    default_message = "nats: timeout"


class FlushTimeoutError(TimeoutError, _ne.FlushTimeoutError):
    """``flush()`` did not see the server's PONG in time."""

    default_message = "nats: flush timeout"


class DrainTimeoutError(TimeoutError, _ne.DrainTimeoutError):
    """``drain()`` did not finish in time."""

    default_message = "nats: draining connection timed out"


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


class AuthorizationError(Error, _ne.AuthorizationError):
    """The server refused the credentials or a permission."""

    default_message = "nats: authorization failed"


class InvalidUserCredentialsError(Error, _ne.InvalidUserCredentialsError):
    """The creds file or nkey seed cannot be used."""

    default_message = "nats: invalid user credentials"


class InvalidURLError(Error, ValueError):
    """A server URL that cannot be used: a scheme other than ``nats://`` or
    ``tls://`` (named in the message), no host, a bad port, or a URL written
    wrong (``nats:/host``). Raised by ``connect()`` before anything is dialled;
    also a ``ValueError``."""

    default_message = "nats: invalid server URL"


class MissingExtraError(Error, ImportError):
    """A feature needs an optional package that is not installed; the message names
    the extra that installs it (``pip install 'jsclient[nkeys]'`` for nkey and creds
    authentication). Also an ``ImportError``."""

    default_message = "nats: an optional package is missing"


class NoServersError(Error, _ne.NoServersError):
    """No server in the pool could be reached."""

    default_message = "nats: no servers available for connection"


class SecureConnRequiredError(Error, _ne.SecureConnRequiredError):
    """The server requires TLS but none was configured and none could be made."""

    default_message = "nats: secure connection required"


class SecureConnFailedError(Error, _ne.SecureConnFailedError):
    """The TLS handshake failed."""

    default_message = "nats: secure connection failed"


class ProtocolError(Error, _ne.ProtocolError):
    """The server sent bytes that are not valid NATS protocol."""

    default_message = "nats: protocol error"


class ConnectionDrainingError(Error, _ne.ConnectionDrainingError):
    """The connection is draining and accepts no new subscriptions."""

    default_message = "nats: connection draining"


class ConnectionReconnectingError(Error, _ne.ConnectionReconnectingError):
    """The call needs a live connection and the client is reconnecting."""

    default_message = "nats: connection reconnecting"


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


class ContextError(Error):
    """A NATS CLI context (ADR-21) cannot be used: unknown or invalid name, nothing
    selected, an unreadable file, a key of the wrong type or a key jsclient does
    not support (``nsc``, the Windows certificate store, ``socks_proxy``). The
    message names the file or the key."""

    default_message = "nats: invalid context"


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
