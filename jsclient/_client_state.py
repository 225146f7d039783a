"""What a :class:`~jsclient.client.Client` tells about its connection: state,
server, pool and counters. Read-only properties, each a read of the
connection's fields; safe from any thread, never blocking."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jsclient._io.options import CLOSED, CONNECTED, DRAINING, RECONNECTING

if TYPE_CHECKING:
    from jsclient.connection import Connection

__all__ = ["ClientState"]


class ClientState:
    """The base of :class:`~jsclient.client.Client`: its read-only properties."""

    _conn: Connection

    @property
    def is_connected(self) -> bool:
        """True while a socket to a server is live (not reconnecting, draining or closed)."""
        return self._conn.status is CONNECTED

    @property
    def _lost_written(self) -> int:
        # The write-stream position up to which whole commands went to sockets
        # now lost (see Connection.lost_written).
        return self._conn.lost_written

    @property
    def is_closed(self) -> bool:
        """True once closed (by ``close()``, ``drain()``, or giving up reconnecting)."""
        return self._conn.status is CLOSED

    @property
    def is_reconnecting(self) -> bool:
        """True between a lost socket and the next connection."""
        return self._conn.status is RECONNECTING

    @property
    def is_draining(self) -> bool:
        """True while ``drain()`` runs."""
        return self._conn.status is DRAINING

    @property
    def connected_url(self) -> str | None:
        """The URL of the server connected to, or None when not connected."""
        return self._conn.connected_url if self.is_connected else None

    @property
    def server_info(self) -> dict[str, Any]:
        """A copy of the latest INFO of the server (empty before the first connection)."""
        return dict(self._conn.server_info)

    @property
    def max_payload(self) -> int:
        """The server's largest payload in bytes (headers included); larger publishes raise
        ``MaxPayloadError``."""
        return self._conn.max_payload

    @property
    def servers(self) -> list[str]:
        """The URLs of the server pool, discovered servers included."""
        return [s.url for s in self._conn.pool]

    @property
    def discovered_servers(self) -> list[str]:
        """The URLs the cluster advertised (``connect_urls``), not given to ``connect()``."""
        return [s.url for s in self._conn.pool if s.discovered]

    @property
    def stats(self) -> dict[str, int]:
        """Counters: ``in_msgs``, ``out_msgs``, ``in_bytes``, ``out_bytes``, ``reconnects``."""
        return {
            "in_msgs": int(self._conn.rs.in_msgs),
            "out_msgs": self._conn.out_msgs,
            "in_bytes": int(self._conn.rs.in_bytes),
            "out_bytes": self._conn.out_bytes,
            "reconnects": self._conn.reconnects,
        }

    @property
    def pending_data_size(self) -> int:
        """Bytes queued for the socket and not yet written."""
        return self._conn.pending_bytes()
