"""The server pool: URLs, discovered servers, and which server to try next, when.

Sans-I/O: nothing here opens a socket or sleeps. The connection asks the pool
for the next server and how long to wait before dialling it, and tells it
about every attempt and every INFO.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from jsclient import errors

DEFAULT_PORT = 4222


#: ``scheme:`` with no ``//`` after it and not a port (``nats:/host``, ``nats:host``):
#: a URL written wrong, which would otherwise be taken for a host called "nats".
_SCHEME_WITHOUT_SLASHES = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(?!//)(?!\d+$)")


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
        """``nats://`` or ``tls://`` URLs; ``host``, ``host:port`` and
        ``user:password@host`` without a scheme mean ``nats://``."""
        if not isinstance(url, str):
            raise TypeError(f"nats: a server URL must be a str, not {type(url).__name__}")
        text = url.strip()
        if "://" not in text:
            if _SCHEME_WITHOUT_SLASHES.match(text) and "@" not in text:
                raise errors.InvalidURLError(
                    f"nats: {url!r} is not a server URL: write nats://host:port "
                    "(or tls://host:port, or just host:port)"
                )
            text = "nats://" + text
        u = urlparse(text)
        if u.scheme not in ("nats", "tls"):
            raise errors.InvalidURLError(
                f"nats: unsupported URL scheme {u.scheme!r} in {url!r}: jsclient connects "
                "with nats:// or tls:// (NATS over websockets, ws:// and wss://, is not supported)"
            )
        if not u.hostname and u.netloc.rsplit("@", 1)[-1].strip(":") == "":
            raise errors.InvalidURLError(f"nats: no host in the server URL {url!r}")
        try:
            port = u.port or DEFAULT_PORT
        except ValueError:
            raise errors.InvalidURLError(f"nats: invalid port in the server URL {url!r}") from None
        host = u.hostname or "127.0.0.1"
        return cls(
            host=host,
            port=port,
            scheme=u.scheme,
            user=unquote(u.username) if u.username is not None else None,
            password=unquote(u.password) if u.password is not None else None,
            discovered=discovered,
        )


class ServerPool:
    """The servers a connection may use, in the order it tries them.

    ``max_attempts`` failed attempts in a row drop a server from the pool
    (negative: never); an authorization error twice in a row drops it at once.
    """

    def __init__(
        self,
        urls: list[str],
        *,
        randomize: bool = True,
        max_attempts: int = 60,
        learn: bool = True,
    ) -> None:
        self.servers = [ServerAddr.parse(u) for u in urls]
        if not self.servers:
            raise errors.NoServersError("nats: no servers given")
        self.randomize = randomize
        self.max_attempts = max_attempts
        self.learn_enabled = learn
        if randomize and len(self.servers) > 1:
            random.shuffle(self.servers)
        self.current: ServerAddr | None = None

    def __iter__(self) -> Iterator[ServerAddr]:
        return iter(self.servers)

    def next_server(self) -> ServerAddr | None:
        """The server to try next (rotated to the back), or None when all are exhausted."""
        while self.servers:
            srv = self.servers.pop(0)
            if self.max_attempts >= 0 and srv.attempts >= self.max_attempts:
                continue  # exhausted: drop it from the pool
            self.servers.append(srv)
            return srv
        return None

    def live(self) -> list[ServerAddr]:
        """Drop the exhausted servers from the pool; the ones left, in order."""
        if self.max_attempts >= 0:
            self.servers = [s for s in self.servers if s.attempts < self.max_attempts]
        return list(self.servers)

    def take(self, url: str) -> ServerAddr | None:
        """The pool's entry for ``url`` (same host and port), rotated to the back
        as :meth:`next_server` does; None when no usable entry matches."""
        try:
            want = ServerAddr.parse(url)
        except errors.Error:
            return None
        for i, srv in enumerate(self.servers):
            if (srv.host, srv.port) == (want.host, want.port):
                if self.max_attempts >= 0 and srv.attempts >= self.max_attempts:
                    return None
                del self.servers[i]
                self.servers.append(srv)
                return srv
        return None

    @staticmethod
    def wait_before(srv: ServerAddr, now: float, reconnect_wait: float, jitter: float) -> float:
        """Seconds to wait before dialling ``srv`` again (0: at once)."""
        wait = srv.last_attempt + reconnect_wait - now
        return wait + random.random() * jitter if wait > 0 else 0.0

    @staticmethod
    def attempt(srv: ServerAddr, now: float) -> None:
        """An attempt on ``srv`` starts."""
        srv.last_attempt = now
        srv.attempts += 1

    @staticmethod
    def auth_failed(srv: ServerAddr) -> None:
        """``srv`` refused our credentials: the same error twice drops it."""
        srv.auth_failures += 1
        if srv.auth_failures >= 2:
            srv.attempts = 1 << 30

    def connected(self, srv: ServerAddr) -> None:
        srv.attempts = 0
        srv.auth_failures = 0
        srv.did_connect = True
        self.current = srv

    def learn(self, connect_urls: list[str] | None) -> bool:
        """Add the servers an INFO advertises; True if any was new."""
        if not self.learn_enabled:
            return False
        known = {(s.host, s.port) for s in self.servers}
        added = False
        for url in connect_urls or []:
            try:
                srv = ServerAddr.parse(url, discovered=True)
            except errors.Error:
                continue
            if (srv.host, srv.port) not in known:
                if self.current is not None and self.current.scheme == "tls":
                    srv.scheme = "tls"
                self.servers.append(srv)
                known.add((srv.host, srv.port))
                added = True
        if added and self.randomize:
            head, rest = self.servers[:1], self.servers[1:]
            random.shuffle(rest)
            self.servers = head + rest
        return added
