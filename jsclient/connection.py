"""One client's connection: its state, connect and reconnect, ping/pong, flush, fork, close.

The work is split by concern (see :mod:`jsclient._io`):

- :mod:`jsclient._io.servers`: the server pool and when to dial which server;
- :mod:`jsclient._io.handshake` and :mod:`jsclient._io.auth`: TCP, TLS, INFO,
  CONNECT with credentials, the first PONG;
- :mod:`jsclient._io.writer`: the bounded write queue, the flusher thread and
  inline writes;
- :mod:`jsclient._io.reader`: the reader thread and requesters that read
  their own reply.

Threads of a connection: ``jsclient-reader`` (reads, routes, reconnects),
``jsclient-flusher`` (writes; not started over TLS, where the reader writes),
plus the client's timer and callback threads (see :mod:`jsclient.client`).
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
import weakref
from collections import deque
from typing import Any

from jsclient import _impl, _reconnect, errors
from jsclient._io.auth import read_creds as _read_creds
from jsclient._io.auth import seed_bytes as _seed_bytes
from jsclient._io.auth import sign_nonce as _sign_nonce
from jsclient._io.handshake import Dialled, close_quietly, dial, err_to_exception, parse_info
from jsclient._io.options import (
    CLOSED,
    CONNECTED,
    CONNECTING,
    DRAINING,
    FORKED,
    RECONNECTING,
    Options,
)
from jsclient._io.reader import LINGER, Reader, acquire
from jsclient._io.servers import DEFAULT_PORT, ServerAddr, ServerPool
from jsclient._io.writer import WAIT_SLICE, Writer
from jsclient._threads import Signal
from jsclient.protocol import commands

__all__ = [
    "CLOSED",
    "CONNECTED",
    "CONNECTING",
    "DEFAULT_PORT",
    "DRAINING",
    "FORKED",
    "RECONNECTING",
    "Connection",
    "Options",
    "ServerAddr",
    "_read_creds",
    "_seed_bytes",
    "_sign_nonce",
    "err_to_exception",
    "parse_info",
]


class _Pong:
    """A flush() waiting for its PONG: a pre-acquired lock released by the reader."""

    __slots__ = ("lock", "ok")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.ok = False


class Connection:
    """Socket-level engine of a client. ``owner`` (the Client) gets frames and events."""

    def __init__(self, owner: Any, opts: Options, subs: dict[int, Any], msg_type: Any) -> None:
        self._owner = owner
        self.opts = opts
        self.status = CONNECTING
        self.pid = os.getpid()  # the process that owns the socket
        self.server_info: dict[str, Any] = {}
        self.connected_url: str | None = None
        self.reconnects = 0
        # The write-stream position (jsclient.protocol.writer) up to which whole
        # commands had gone to sockets that are now lost, set by lost() before
        # the "disconnected" event: a frame ending at or before it was written
        # to a lost socket, one past it waits for (or went to) the live one.
        self.lost_written = 0
        self.pool = ServerPool(
            opts.servers,
            randomize=not opts.dont_randomize,
            max_attempts=opts.max_reconnect_attempts,
            learn=not opts.ignore_discovered_servers,
        )
        self._sock: socket.socket | None = None
        self._is_tls = False
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._lock = threading.Lock()  # state changes and PING/pong pairing only
        self._pongs: deque[_Pong | None] = deque()
        self._pings_out = 0
        self._connected_event = Signal()
        self._closing = Signal()
        self._retry_now = Signal()  # set by force_reconnect and close: dial now
        self._last_error: BaseException | None = None
        self.writer = Writer(self, opts)
        parser = _impl.parser.Parser(max_control_line=opts.max_control_line)
        # The reader's owner, and every inbound message's ``_client``, is a weak
        # proxy: a message holds no strong reference back into the client, so
        # it is never part of a reference cycle, and the speedups build makes
        # messages without the cycle collector's tracking (a collection per
        # 700 queued messages cost ~0.3 µs a message). The client outlives its
        # reader: this connection holds it.
        weak = weakref.proxy(owner) if owner is not None else None
        self.rs = _impl.readstate.ReadState(weak, subs, msg_type, parser, LINGER)
        self.reader = Reader(self, self.rs, self.writer, self._closing)

    # -- establishing ------------------------------------------------------

    def connect(self) -> None:
        """Initial connect in the caller's thread: try each server once.

        With ``retry_on_failed_connect`` nothing is dialled here: the client
        starts as reconnecting and the reader thread's reconnect loop makes
        the first connection (its first attempt at once).
        """
        if self.opts.retry_on_failed_connect:
            with self._lock:
                self._set_status(RECONNECTING)
            self._retry_now.set()
            self._start_threads()
            return
        last: BaseException | None = None
        tried: list[str] = []
        for srv in list(self.pool):
            tried.append(srv.url)
            try:
                dialled = dial(srv, self.opts)
            except errors.AuthorizationError:
                raise
            except (OSError, errors.Error) as exc:
                last = exc
                ServerPool.attempt(srv, time.monotonic())
                continue
            self._install(srv, dialled, resubscribe=b"")
            self._start_threads()
            if dialled.leftovers:
                self.rs.route_all(dialled.leftovers)
            return
        if isinstance(last, errors.Error) and not isinstance(last, errors.TimeoutError):
            raise last
        raise errors.NoServersError(
            f"nats: could not connect to any server ({', '.join(tried)}): {last}"
        ) from last

    def _start_threads(self) -> None:
        self.reader.thread = threading.Thread(
            target=self.reader.run, name="jsclient-reader", daemon=True
        )
        self.reader.thread.start()
        if self._sock is not None and not self._is_tls:
            self.writer.start()

    def _install(self, srv: ServerAddr, dialled: Dialled, resubscribe: bytes) -> None:
        """Make the dialled socket the live one; resubscriptions go before anything buffered."""
        info = dialled.info
        self.server_info = info
        if "max_payload" in info:
            self.max_payload = info["max_payload"]
        initial = self.pool.current is None  # the first connection (no callback: nats.go's rule)
        self.pool.connected(srv)
        self._learn(info, initial)
        self.connected_url = srv.url
        sock = dialled.sock
        self._is_tls = isinstance(sock, ssl.SSLSocket)
        if self._wake_r is None:
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
        self._pings_out = 0
        self.rs.reset(dialled.parser)
        writer = self.writer
        with self._lock:
            writer.hold(0)
            if resubscribe:
                writer.push_front(resubscribe)
            self._sock = sock
            self._set_status(CONNECTED)
        self._connected_event.set()
        if not self._is_tls:
            writer.start()  # first connection made by the reconnect loop
        writer.wq.kicked = True
        writer.kick()

    def _learn(self, info: dict[str, Any], initial: bool = False) -> None:
        """Add the servers an INFO advertises; ``discovered_server_cb`` runs when a
        later INFO brings new ones (not for those the first connection's INFO
        lists: a stable cluster is not a discovery)."""
        learned = self.pool.learn(info.get("connect_urls"))
        if learned and not initial and self.opts.discovered_server_cb:
            self._owner._run_callback(self.opts.discovered_server_cb)

    # -- state --------------------------------------------------------------

    @property
    def max_payload(self) -> int:
        """The server's max_payload (kept on the write queue for its publish fast path)."""
        return int(self.writer.wq.max_payload)

    @max_payload.setter
    def max_payload(self, value: int) -> None:
        self.writer.wq.max_payload = value

    @property
    def out_msgs(self) -> int:
        return int(self.writer.wq.out_msgs)

    @property
    def out_bytes(self) -> int:
        return int(self.writer.wq.out_bytes)

    def pending_bytes(self) -> int:
        """Bytes queued and not yet written."""
        return self.writer.pending_bytes()

    def _set_status(self, status: str) -> None:
        self.status = status
        # The queue takes frames on its fast path only while connected.
        self.writer.set_open(status is CONNECTED or status is DRAINING)

    def await_reply(self, waiter: Any, deadline: float | None, claim: bool = True) -> bool:
        """Wait for a request's reply (see :meth:`Reader.await_reply`)."""
        return self.reader.await_reply(waiter, deadline, claim)

    def wake_reader(self) -> None:
        w = self._wake_w
        if w is not None:
            try:
                w.send(b"\1")
            except OSError:
                pass

    def report(self, exc: BaseException) -> None:
        self._owner._report_error(exc)

    # -- failure and reconnect ----------------------------------------------

    def abort_socket(self, sock: socket.socket, exc: BaseException | None) -> None:
        """Any thread: make the reader thread notice that the socket is dead."""
        if exc is not None:
            self._last_error = exc
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def lost(self, sock: socket.socket, exc: BaseException | None = None) -> None:
        """Reader thread: the socket failed; detach it (the reconnect happens in its loop)."""
        with self._lock:
            if self._sock is not sock:
                return
            self._sock = None
            if self.status is not CLOSED:
                self._set_status(RECONNECTING)
        self._connected_event.clear()
        try:
            sock.shutdown(socket.SHUT_RDWR)  # a flusher blocked in send() returns now
        except OSError:
            pass
        writer = self.writer
        writer.recover()  # half-written commands back in the queue, whole
        # What the lost socket took whole, from the writer that knows (the one record).
        self.lost_written = int(writer.wq.written)
        writer.hold(int(writer.wq.nbytes))  # counts toward the reconnect buffer
        close_quietly(sock)
        self._fail_pongs()
        if isinstance(exc, errors.ProtocolError):
            self.report(exc)
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

    def reconnect(self) -> bool:
        """Reader thread: loop over the pool until connected; False when giving up."""
        opts = self.opts
        pool = self.pool
        while self.status is not CLOSED:
            now = self._retry_now.is_set()  # force_reconnect: no reconnect_wait this time
            self._retry_now.clear()
            srv, delay = _reconnect.choose(self)  # reconnect_to_server_cb, if any
            if srv is None:
                srv = pool.next_server()
            if srv is None:
                self._owner._close_from_io(errors.NoServersError())
                return False
            if delay is None:
                jitter = opts.reconnect_jitter_tls if srv.scheme == "tls" else opts.reconnect_jitter
                delay = (
                    0.0
                    if now
                    else pool.wait_before(srv, time.monotonic(), opts.reconnect_wait, jitter)
                )
            if delay > 0:
                self._retry_now.wait(delay)  # close() and force_reconnect() cut it short
            if self.status is CLOSED:
                return False
            pool.attempt(srv, time.monotonic())
            try:
                dialled = dial(srv, opts)
            except errors.AuthorizationError as exc:
                pool.auth_failed(srv)
                self.report(exc)
                continue
            except (OSError, errors.Error) as exc:
                self._last_error = exc
                continue
            if self.status is CLOSED:
                close_quietly(dialled.sock)
                return False
            if pool.current is not None:  # not the first connection (retry_on_failed_connect)
                self.reconnects += 1
            self._install(srv, dialled, self._owner._resubscribe_commands())
            if dialled.leftovers:
                self.rs.route_all(dialled.leftovers)
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
            self.report(errors.StaleConnectionError())
            if sock is not None:
                self.abort_socket(sock, errors.StaleConnectionError())
            return
        self._pings_out += 1
        self._ping(None)

    def _ping(self, pong: _Pong | None) -> bool:
        """Queue a PING paired with ``pong``; False when not connected."""
        with self._lock:
            if self.status is not CONNECTED and self.status is not DRAINING:
                return False
            # The waiter and its PING are queued together so PONGs pair in order.
            self._pongs.append(pong)
            self.writer.wq.push_always(commands.PING)
        self.writer.wq.kicked = True
        self.writer.kick()
        return True

    def on_pong(self) -> None:
        self._pings_out = 0
        if self._pongs:
            p = self._pongs.popleft()
            if p is not None:
                p.ok = True
                p.lock.release()

    def on_ping(self) -> None:
        # The reader thread must never wait for room in the queue.
        try:
            self.writer.send_nowait(commands.PONG)
        except errors.Error:
            pass

    def on_info(self, text: str) -> None:
        try:
            info = parse_info(text)
        except errors.ProtocolError as exc:
            self.report(exc)
            return
        self.server_info.update(info)
        if "max_payload" in info:
            self.max_payload = info["max_payload"]
        self._learn(info)
        if info.get("ldm"):
            cb = self.opts.lame_duck_cb
            if cb is not None:
                self._owner._run_callback(cb)
            else:
                self.report(errors.Error("nats: server entered lame duck mode"))

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
                got = self._connected_event.wait(WAIT_SLICE if left is None else left)
                if not got and left is not None:
                    raise errors.FlushTimeoutError()
                continue
            p = _Pong()
            if not self._ping(p):
                continue
            if not acquire(p.lock, deadline):
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
        catches a fork that bypassed Python's at-fork hooks (and platforms
        without them).
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
                close_quietly(s)

    # -- closing ------------------------------------------------------------

    def close(self, flush_timeout: float = 1.0) -> None:
        """Flush what is buffered (best effort), then tear down sockets and threads."""
        if self.status is CLOSED:
            return
        if self.status is FORKED or self.pid != os.getpid():
            self.after_fork_in_child()
            return
        writer = self.writer
        if self.status is CONNECTED or self.status is DRAINING:
            deadline = time.monotonic() + flush_timeout
            while not writer.idle() and time.monotonic() < deadline and self._sock is not None:
                writer.kick()
                time.sleep(0.005)
        with self._lock:
            self._set_status(CLOSED)
            sock = self._sock
            self._sock = None
        self._closing.set()
        self._retry_now.set()
        self._connected_event.set()
        self._fail_pongs()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            close_quietly(sock)
        writer.event.set()
        self.wake_reader()
        me = threading.current_thread()
        t = self.reader.thread
        if t is not None and t is not me:
            t.join(2.0)
        writer.join(2.0)
        for s in (self._wake_r, self._wake_w):
            if s is not None:
                close_quietly(s)
