"""Network faults on loopback, for the reliability suite: a faulty TCP proxy and a hostile server.

``FaultProxy`` sits between a client and a real ``nats-server`` and, on
demand, stalls both directions (reads nothing, so the client's writes back up),
drops every connection, drips bytes slowly, or goes half-open (swallows what
the client sends and sends nothing back, as a peer that vanished without a
FIN looks). ``HostileServer`` accepts connections and answers with whatever
bytes it is told to (garbage, a truncated INFO, huge payload lengths) or with
nothing at all.

Both listen on 127.0.0.1 only, run named daemon threads, bound every wait and
stop with ``close()`` (also as context managers).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

__all__ = ["FaultProxy", "HostileServer"]

_TICK = 0.02  # how often a pump re-reads its mode
_S = TypeVar("_S", bound="_Stoppable")


def _listen(host: str) -> socket.socket:
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, 0))
    ls.listen(16)
    ls.settimeout(_TICK * 5)
    return ls


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


class _Stoppable:
    """A listener with an accept thread; subclasses handle each connection."""

    def __init__(self, name: str, host: str) -> None:
        self._name = name
        self._ls = _listen(host)
        self.host = host
        self.port: int = self._ls.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self.accepted = 0
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"{name}-accept")
        self._acceptor.daemon = True
        self._acceptor.start()

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def _spawn(self, target: Callable[[], None], what: str) -> None:
        t = threading.Thread(target=target, name=f"{self._name}-{what}", daemon=True)
        with self._lock:
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
        t.start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.add(sock)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.discard(sock)
        _close(sock)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._ls.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._track(conn)
            self._handle(conn)

    def _handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def drop_all(self) -> None:
        """Close every open connection now (the listener stays)."""
        with self._lock:
            socks = list(self._socks)
            self._socks.clear()
        for s in socks:
            _close(s)

    def close(self) -> None:
        """Stop accepting, close every connection, join the threads (bounded)."""
        self._stop.set()
        _close(self._ls)
        self.drop_all()
        self._acceptor.join(2.0)
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(2.0)

    def alive_threads(self) -> list[str]:
        """Names of this object's threads still running (empty after ``close()``)."""
        with self._lock:
            threads = [*self._threads, self._acceptor]
        return [t.name for t in threads if t.is_alive()]

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class FaultProxy(_Stoppable):
    """A TCP proxy from ``url`` to ``target_host:target_port`` with switchable faults.

    Modes (``set_mode``): ``"pass"`` forwards both ways; ``"stall"`` forwards
    nothing and reads nothing (both directions back up); ``"drip"`` forwards at
    most ``drip_bytes`` per ``drip_interval`` each way; ``"half_open"`` reads
    and discards both ways (the client's writes succeed, nothing ever comes
    back). ``drop_all()`` closes every connection. ``refuse=True`` closes new
    connections at once (the server looks down). A mode applies to open and
    new connections alike.
    """

    def __init__(self, target_host: str, target_port: int, host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.mode = "pass"
        self.refuse = False
        self.drip_bytes = 16
        self.drip_interval = 0.05
        super().__init__("jsclient-proxy", host)

    def set_mode(self, mode: str) -> None:
        if mode not in ("pass", "stall", "drip", "half_open"):
            raise ValueError(f"unknown proxy mode {mode!r}")
        self.mode = mode

    def _handle(self, conn: socket.socket) -> None:
        if self.refuse:
            self._untrack(conn)
            return
        try:
            up = socket.create_connection(self.target, timeout=2.0)
        except OSError:
            self._untrack(conn)
            return
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._track(up)
        self._spawn(lambda: self._pump(conn, up), "up")
        self._spawn(lambda: self._pump(up, conn), "down")

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                mode = self.mode
                if mode == "stall":
                    time.sleep(_TICK)
                    continue
                try:
                    r, _, _ = select.select([src], [], [], _TICK)
                except (OSError, ValueError):
                    return
                if not r or self.mode == "stall":  # the mode may have changed meanwhile
                    continue
                size = self.drip_bytes if mode == "drip" else 65536
                data = src.recv(size)
                if not data:
                    return
                if self.mode == "half_open":  # re-read: it may have changed during recv
                    continue
                dst.sendall(data)
                if mode == "drip":
                    time.sleep(self.drip_interval)
        except OSError:
            return
        finally:
            self._untrack(src)
            self._untrack(dst)


class HostileServer(_Stoppable):
    """Accepts connections and sends ``script`` (bytes, or a callable of the
    connection number returning bytes), then keeps the connection open, reading
    and ignoring whatever comes, until ``hold`` seconds passed or ``close()``.
    ``after_connect``: bytes sent once the client's CONNECT line has arrived."""

    def __init__(
        self,
        script: bytes | Callable[[int], bytes] = b"",
        *,
        after_connect: bytes = b"",
        hold: float = 30.0,
        host: str = "127.0.0.1",
    ) -> None:
        self.script = script
        self.after_connect = after_connect
        self.hold = hold
        self.received = b""
        super().__init__("jsclient-hostile", host)

    def _handle(self, conn: socket.socket) -> None:
        n = self.accepted
        self._spawn(lambda: self._serve(conn, n), "conn")

    def _serve(self, conn: socket.socket, n: int) -> None:
        deadline = time.monotonic() + self.hold
        script = self.script(n) if callable(self.script) else self.script
        pending_after = self.after_connect
        try:
            if script:
                conn.sendall(script)
            while not self._stop.is_set() and time.monotonic() < deadline:
                r, _, _ = select.select([conn], [], [], _TICK * 5)
                if not r:
                    continue
                data = conn.recv(65536)
                if not data:
                    return
                self.received += data
                if pending_after and b"CONNECT" in self.received:
                    conn.sendall(pending_after)
                    pending_after = b""
        except (OSError, ValueError):
            return
        finally:
            self._untrack(conn)
