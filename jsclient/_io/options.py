"""Connection options, the connection's states, and the check that it takes new work."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jsclient import errors

# Connection states (compared by identity: ``status is CONNECTED``).
CONNECTING = "CONNECTING"
CONNECTED = "CONNECTED"
RECONNECTING = "RECONNECTING"
DRAINING = "DRAINING"
CLOSED = "CLOSED"
# A copy of the connection in a child process after os.fork(): it must never
# touch the socket it shares with the parent (see jsclient/_fork.py).
FORKED = "FORKED"


@dataclass
class Options:
    """Connection options (see :func:`jsclient.connect`)."""

    servers: list[str]
    name: str | None = None
    user: str | None = None
    password: str | None = None
    token: str | None = None
    creds: str | None = None
    nkey_seed: str | None = None
    tls: ssl.SSLContext | None = None
    tls_hostname: str | None = None
    tls_handshake_first: bool = False
    connect_timeout: float = 2.0
    reconnect: bool = True
    max_reconnect_attempts: int = 60
    reconnect_wait: float = 2.0
    reconnect_jitter: float = 0.1
    reconnect_jitter_tls: float = 1.0
    reconnect_buffer_size: int = 8 * 1024 * 1024
    ping_interval: float = 120.0
    max_pings_outstanding: int = 2
    no_echo: bool = False
    inbox_prefix: str = "_INBOX"
    dont_randomize: bool = False
    ignore_discovered_servers: bool = False
    max_control_line: int = 4096
    #: Bytes the write queue may hold while connected; a publish that would go
    #: beyond writes the queue itself or waits for the flusher (see Writer).
    pending_size: int = 4 * 1024 * 1024
    #: How long such a publish waits for room before FlushTimeoutError.
    flush_timeout: float = 10.0
    error_cb: Callable[[Exception], Any] | None = None
    disconnected_cb: Callable[[], Any] | None = None
    reconnected_cb: Callable[[], Any] | None = None
    closed_cb: Callable[[], Any] | None = None
    lame_duck_cb: Callable[[], Any] | None = None
    discovered_server_cb: Callable[[], Any] | None = None
    #: ADR-40: ``(servers, info) -> url`` or ``(url, delay_seconds)``: the server
    #: to dial next, asked before every reconnect attempt.
    reconnect_to_server_cb: Callable[[list[str], dict[str, Any] | None], Any] | None = None
    #: ADR-40: connect() returns at once and the client keeps dialling in the
    #: background; what is sent meanwhile waits in the reconnect buffer.
    retry_on_failed_connect: bool = False
    #: A user JWT sent in CONNECT, signed with ``nkey_seed`` when one is given
    #: (ADR-21 contexts' ``user_jwt``; a creds file holds both instead).
    user_jwt: str | None = None
    #: ``nc.jetstream()``'s domain / API prefix when the caller gives neither
    #: (set from an ADR-21 context's ``jetstream_domain`` / ``jetstream_api_prefix``).
    jetstream_domain: str | None = None
    jetstream_api_prefix: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def check_open(conn: Any) -> None:
    """Raise unless ``conn`` takes new work: closed, draining, or a forked child's copy."""
    conn.check_owner()
    status = conn.status
    if status is CLOSED:
        raise errors.ConnectionClosedError()
    if status is DRAINING:
        raise errors.ConnectionDrainingError()
