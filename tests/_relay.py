"""A TCP relay between a client and a real server, for tests of what crosses the wire.

``Relay(server_url)`` listens on a free loopback port (``relay.url``) and
forwards each connection to the server. ``forward.clear()`` holds the
client-to-server direction (the relay stops reading: the client's socket
fills up), ``drop = True`` reads the client's bytes and throws them away (the
client's writes "succeed" and never arrive), ``cut()`` closes every connection
(the client reconnects through the relay), ``close()`` stops it all.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Relay:
    """Forwards TCP connections to the server (see the module docstring)."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit("//", 1)[1].rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"nats://127.0.0.1:{self.listener.getsockname()[1]}"
        self.forward = threading.Event()
        self.forward.set()
        self.drop = False  # read the client's bytes and throw them away
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.socks: list[socket.socket] = []
        t = threading.Thread(target=self._accept, name="test-relay-accept", daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server = socket.create_connection(self.target)
            for s in (client, server):
                # Small kernel buffers, so a held relay fills them quickly.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
                s.settimeout(0.2)
            self.socks += [client, server]
            for src, dst, gated in ((client, server, True), (server, client, False)):
                t = threading.Thread(
                    target=self._pipe, args=(src, dst, gated), name="test-relay", daemon=True
                )
                t.start()
                self.threads.append(t)

    def _pipe(self, src: socket.socket, dst: socket.socket, gated: bool) -> None:
        while not self.stop.is_set():
            if gated and not self.forward.wait(0.2):
                continue
            try:
                data = src.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            if gated and self.drop:
                continue
            try:
                dst.sendall(data)
            except OSError:
                return

    def cut(self) -> None:
        """Close every connection made so far; new ones are forwarded as before."""
        socks, self.socks = self.socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self.stop.set()
        self.forward.set()
        for s in [self.listener, *self.socks]:
            with contextlib.suppress(OSError):
                s.close()
        for t in self.threads:
            t.join(2)
