"""The I/O engine of one client: socket, TLS, auth, handshake, reader, flusher, reconnect.

Threads:

- reader (``jsclient-reader``): ``recv_into`` a large buffer, parse, route by
  sid. It also performs reconnects. It runs no user code.
- flusher (``jsclient-flusher``): writers append encoded frames to the write
  queue (:mod:`jsclient.protocol.writer` and its Cython twin, whose calls are
  each atomic under the GIL, so the hot path takes no lock) and set
  ``_wevent`` when the flusher is idle; the flusher takes every chunk queued
  (anything appended meanwhile stays), joins them and writes them with one
  ``sendall``, so many publishes share one syscall and the flusher does no
  per-message Python work. Frames with large payloads go out by gather write
  instead, without the join's copy. A ``bytearray`` buffer was measured too:
  once its front is cut, every growth step re-copies it, about 8 bytes copied
  per byte written at the multi-MB sizes a busy flusher takes, which doubled
  the cost of a 1 KiB publish.

  Requests write inline: a thread that is about to wait for a reply anyway
  takes the write token with a *non-blocking* try and, if it gets it, writes
  the queue itself, saving a thread wake-up per round trip. The token only
  orders writers (the flusher and such a caller); no caller ever blocks on it
  waiting for another thread's I/O, and no other lock is held across I/O.

  Wake-up protocol (no lost wake-ups): the flusher clears the event and the
  queue's ``kicked`` flag *before* it looks at the queue; a writer appends
  *before* it reads ``kicked``. Either the flusher sees the new item, or the
  writer sees ``kicked`` false and sets the event.

TLS sockets are not safe for a concurrent read and write from two threads
(OpenSSL forbids it), so over TLS the reader thread also does the writing: it
waits on the socket and a wake-up socket pair with ``select`` and the flusher
thread is not started.
"""

from __future__ import annotations

import base64
import json
import os
import random
import select
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from jsclient import _impl, errors
from jsclient._threads import log
from jsclient._version import __version__
from jsclient.protocol import commands

_parser_mod = _impl.parser
_writer = _impl.writer
_QUEUED = _writer.QUEUED
_KICK = _writer.KICK
_FULL = _writer.FULL
_WRITE = _writer.WRITE
OP_MSG = _parser_mod.OP_MSG
OP_PING = _parser_mod.OP_PING
OP_PONG = _parser_mod.OP_PONG
OP_OK = _parser_mod.OP_OK
OP_ERR = _parser_mod.OP_ERR
OP_INFO = _parser_mod.OP_INFO

DEFAULT_PORT = 4222
READ_BUFFER = 256 * 1024
#: Payloads from this size on are written with a gather write (``sendmsg``), not
#: joined with the frames around them: one copy (into the frame) on their way
#: to the socket instead of two.
GATHER_MIN = _impl.writer.GATHER_MIN
_HAS_SENDMSG = hasattr(socket.socket, "sendmsg")
#: Inline writers (a caller that writes the queue itself instead of waking the
#: flusher) need a send that never blocks; where there is none, only the
#: flusher writes.
_DONTWAIT: int = getattr(socket, "MSG_DONTWAIT", 0)
_INLINE = _DONTWAIT != 0
#: Requesters may read the socket themselves (needs non-blocking receives and poll()).
_LEADER_FOLLOWER = _INLINE and hasattr(select, "poll")
#: Who reads the socket (see Connection "reading").
_READER = "reader"
_LEADER = "leader"
_LINGER = "linger"
#: How long the reading role waits for the next request before the reader takes it back.
LINGER = 0.001
try:
    _IOV_MAX = max(16, min(1024, os.sysconf("SC_IOV_MAX")))
except (AttributeError, ValueError, OSError):
    _IOV_MAX = 1024
_FLUSH_WAIT = 1.0

# Connection states.
CONNECTING = "CONNECTING"
CONNECTED = "CONNECTED"
RECONNECTING = "RECONNECTING"
DRAINING = "DRAINING"
CLOSED = "CLOSED"
# A copy of the connection in a child process after os.fork(): it must never
# touch the socket it shares with the parent (see jsclient/_fork.py).
FORKED = "FORKED"


@dataclass
class ServerAddr:
    """One entry of the server pool."""

    host: str
    port: int
    scheme: str = "nats"
    user: str | None = None
    password: str | None = None
    discovered: bool = False
    attempts: int = 0  # failed attempts since the last success
    last_attempt: float = 0.0
    did_connect: bool = False
    auth_failures: int = 0

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @classmethod
    def parse(cls, url: str, discovered: bool = False) -> ServerAddr:
        text = url.strip()
        if "://" not in text:
            text = "nats://" + text
        u = urlparse(text)
        if u.scheme not in ("nats", "tls"):
            raise errors.Error(f"nats: unsupported URL scheme in {url!r}")
        host = u.hostname or "127.0.0.1"
        return cls(
            host=host,
            port=u.port or DEFAULT_PORT,
            scheme=u.scheme,
            user=unquote(u.username) if u.username is not None else None,
            password=unquote(u.password) if u.password is not None else None,
            discovered=discovered,
        )


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
    #: beyond writes the queue itself or waits for the flusher (see send()).
    pending_size: int = 4 * 1024 * 1024
    #: How long such a publish waits for room before FlushTimeoutError.
    flush_timeout: float = 10.0
    error_cb: Callable[[Exception], Any] | None = None
    disconnected_cb: Callable[[], Any] | None = None
    reconnected_cb: Callable[[], Any] | None = None
    closed_cb: Callable[[], Any] | None = None
    lame_duck_cb: Callable[[], Any] | None = None
    discovered_server_cb: Callable[[], Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class _Pong:
    """A flush() waiting for its PONG: a pre-acquired lock released by the reader."""

    __slots__ = ("lock", "ok")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.ok = False


def _read_creds(path: str) -> tuple[bytes, bytes]:
    """(jwt, seed) from a NATS creds file."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise errors.InvalidUserCredentialsError(f"nats: cannot read creds file: {exc}") from exc
    jwt = seed = None
    lines = [ln.strip() for ln in text.splitlines()]
    for i, line in enumerate(lines):
        if line.startswith(b"-----BEGIN NATS USER JWT") and i + 1 < len(lines):
            jwt = lines[i + 1]
        elif line.startswith(b"-----BEGIN USER NKEY SEED") and i + 1 < len(lines):
            seed = lines[i + 1]
    if not jwt or not seed:
        raise errors.InvalidUserCredentialsError("nats: creds file has no JWT or no seed")
    return jwt, seed


def _sign_nonce(seed: bytes, nonce: str) -> tuple[str, str]:
    """(public nkey, base64url signature of the nonce) for an nkey seed."""
    import nkeys

    try:
        kp = nkeys.from_seed(bytearray(seed))
        sig = kp.sign(nonce.encode())
        public = kp.public_key.decode()
    except Exception as exc:
        raise errors.InvalidUserCredentialsError(f"nats: invalid nkey seed: {exc}") from exc
    return public, base64.urlsafe_b64encode(sig).rstrip(b"=").decode()


class Connection:
    """Socket-level engine. ``owner`` receives frames through ``_route_events``."""

    def __init__(self, owner: Any, opts: Options) -> None:
        self._owner = owner
        self.opts = opts
        self.status = CONNECTING
        self.pid = os.getpid()  # the process that owns the socket
        self.server_info: dict[str, Any] = {}
        self.connected_url: str | None = None
        self.reconnects = 0
        self._pool: list[ServerAddr] = [ServerAddr.parse(u) for u in opts.servers]
        if not self._pool:
            raise errors.NoServersError("nats: no servers given")
        if not opts.dont_randomize and len(self._pool) > 1:
            random.shuffle(self._pool)
        self._current: ServerAddr | None = None
        self._sock: socket.socket | None = None
        self._is_tls = False
        self._parser = _parser_mod.Parser(max_control_line=opts.max_control_line)
        # write side
        self._wlock = threading.Lock()  # state changes and PING/pong pairing only
        self._wq = _writer.WriteQueue(max(1, opts.pending_size))
        self._room = threading.Condition(threading.Lock())
        self._room_waiters = 0
        self._held = 0  # bytes queued while disconnected (reconnect buffer limit)
        self._wevent = threading.Event()
        self._wtoken = threading.Lock()  # held by whoever is writing to the socket
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        # read side: who reads the socket (see "reading" below)
        self._rcond = threading.Condition(threading.Lock())
        self._rstate = _READER
        self._linger_since = 0.0
        self._lf_waiters: list[Any] = []  # replies waited for while another thread reads
        self._rbuf = bytearray(READ_BUFFER)
        self._rview = memoryview(self._rbuf)
        self._lead_poller: Any = None  # select.poll on the socket, for leading requesters
        self._lead_sock: socket.socket | None = None
        self._poller: Any = None  # select.poll on (socket, wake) for the reader thread
        self._poll_sock: socket.socket | None = None
        # ping/pong
        self._pongs: deque[_Pong | None] = deque()
        self._pings_out = 0
        self._connected_event = threading.Event()
        self._closing = threading.Event()
        self._reader: threading.Thread | None = None
        self._flusher: threading.Thread | None = None
        self._last_error: BaseException | None = None

    # -- establishing ------------------------------------------------------

    def connect(self) -> None:
        """Initial connect in the caller's thread: try each server once."""
        last: BaseException | None = None
        for srv in list(self._pool):
            try:
                sock, leftovers = self._handshake(srv)
            except errors.AuthorizationError:
                raise
            except (OSError, errors.Error) as exc:
                last = exc
                srv.attempts += 1
                srv.last_attempt = time.monotonic()
                continue
            self._install(srv, sock, resubscribe=b"")
            self._start_threads()
            if leftovers:
                self._owner._route_events(leftovers)
            return
        if isinstance(last, errors.Error) and not isinstance(last, errors.TimeoutError):
            raise last
        raise errors.NoServersError(f"nats: could not connect to any server: {last}") from last

    def _start_threads(self) -> None:
        self._reader = threading.Thread(target=self._read_loop, name="jsclient-reader", daemon=True)
        self._reader.start()
        if not self._is_tls:
            self._flusher = threading.Thread(
                target=self._flush_loop, name="jsclient-flusher", daemon=True
            )
            self._flusher.start()

    def _handshake(self, srv: ServerAddr) -> tuple[socket.socket, list[tuple[Any, ...]]]:
        """Open a socket, read INFO, upgrade to TLS if needed, CONNECT + PING, await PONG."""
        opts = self.opts
        deadline = time.monotonic() + opts.connect_timeout
        sock: socket.socket = socket.create_connection(
            (srv.host, srv.port), timeout=opts.connect_timeout
        )
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
                sock = self._wrap(sock, tls_ctx, hostname)
            pending: list[tuple[Any, ...]] = []
            info_ev = self._read_until(sock, parser, pending, (OP_INFO,), deadline)
            info = parse_info(info_ev[1])
            if info.get("tls_required") and not isinstance(sock, ssl.SSLSocket):
                if tls_ctx is None:
                    tls_ctx = ssl.create_default_context()
                sock = self._wrap(sock, tls_ctx, hostname)
            elif tls_ctx is not None and not isinstance(sock, ssl.SSLSocket):
                if not info.get("tls_available") and not info.get("tls_required"):
                    raise errors.SecureConnRequiredError(
                        "nats: TLS was configured but the server does not offer it"
                    )
                sock = self._wrap(sock, tls_ctx, hostname)
            options = self._connect_options(srv, info, isinstance(sock, ssl.SSLSocket))
            sock.sendall(commands.connect(options) + commands.PING)
            self._read_until(sock, parser, pending, (OP_PONG,), deadline)
        except BaseException:
            _close_quietly(sock)
            raise
        sock.settimeout(None)
        self.server_info = info
        self.max_payload = info.get("max_payload", self.max_payload)
        self._parser = parser
        parser.max_payload = max(self.max_payload, parser.max_payload)
        self._learn_servers(info)
        return sock, pending

    def _wrap(self, sock: socket.socket, ctx: ssl.SSLContext, hostname: str) -> socket.socket:
        try:
            return ctx.wrap_socket(sock, server_hostname=hostname if ctx.check_hostname else None)
        except (ssl.SSLError, OSError) as exc:
            raise errors.SecureConnFailedError(f"nats: TLS handshake failed: {exc}") from exc

    def _read_until(
        self,
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

    def _connect_options(self, srv: ServerAddr, info: dict[str, Any], tls: bool) -> dict[str, Any]:
        opts = self.opts
        out: dict[str, Any] = {
            "verbose": False,
            "pedantic": False,
            "lang": "python3-jsclient",
            "version": __version__,
            "protocol": 1,
            "headers": True,
            "no_responders": True,
            "echo": not opts.no_echo,
            "tls_required": tls,
        }
        if opts.name:
            out["name"] = opts.name
        user = srv.user or opts.user
        password = srv.password or opts.password
        if opts.creds:
            jwt, seed = _read_creds(opts.creds)
            out["jwt"] = jwt.decode()
            out["sig"] = _sign_nonce(seed, info.get("nonce", ""))[1]
        elif opts.nkey_seed:
            public, sig = _sign_nonce(_seed_bytes(opts.nkey_seed), info.get("nonce", ""))
            out["nkey"] = public
            out["sig"] = sig
        if opts.token:
            out["auth_token"] = opts.token
        elif user and password is None and not opts.creds and not opts.nkey_seed:
            out["auth_token"] = user  # nats://token@host form
        elif user:
            out["user"] = user
            out["pass"] = password or ""
        return out

    def _learn_servers(self, info: dict[str, Any]) -> None:
        if self.opts.ignore_discovered_servers:
            return
        known = {(s.host, s.port) for s in self._pool}
        added = False
        for url in info.get("connect_urls") or []:
            try:
                srv = ServerAddr.parse(url, discovered=True)
            except errors.Error:
                continue
            if (srv.host, srv.port) not in known:
                if self._current is not None and self._current.scheme == "tls":
                    srv.scheme = "tls"
                self._pool.append(srv)
                known.add((srv.host, srv.port))
                added = True
        if added and not self.opts.dont_randomize:
            head, rest = self._pool[:1], self._pool[1:]
            random.shuffle(rest)
            self._pool = head + rest
        if added and self.opts.discovered_server_cb is not None:
            self._owner._run_callback(self.opts.discovered_server_cb)

    def _install(self, srv: ServerAddr, sock: socket.socket, resubscribe: bytes) -> None:
        """Make ``sock`` the live socket; resubscriptions go before anything buffered."""
        srv.attempts = 0
        srv.auth_failures = 0
        srv.did_connect = True
        self._current = srv
        self.connected_url = srv.url
        self._is_tls = isinstance(sock, ssl.SSLSocket)
        if self._wake_r is None:
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
        self._pings_out = 0
        with self._wlock:
            self._held = 0
            if resubscribe:
                self._wq.push_front(resubscribe)
            self._sock = sock
            self._set_status(CONNECTED)
        self._connected_event.set()
        self._wq.kicked = True
        self._kick()

    # -- writing -----------------------------------------------------------
    #
    # The queue is bounded while connected: a writer that would take it past
    # ``pending_size`` first makes room (``_make_room``): it writes the queue
    # itself when no other thread is writing, else it waits until the writer
    # has taken the queue (at most ``flush_timeout``, then FlushTimeoutError
    # and nothing of this message is queued). So a publisher can never be more
    # than one queue ahead of the socket: at most ``pending_size`` bytes wait
    # here, besides the batch being written. (Several threads publishing at
    # once may each add one message past the limit.) While disconnected the
    # reconnect buffer limit applies instead.

    @property
    def max_payload(self) -> int:
        """The server's max_payload (kept on the write queue for its publish fast path)."""
        return int(self._wq.max_payload)

    @max_payload.setter
    def max_payload(self, value: int) -> None:
        self._wq.max_payload = value

    @property
    def out_msgs(self) -> int:
        return int(self._wq.out_msgs)

    @property
    def out_bytes(self) -> int:
        return int(self._wq.out_bytes)

    def _set_status(self, status: str) -> None:
        self.status = status
        # The queue takes frames on its fast path only while connected.
        self._wq.open = status is CONNECTED or status is DRAINING

    def queued(self, rc: int) -> bool:
        """Act on what a write-queue push returned: wake the flusher or write now.

        False when the queue refused the frame (full or closed, too big,
        unknown subject): the caller takes its slow path.
        """
        if rc == _QUEUED:
            return True
        if rc == _KICK:
            self._kick()
            return True
        if rc == _WRITE:
            self._write_now()
            return True
        return False

    def send(self, data: bytes) -> None:
        """Queue bytes for the socket (any thread). Raises when closed or the buffer is full."""
        rc = self._wq.push(data)
        if rc != _QUEUED and not self.queued(rc):
            self._send_slow(data, 0, 0)

    def send_counted(self, data: bytes, payload_len: int, msgs: int = 1) -> None:
        """``send`` for ``msgs`` publishes: also counts out_msgs/out_bytes."""
        rc = self._wq.push(data, payload_len, msgs)
        if rc != _QUEUED and not self.queued(rc):  # the common case needs no call
            self._send_slow(data, payload_len, msgs)

    def _send_slow(self, data: bytes, payload_len: int, msgs: int) -> None:
        """The queue refused ``data``: disconnected, closed, or full."""
        status = self.status
        if status is not CONNECTED and status is not DRAINING:
            self._check_buffer(status, len(data))
        else:
            self._make_room(len(data))
        self.queued(self._wq.push_always(data, payload_len, msgs))

    def send_inline(self, data: bytes, payload_len: int, msgs: int = 1) -> None:
        """``send_counted``, but written from this thread if nobody else is writing.

        For callers about to block on a reply (request/reply) or writing a
        batch: saves waking the flusher (it is only kicked when the write
        token is busy, over TLS, or when bytes are left behind).
        """
        wq = self._wq
        rc = wq.push(data, payload_len, msgs)
        if rc == _FULL:
            self._send_slow(data, payload_len, msgs)
            return
        if self._is_tls or not _INLINE or not self._wtoken.acquire(False):
            if rc == _KICK:
                self._kick()
            elif rc == _WRITE and not wq.kicked:
                wq.kicked = True
                self._kick()
            return
        try:
            self._write_pending(wait=False)
        finally:
            self._wtoken.release()
        if rc == _KICK:
            wq.kicked = False  # our claim to wake the flusher: written here instead
        # Cleared before looking, as the flusher does: a frame queued meanwhile
        # is seen here, or its writer saw the flag clear and woke the flusher.
        if len(wq) and not wq.kicked:
            wq.kicked = True
            self._kick()

    def _write_now(self) -> None:
        """The queue passed ``write_at``: write it from this thread unless another is writing.

        A thread publishing in a loop so writes in batches of that size, as one
        thread on a plain socket would, instead of handing each to the flusher.
        """
        if not self._is_tls and _INLINE and self._wtoken.acquire(False):
            try:
                self._write_pending(wait=False)
            finally:
                self._wtoken.release()
        elif not self._wq.kicked:
            self._wq.kicked = True
            self._kick()

    def _make_room(self, n: int) -> None:
        """The queue is full: write it from this thread, or wait until it was taken."""
        wq = self._wq
        deadline: float | None = None
        while wq.nbytes and wq.nbytes + n > wq.limit:
            status = self.status
            if status is not CONNECTED and status is not DRAINING:
                self._check_buffer(status, n)  # disconnected meanwhile: the reconnect buffer
                return
            if not self._is_tls and _INLINE and self._wtoken.acquire(False):
                try:
                    written = self._write_pending(wait=False)
                finally:
                    self._wtoken.release()
                if written:
                    continue
                # The socket is full: the flusher waits on it; this thread waits for room.
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.opts.flush_timeout
            elif now >= deadline:
                raise errors.FlushTimeoutError(
                    f"nats: the write queue ({wq.nbytes} bytes, pending_size "
                    f"{wq.limit}) was not written within flush_timeout "
                    f"{self.opts.flush_timeout} s; this message was not sent"
                )
            wq.kicked = True
            self._kick()
            with self._room:
                # Counted before the check, and takers subtract before they look
                # at the count: either they see this waiter or it sees the room.
                self._room_waiters += 1
                try:
                    if wq.nbytes and wq.nbytes + n > wq.limit:
                        self._room.wait(min(deadline - now, _FLUSH_WAIT))
                finally:
                    self._room_waiters -= 1

    def _check_buffer(self, status: str, size: int) -> None:
        if status is CLOSED:
            raise errors.ConnectionClosedError()
        if status is FORKED:
            raise self.forked_error()
        if self._held + size > self.opts.reconnect_buffer_size:
            raise errors.OutboundBufferLimitError()
        self._held += size

    def _kick(self) -> None:
        if self._is_tls:
            w = self._wake_w
            if w is not None:
                try:
                    w.send(b"\0")
                except OSError:
                    pass
        else:
            self._wevent.set()

    def _queue(self, data: bytes) -> None:
        """Queue bytes that bypass the limits (PING); the caller wakes the writer."""
        self._wq.push_always(data)

    def _take_chunks(self) -> tuple[list[bytes], int]:
        """Take everything queued (writers may keep appending meanwhile) and its size."""
        taken: tuple[list[bytes], int] = self._wq.take()
        if taken[1] and self._room_waiters:
            with self._room:
                self._room.notify_all()
        return taken

    def _take_pending(self) -> bytes:
        """Everything queued as one bytes object (the TLS writer's form)."""
        chunks, _ = self._take_chunks()
        if not chunks:
            return b""
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _write_pending(self, wait: bool = True) -> bool:
        """Write what is queued to the socket; the caller holds the write token.

        Only the flusher waits for the socket (``wait``): a caller writing
        inline sends what the socket takes now, puts the rest back in front of
        the queue and kicks the flusher, so no caller ever blocks on a full
        socket. Returns False when bytes were left for the flusher.
        """
        sock = self._sock
        if sock is None:
            return True
        big = self._wq.big  # read before take() clears it
        chunks, _ = self._take_chunks()
        if not chunks:
            return True
        if len(chunks) == 1:
            bufs: list[bytes | memoryview] = [chunks[0]]
        elif big and _HAS_SENDMSG:
            # Large frames go to the kernel as they are (no join copy).
            bufs = _gather(chunks)
        else:
            bufs = [b"".join(chunks)]
        try:
            if wait and len(bufs) == 1:
                sock.sendall(bufs[0])
                return True
            left = _send_bufs(sock, bufs, 0 if wait else _DONTWAIT)
        except OSError as exc:
            self._put_back(b"".join(bufs))  # at-least-once across a reconnect
            self._abort_socket(sock, exc)
            return True
        if not left:
            return True
        # Back in front, in order; only a partly written buffer is copied.
        for buf in reversed(left):
            self._put_back(buf if type(buf) is bytes else bytes(buf))
        self._wq.kicked = True
        self._kick()
        return False

    def _put_back(self, data: bytes) -> None:
        """A write failed: keep its bytes in front so they go out after reconnect."""
        self._wq.push_front(data)

    def _flush_loop(self) -> None:
        ev = self._wevent
        wq = self._wq
        while True:
            ev.clear()
            wq.kicked = False
            sock = self._sock
            if not len(wq) or sock is None:
                if self.status is CLOSED:
                    return
                ev.wait(_FLUSH_WAIT)
                continue
            with self._wtoken:
                self._write_pending()
            if self._sock is not sock:
                ev.wait(_FLUSH_WAIT)

    def pending_bytes(self) -> int:
        """Bytes queued and not yet taken by a writer."""
        return int(self._wq.nbytes)

    # -- reading -----------------------------------------------------------
    #
    # Leader/follower: one thread at a time reads the socket, parses and
    # routes. Normally that is the reader thread. A thread that has sent a
    # request and waits for its reply (``await_reply``) may take over, so the
    # reply wakes the waiting thread itself instead of waking the reader thread
    # which then wakes it (one thread hop less per round trip):
    #
    # - READER: the reader thread reads; it waits in poll() on the socket and
    #   a wake-up socket. A requester registers its reply waiter in
    #   ``_lf_waiters`` and writes a wake-up byte; the reader, after its
    #   current read, hands the role over by releasing that waiter's lock
    #   with ``lead`` set (unless its reply already came) and parks.
    # - LEADER: a requester reads until its own reply has been routed (its
    #   routing delivers other replies and subscription messages as the
    #   reader would), then hands the role to another waiting requester, or
    # - LINGER: nobody reads, for at most ``LINGER`` seconds: the next request
    #   (a loop of requests from one thread) leads at once, with no wake-up of
    #   anyone. The parked reader thread checks every ``LINGER`` and takes the
    #   role back once the linger is over.
    #
    # The reader thread also handles disconnects and reconnects; a leader
    # that sees the socket fail reports it (``_lost``) and hands back.
    # Over TLS (no concurrent reads with writes) and where sends cannot be
    # made non-blocking, only the reader thread reads.

    def _read_loop(self) -> None:
        buf = self._rbuf
        view = self._rview
        route = self._owner._route_events
        while self.status is not CLOSED:
            sock = self._sock
            try:
                if sock is None:
                    if not self._reconnect():
                        return
                    continue
                if self._is_tls:
                    if not self._tls_io(sock, buf, view, route):
                        self._lost(sock)
                    continue
                if self._rstate is not _READER and not self._await_reading(sock):
                    continue
                try:
                    n = self._recv(sock, view)
                except OSError as exc:
                    self._lost(sock, exc)
                    continue
                if n == 0:
                    self._lost(sock, errors.UnexpectedEOF())
                    continue
                if n > 0:
                    self._feed(sock, view[:n].tobytes(), route)
                if self._lf_waiters:
                    self._hand_over()
            except Exception as exc:
                # Never let the reader die: report, drop the socket, reconnect.
                log.exception("jsclient: unexpected error on the reader thread")
                self._owner._report_error(exc)
                if sock is not None:
                    self._lost(sock, exc)
                elif self._closing.wait(0.1):
                    return

    def _recv(self, sock: socket.socket, view: memoryview) -> int:
        """Reader thread: bytes read into ``view``; -1 when woken with nothing to read."""
        try:
            return sock.recv_into(view, 0, _DONTWAIT)
        except BlockingIOError:
            pass
        poller = self._poller
        if poller is None or self._poll_sock is not sock:
            poller = self._poller = select.poll()
            self._poll_sock = sock
            poller.register(sock, select.POLLIN)
            if self._wake_r is not None:
                poller.register(self._wake_r, select.POLLIN)
        for fd, _ in poller.poll(_FLUSH_WAIT * 1000):
            if fd != sock.fileno():
                self._drain_wake()
        try:
            return sock.recv_into(view, 0, _DONTWAIT)
        except BlockingIOError:
            return -1

    def _drain_wake(self) -> None:
        wake = self._wake_r
        if wake is not None:
            try:
                while wake.recv(4096):
                    pass
            except (BlockingIOError, InterruptedError, OSError):
                pass

    def _await_reading(self, sock: socket.socket) -> bool:
        """Reader thread, parked while a requester reads: True once the role is back."""
        with self._rcond:
            while True:
                if self._rstate is _LINGER and time.monotonic() - self._linger_since >= LINGER:
                    self._rstate = _READER
                if self._rstate is _READER:
                    return True
                if self.status is CLOSED or self._sock is not sock:
                    return False
                self._rcond.wait(LINGER)

    def _hand_over(self) -> None:
        """Reader thread: give the reading role to a requester that asked for it."""
        with self._rcond:
            if self._rstate is _READER and self._give_lead():
                return

    def _give_lead(self) -> bool:
        """With ``_rcond`` held: make the first waiting requester the reader; False if none."""
        waiters = self._lf_waiters
        while waiters:
            w = waiters.pop(0)
            if not w.done:
                self._rstate = _LEADER
                w.lead = True
                w.wake()
                return True
        return False

    def await_reply(self, waiter: Any, deadline: float | None) -> bool:
        """Wait for ``waiter`` (a request's reply); True when it was delivered.

        Reads the socket on this thread when allowed (see "reading" above).
        """
        if not _LEADER_FOLLOWER or self._is_tls or self._sock is None:
            return _acquire(waiter.lock, deadline)
        with self._rcond:
            state = self._rstate
            if state is _LINGER:
                self._rstate = _LEADER
                lead = True
            else:
                lead = False
                self._lf_waiters.append(waiter)
        if not lead:
            if state is _READER:
                self._wake_reader()
            if not _acquire(waiter.lock, deadline):
                with self._rcond:
                    if not waiter.lead:
                        if waiter in self._lf_waiters:
                            self._lf_waiters.remove(waiter)
                        return bool(waiter.done)
                # Made the reader just as the wait ran out: pass the role on.
                self._end_lead()
                return bool(waiter.done)
            if not waiter.lead:
                return True  # the reply came; another thread read it
        self._lead(waiter, deadline)
        if not waiter.done and self.status is not CLOSED:
            # The socket failed under this thread: the reader thread takes over
            # (and reconnects); wait out the deadline as any waiter would.
            _acquire(waiter.lock, deadline)
        return bool(waiter.done)

    def _wake_reader(self) -> None:
        w = self._wake_w
        if w is not None:
            try:
                w.send(b"\1")
            except OSError:
                pass

    def _lead(self, waiter: Any, deadline: float | None) -> None:
        """Read, parse and route on this thread until ``waiter`` has its reply."""
        sock = self._sock
        route = self._owner._route_events
        view = self._rview
        try:
            if sock is None:
                return
            poller = self._lead_poller
            if poller is None or self._lead_sock is not sock:
                poller = self._lead_poller = select.poll()
                self._lead_sock = sock
                poller.register(sock, select.POLLIN)
            # The request was just sent: wait for readability first (a receive
            # now would almost always find nothing).
            while not waiter.done:
                if self._sock is not sock or self.status is CLOSED:
                    return
                left = _timeout(deadline)
                if left is not None and left <= 0:
                    return
                wait = _FLUSH_WAIT if left is None else min(left, _FLUSH_WAIT)
                if not poller.poll(wait * 1000):
                    continue
                try:
                    n = sock.recv_into(view, 0, _DONTWAIT)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    self._lost(sock, exc)
                    return
                if n == 0:
                    self._lost(sock, errors.UnexpectedEOF())
                    return
                self._feed(sock, view[:n].tobytes(), route)
        finally:
            self._end_lead(sock)

    def _end_lead(self, sock: socket.socket | None = None) -> None:
        """The leader is done: the next waiting requester leads, else linger."""
        with self._rcond:
            if self._give_lead():
                return
            if sock is None or self._sock is not sock or self.status is CLOSED:
                self._rstate = _READER  # the reader thread takes over (reconnects)
                self._rcond.notify_all()
                return
            self._rstate = _LINGER
            self._linger_since = time.monotonic()

    def _feed(
        self, sock: socket.socket, data: bytes, route: Callable[[list[tuple[Any, ...]]], None]
    ) -> None:
        try:
            events = self._parser.feed(data)
        except errors.ProtocolError as exc:
            self._route_safely(sock, getattr(exc, "events", []), route)
            self._owner._report_error(exc)
            self._lost(sock, exc)
            return
        self._route_safely(sock, events, route)

    def _route_safely(
        self,
        sock: socket.socket,
        events: list[tuple[Any, ...]],
        route: Callable[[list[tuple[Any, ...]]], None],
    ) -> None:
        """Route frames; a bug in delivery must not kill the reader thread silently."""
        try:
            route(events)
        except Exception as exc:
            log.exception("jsclient: error while routing inbound frames")
            self._owner._report_error(exc)
            self._lost(sock, exc)

    def _tls_io(
        self,
        sock: socket.socket,
        buf: bytearray,
        view: memoryview,
        route: Callable[[list[tuple[Any, ...]]], None],
    ) -> bool:
        """One round of the TLS reader+writer loop; False when the socket failed."""
        wake = self._wake_r
        assert wake is not None
        sock.setblocking(False)
        out = b""
        try:
            while self._sock is sock and self.status is not CLOSED:
                if not out:
                    self._wq.kicked = False
                    out = self._take_pending()
                wlist = [sock] if out else []
                if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                    r, w, _ = select.select([sock, wake], wlist, [], _FLUSH_WAIT)
                else:
                    r, w = [sock], []
                if wake in r:
                    try:
                        while wake.recv(4096):
                            pass
                    except (BlockingIOError, InterruptedError):
                        pass
                if out and (sock in w or not wlist):
                    try:
                        sent = sock.send(out)
                        out = out[sent:]
                    except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                        pass
                if sock in r:
                    while True:
                        try:
                            n = sock.recv_into(buf)
                        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                            break
                        if n == 0:
                            raise errors.UnexpectedEOF()
                        self._feed(sock, view[:n].tobytes(), route)
                        if self._sock is not sock:
                            return True
                        if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                            break
        except (OSError, errors.Error) as exc:
            if out:
                self._put_back(out)
            self._last_error = exc
            return False
        if out:
            self._put_back(out)
        return True

    # -- failure and reconnect ----------------------------------------------

    def _abort_socket(self, sock: socket.socket, exc: BaseException | None) -> None:
        """Called from any thread: make the reader notice the socket is dead."""
        if exc is not None:
            self._last_error = exc
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _lost(self, sock: socket.socket, exc: BaseException | None = None) -> None:
        """Reader thread: the socket failed; detach it (reconnect happens in the loop)."""
        with self._wlock:
            if self._sock is not sock:
                return
            self._sock = None
            if self.status is not CLOSED:
                self._set_status(RECONNECTING)
            # What is still queued counts toward the reconnect buffer.
            self._held = int(self._wq.nbytes)
        self._connected_event.clear()
        _close_quietly(sock)
        self._parser.reset()
        self._fail_pongs()
        if self.status is CLOSED:
            return
        self._owner._on_disconnect(exc or self._last_error)
        if not self.opts.reconnect:
            self._owner._close_from_io(exc or self._last_error)

    def _fail_pongs(self) -> None:
        while self._pongs:
            p = self._pongs.popleft()
            if p is not None:
                p.lock.release()

    def _next_server(self) -> ServerAddr | None:
        limit = self.opts.max_reconnect_attempts
        while self._pool:
            srv = self._pool.pop(0)
            if limit >= 0 and srv.attempts >= limit:
                continue  # exhausted: drop it from the pool
            self._pool.append(srv)
            return srv
        return None

    def _reconnect(self) -> bool:
        """Reader thread: loop over the pool until connected; False when giving up."""
        opts = self.opts
        while self.status is not CLOSED:
            srv = self._next_server()
            if srv is None:
                self._owner._close_from_io(errors.NoServersError())
                return False
            jitter = opts.reconnect_jitter_tls if srv.scheme == "tls" else opts.reconnect_jitter
            wait = srv.last_attempt + opts.reconnect_wait - time.monotonic()
            if wait > 0 and self._closing.wait(wait + random.random() * jitter):
                return False
            if self.status is CLOSED:
                return False
            srv.last_attempt = time.monotonic()
            srv.attempts += 1
            try:
                sock, leftovers = self._handshake(srv)
            except errors.AuthorizationError as exc:
                srv.auth_failures += 1
                if srv.auth_failures >= 2:
                    srv.attempts = 1 << 30  # same auth error twice: stop trying it
                self._owner._report_error(exc)
                continue
            except (OSError, errors.Error) as exc:
                self._last_error = exc
                continue
            if self.status is CLOSED:
                _close_quietly(sock)
                return False
            self.reconnects += 1
            self._install(srv, sock, self._owner._resubscribe_commands())
            if leftovers:
                self._owner._route_events(leftovers)
            self._owner._on_reconnect()
            return True
        return False

    # -- ping / pong --------------------------------------------------------

    def ping_tick(self) -> None:
        """Timer thread: send a keep-alive PING or declare the connection stale."""
        if self.status is not CONNECTED:
            return
        sock = self._sock
        if self._pings_out >= self.opts.max_pings_outstanding:
            self._owner._report_error(errors.StaleConnectionError())
            if sock is not None:
                self._abort_socket(sock, errors.StaleConnectionError())
            return
        self._pings_out += 1
        with self._wlock:
            self._pongs.append(None)
            self._queue(commands.PING)
        self._wq.kicked = True
        self._kick()

    def on_pong(self) -> None:
        self._pings_out = 0
        if self._pongs:
            p = self._pongs.popleft()
            if p is not None:
                p.ok = True
                p.lock.release()

    def on_ping(self) -> None:
        try:
            self.send(commands.PONG)
        except errors.Error:
            pass

    def on_info(self, text: str) -> None:
        try:
            info = parse_info(text)
        except errors.ProtocolError as exc:
            self._owner._report_error(exc)
            return
        self.server_info.update(info)
        if "max_payload" in info:
            self.max_payload = info["max_payload"]
        self._learn_servers(info)
        if info.get("ldm"):
            cb = self.opts.lame_duck_cb
            if cb is not None:
                self._owner._run_callback(cb)
            else:
                self._owner._report_error(errors.Error("nats: server entered lame duck mode"))

    def flush(self, timeout: float | None) -> None:
        """PING and wait for its PONG; across a reconnect, ping again on the new socket."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.check_owner()
        while True:
            if self.status is CLOSED:
                raise errors.ConnectionClosedError()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise errors.FlushTimeoutError()
            if self.status is not CONNECTED and self.status is not DRAINING:
                # Reconnecting: wait for the new socket (bounded), then ping on it.
                got = self._connected_event.wait(_FLUSH_WAIT if left is None else left)
                if not got and left is not None:
                    raise errors.FlushTimeoutError()
                continue
            p = _Pong()
            with self._wlock:
                if self.status is not CONNECTED and self.status is not DRAINING:
                    continue
                # The waiter and its PING are queued together so PONGs pair in order.
                self._pongs.append(p)
                self._queue(commands.PING)
            self._wq.kicked = True
            self._kick()
            got = p.lock.acquire(timeout=-1 if left is None else left)
            if not got:
                raise errors.FlushTimeoutError()
            if p.ok:
                return
            # The connection dropped before the PONG: try again once reconnected.

    # -- fork safety --------------------------------------------------------

    def forked_error(self) -> errors.ForkedConnectionError:
        return errors.ForkedConnectionError(self.pid, os.getpid())

    def check_owner(self) -> None:
        """Raise ForkedConnectionError in a process other than the one that connected.

        The fork hook normally marks the copy already; the pid comparison also
        catches a fork that bypassed Python's at-fork hooks.
        """
        if self.status is FORKED:
            raise self.forked_error()
        if self.pid != os.getpid():
            self.after_fork_in_child()
            if self.status is FORKED:
                raise self.forked_error()

    def after_fork_in_child(self) -> None:
        """In a forked child: mark this copy forked and drop the child's descriptors.

        Only this process's copies of the descriptors are closed (no
        ``shutdown``, no bytes): the parent's socket is untouched. The threads
        do not exist in the child, and their locks may be held forever, so
        nothing here takes a lock or waits.
        """
        if self.status is CLOSED or self.status is FORKED:
            return
        self._set_status(FORKED)
        socks = (self._sock, self._wake_r, self._wake_w)
        self._sock = self._wake_r = self._wake_w = None
        for s in socks:
            if s is not None:
                _close_quietly(s)

    # -- closing ------------------------------------------------------------

    def close(self, flush_timeout: float = 1.0) -> None:
        """Flush what is buffered (best effort), then tear down sockets and threads."""
        if self.status is CLOSED:
            return
        if self.status is FORKED or self.pid != os.getpid():
            self.after_fork_in_child()
            return
        if self.status is CONNECTED or self.status is DRAINING:
            deadline = time.monotonic() + flush_timeout
            while len(self._wq) and time.monotonic() < deadline and self._sock is not None:
                self._kick()
                time.sleep(0.005)
        with self._wlock:
            self._set_status(CLOSED)
            sock = self._sock
            self._sock = None
        self._closing.set()
        self._connected_event.set()
        self._fail_pongs()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            _close_quietly(sock)
        self._wevent.set()
        self._kick()
        me = threading.current_thread()
        for t in (self._reader, self._flusher):
            if t is not None and t is not me:
                t.join(2.0)
        for s in (self._wake_r, self._wake_w):
            if s is not None:
                _close_quietly(s)


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


def _seed_bytes(seed: str) -> bytes:
    """An nkey seed given inline or as a path to a file holding it."""
    text = seed.strip()
    if text.startswith("S") and len(text) > 50 and "/" not in text:
        return text.encode()
    try:
        with open(text, "rb") as f:
            for line in f.read().splitlines():
                line = line.strip()
                if line.startswith(b"S") and len(line) > 50:
                    return line
    except OSError as exc:
        raise errors.InvalidUserCredentialsError(f"nats: cannot read nkey seed: {exc}") from exc
    raise errors.InvalidUserCredentialsError("nats: no nkey seed found")


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
        # Permissions Violation for Publish to "subject" (or Subscription to ...)
        words = text.split(None, 5)
        op = words[3].lower() if len(words) > 3 else ""
        subject = words[5].strip().strip('"') if len(words) > 5 else ""
        return errors.PermissionViolationError(f"nats: {text}", op, subject)
    return errors.Error(f"nats: {text}")


def _timeout(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (monotonic); None: no limit."""
    if deadline is None:
        return None
    return max(0.0, deadline - time.monotonic())


def _acquire(lock: Any, deadline: float | None) -> bool:
    left = _timeout(deadline)
    return bool(lock.acquire(timeout=-1 if left is None else left))


def _gather(chunks: list[bytes]) -> list[bytes | memoryview]:
    """Buffers for one gather write: runs of small frames joined, large ones as they are."""
    bufs: list[bytes | memoryview] = []
    small: list[bytes] = []
    for c in chunks:
        if len(c) >= GATHER_MIN:
            if small:
                bufs.append(small[0] if len(small) == 1 else b"".join(small))
                small = []
            bufs.append(c)
        else:
            small.append(c)
    if small:
        bufs.append(small[0] if len(small) == 1 else b"".join(small))
    return bufs


def _send_bufs(
    sock: socket.socket, bufs: list[bytes | memoryview], flags: int
) -> list[bytes | memoryview]:
    """Write ``bufs`` in order; with ``MSG_DONTWAIT`` return what the socket did not take."""
    while bufs:
        try:
            if _HAS_SENDMSG and len(bufs) > 1:
                sent = sock.sendmsg(bufs[:_IOV_MAX], (), flags)
            else:
                sent = sock.send(bufs[0], flags)
        except BlockingIOError:
            return bufs
        # Drop what was written; a partial write leaves the rest of one buffer.
        while sent:
            first = bufs[0]
            if sent >= len(first):
                sent -= len(first)
                del bufs[0]
            else:
                bufs[0] = memoryview(first)[sent:]
                sent = 0
    return bufs


def _close_quietly(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        log.debug("jsclient: error closing socket", exc_info=True)
