"""Dialling a server: TCP, TLS, INFO, CONNECT, and the first PONG.

Runs in the thread that connects (the caller for the first connect, the
reader thread for a reconnect). Every wait is bounded by ``connect_timeout``.
Frames the server sends after its PONG in the same read are returned, so
nothing is lost between the handshake and the reader thread.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from jsclient import _impl, errors
from jsclient._io.auth import connect_options
from jsclient._io.options import Options
from jsclient._io.servers import ServerAddr
from jsclient._threads import log
from jsclient.protocol import commands

_parser_mod = _impl.parser
OP_PONG = _parser_mod.OP_PONG
OP_ERR = _parser_mod.OP_ERR
OP_INFO = _parser_mod.OP_INFO


class Dialled:
    """A socket that completed the handshake, with what came with it."""

    __slots__ = ("info", "leftovers", "parser", "sock")

    def __init__(
        self, sock: socket.socket, parser: Any, info: dict[str, Any], leftovers: list[Any]
    ) -> None:
        self.sock = sock
        self.parser = parser
        self.info = info
        self.leftovers = leftovers


def dial(
    srv: ServerAddr,
    opts: Options,
    make_socket: Callable[[tuple[str, int], float], socket.socket] = socket.create_connection,
) -> Dialled:
    """Open a socket to ``srv``, read INFO, upgrade to TLS if needed, CONNECT + PING, await PONG."""
    deadline = time.monotonic() + opts.connect_timeout
    sock: socket.socket = make_socket((srv.host, srv.port), opts.connect_timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        parser = _parser_mod.Parser(max_control_line=opts.max_control_line)
        tls_ctx = opts.tls
        if srv.scheme == "tls" and tls_ctx is None:
            tls_ctx = ssl.create_default_context()
        hostname = opts.tls_hostname or srv.host
        if opts.tls_handshake_first:
            if tls_ctx is None:
                tls_ctx = ssl.create_default_context()
            sock = _wrap(sock, tls_ctx, hostname)
        pending: list[tuple[Any, ...]] = []
        info_ev = _read_until(sock, parser, pending, (OP_INFO,), deadline)
        info = parse_info(info_ev[1])
        if info.get("tls_required") and not isinstance(sock, ssl.SSLSocket):
            if tls_ctx is None:
                tls_ctx = ssl.create_default_context()
            sock = _wrap(sock, tls_ctx, hostname)
        elif tls_ctx is not None and not isinstance(sock, ssl.SSLSocket):
            if not info.get("tls_available") and not info.get("tls_required"):
                raise errors.SecureConnRequiredError(
                    "nats: TLS was configured but the server does not offer it"
                )
            sock = _wrap(sock, tls_ctx, hostname)
        options = connect_options(opts, srv, info, isinstance(sock, ssl.SSLSocket))
        sock.sendall(commands.connect(options) + commands.PING)
        _read_until(sock, parser, pending, (OP_PONG,), deadline)
    except BaseException:
        close_quietly(sock)
        raise
    sock.settimeout(None)
    mp = info.get("max_payload")
    if mp is not None:
        parser.max_payload = max(mp, parser.max_payload)
    return Dialled(sock, parser, info, pending)


def _wrap(sock: socket.socket, ctx: ssl.SSLContext, hostname: str) -> socket.socket:
    try:
        return ctx.wrap_socket(sock, server_hostname=hostname if ctx.check_hostname else None)
    except (ssl.SSLError, OSError) as exc:
        raise errors.SecureConnFailedError(f"nats: TLS handshake failed: {exc}") from exc


def _read_until(
    sock: socket.socket,
    parser: Any,
    pending: list[tuple[Any, ...]],
    ops: tuple[int, ...],
    deadline: float,
) -> tuple[Any, ...]:
    """Read frames during the handshake until one of ``ops``; -ERR raises."""
    while True:
        for i, ev in enumerate(pending):
            if ev[0] == OP_ERR:
                del pending[: i + 1]
                raise err_to_exception(ev[1])
            if ev[0] in ops:
                del pending[: i + 1]
                return ev
        left = deadline - time.monotonic()
        if left <= 0:
            raise errors.TimeoutError("nats: timeout during connection handshake")
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            raise errors.TimeoutError("nats: timeout during connection handshake") from None
        if not data:
            raise errors.UnexpectedEOF("nats: server closed the connection during handshake")
        pending.extend(parser.feed(data))


def parse_info(text: str) -> dict[str, Any]:
    """Decode an INFO payload; anything but a JSON object with sane types is a ProtocolError."""
    try:
        info = json.loads(text)
    except ValueError as exc:
        raise errors.ProtocolError(f"nats: protocol error: invalid INFO JSON: {exc}") from None
    if not isinstance(info, dict):
        raise errors.ProtocolError("nats: protocol error: INFO is not a JSON object")
    mp = info.get("max_payload")
    if mp is not None and (type(mp) is not int or mp <= 0):
        raise errors.ProtocolError(f"nats: protocol error: invalid max_payload {mp!r} in INFO")
    urls = info.get("connect_urls")
    if urls is not None and not (isinstance(urls, list) and all(isinstance(u, str) for u in urls)):
        raise errors.ProtocolError("nats: protocol error: invalid connect_urls in INFO")
    return info


_PERMISSION = re.compile(r'permissions violation for (\w+) to "([^"]*)"', re.IGNORECASE)


def err_to_exception(text: str) -> errors.Error:
    """The typed error for a server ``-ERR`` text."""
    low = text.lower()
    if "authorization violation" in low or "authentication" in low or "user authentication" in low:
        return errors.AuthorizationError(f"nats: {text}")
    if "stale connection" in low:
        return errors.StaleConnectionError(f"nats: {text}")
    if "maximum payload" in low:
        return errors.MaxPayloadError(f"nats: {text}")
    if low.startswith("permissions violation"):
        # Permissions Violation for Publish to "subject" (or Subscription to
        # "subject", maybe followed by: using queue "q")
        m = _PERMISSION.match(text)
        op = m.group(1).lower() if m else ""
        subject = m.group(2) if m else ""
        return errors.PermissionViolationError(f"nats: {text}", op, subject)
    return errors.Error(f"nats: {text}")


def close_quietly(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        log.debug("jsclient: error closing socket", exc_info=True)
