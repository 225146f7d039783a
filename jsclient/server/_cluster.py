"""Several ``nats-server`` processes as one JetStream cluster: :class:`NatsCluster`."""

from __future__ import annotations

import secrets
import time
from types import TracebackType
from typing import Any

from jsclient.server._binary import (
    _PORT_IN_USE,
    NatsServerError,
    _free_port,
    _http_ok,
    _q,
    _url_host,
)
from jsclient.server._server import NatsServer


class NatsCluster:
    """``size`` ``nats-server`` processes forming one cluster on loopback.

    Each member is a :class:`NatsServer` (see :attr:`servers`) with its own
    client port, route port, monitoring port and store dir, and routes to all
    the others; with ``jetstream=True`` (the default) they form a JetStream
    cluster, so streams with ``num_replicas=3`` can be created. ``start()``
    returns once every member's ``/healthz`` answers OK (JetStream meta leader
    known and the member current). A member can be killed (``servers[i].kill()``,
    SIGKILL) and brought back (``servers[i].start()``) with its port and store;
    :meth:`wait_healthy` then waits until it has caught up.

    ``server_kwargs`` go to every member (``debug``, ``max_payload``, auth...);
    ``config`` is appended to each member's generated config.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        name: str | None = None,
        jetstream: bool = True,
        host: str = "127.0.0.1",
        startup_timeout: float = 30.0,
        config: str | None = None,
        **server_kwargs: Any,
    ) -> None:
        if size < 1:
            raise ValueError("a cluster needs at least one server")
        for key in ("port", "store_dir", "cluster_name", "server_name", "keep_store"):
            if key in server_kwargs:
                raise ValueError(f"NatsCluster sets {key!r} for each member itself")
        self._size = size
        self._name = name or f"jsclient-c{secrets.token_hex(3)}"
        self._jetstream = jetstream
        self._host = host
        self._startup_timeout = startup_timeout
        self._config = config
        self._server_kwargs = server_kwargs
        self._servers: list[NatsServer] = []
        self._monitor_ports: list[int] = []

    # -- properties ---------------------------------------------------------

    @property
    def name(self) -> str:
        """The cluster's name (its routes' ``cluster { name }``)."""
        return self._name

    @property
    def servers(self) -> list[NatsServer]:
        """The members, in start order."""
        return list(self._servers)

    @property
    def urls(self) -> list[str]:
        """Every member's client URL (running or not)."""
        return [s.url for s in self._servers]

    @property
    def url(self) -> str:
        """All client URLs, comma-separated (what ``jsclient.connect`` accepts)."""
        return ",".join(self.urls)

    def index_of(self, url_or_name: str | None) -> int:
        """The index of the member with this client URL (``host:port`` suffices) or
        server name; -1 when none matches."""
        if url_or_name is None:
            return -1
        for i, srv in enumerate(self._servers):
            if url_or_name == srv.server_name:
                return i
            if url_or_name.rsplit("//", 1)[-1] == f"{_url_host(self._host)}:{srv.port}":
                return i
        return -1

    def __repr__(self) -> str:
        up = sum(1 for s in self._servers if s.is_running)
        return f"<NatsCluster {self._name} {up}/{self._size} running>"

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> NatsCluster:
        """Start every member and wait until each reports healthy."""
        if self._servers:
            for srv in self._servers:
                srv.start()
            self.wait_healthy()
            return self
        last: BaseException | None = None
        for _ in range(3):  # route ports are picked before binding: retry a lost race
            try:
                self._launch()
                self.wait_healthy()
                return self
            except NatsServerError as exc:
                last = exc
                self.stop()
                if not any(s in str(exc).lower() for s in _PORT_IN_USE):
                    raise
        assert last is not None
        raise last

    def _launch(self) -> None:
        host = _url_host(self._host)
        route_ports = [_free_port(self._host) for _ in range(self._size)]
        self._monitor_ports = [_free_port(self._host) for _ in range(self._size)]
        for i in range(self._size):
            routes = ", ".join(
                _q(f"nats-route://{host}:{p}") for j, p in enumerate(route_ports) if j != i
            )
            text = [
                "# Cluster member",
                "cluster {",
                f"  name: {_q(self._name)}",
                f"  listen: {_q(f'{host}:{route_ports[i]}')}",
                f"  routes: [{routes}]" if routes else "",
                "}",
                f"http: {_q(f'{host}:{self._monitor_ports[i]}')}",
            ]
            if self._config:
                text.append(self._config)
            srv = NatsServer(
                jetstream=self._jetstream,
                host=self._host,
                server_name=f"{self._name}-{i + 1}",
                startup_timeout=self._startup_timeout,
                config="\n".join(t for t in text if t),
                **self._server_kwargs,
            )
            self._servers.append(srv)
        # Started one after another: each returns once it serves clients; the
        # JetStream cluster forms once a majority is up (wait_healthy).
        for srv in self._servers:
            srv.start()

    def is_healthy(self, index: int, timeout: float = 1.0) -> bool:
        """True when member ``index`` runs and its ``/healthz`` answers OK."""
        srv = self._servers[index]
        if not srv.is_running:
            return False
        return _http_ok(self._host, self._monitor_ports[index], "/healthz", timeout)

    def wait_healthy(self, timeout: float | None = None) -> None:
        """Wait until every running member reports healthy (JetStream current).

        NatsServerError with the members' log tails when that takes longer than
        ``timeout`` (default: the startup timeout).
        """
        limit = self._startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            sick = [
                i for i, s in enumerate(self._servers) if s.is_running and not self.is_healthy(i)
            ]
            if not sick:
                return
            if time.monotonic() >= deadline:
                tails = "\n".join(
                    f"--- {self._servers[i].server_name}:\n{self._servers[i]._log_tail(0)}"
                    for i in sick
                )
                raise NatsServerError(
                    f"cluster {self._name}: members {[i + 1 for i in sick]} not healthy "
                    f"within {limit:g} s\n{tails}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every member and remove their stores. Idempotent."""
        first: BaseException | None = None
        for srv in self._servers:
            try:
                srv.stop(timeout)
            except Exception as exc:  # stop the others before reporting
                first = first or exc
        self._servers = []
        self._monitor_ports = []
        if first is not None:
            raise first

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
