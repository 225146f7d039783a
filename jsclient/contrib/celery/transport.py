"""The kombu transport on jsclient: ``jetstream://host:4222`` (blocking, no event loop).

::

    import jsclient.contrib.celery          # registers jetstream:// (broker and backend)
    app = Celery("shop", broker="jetstream://127.0.0.1:4222",
                 backend="jetstream://127.0.0.1:4222")
    app.conf.broker_transport_options = {"ack_wait": 60, "max_deliver": 5}

Without the import, ``broker_transport="jsclient.contrib.celery.transport:Transport"``
(kombu: ``Connection(url, transport=...)``) selects it.

:class:`Transport` is a kombu ``virtual.Transport`` whose channels
(:mod:`.channel`) keep queues in JetStream. It does not poll: pullers put
what they receive into the connection's ready buffer and
:meth:`Transport.drain_events` waits on it, so the worker's loop (Celery's
``synloop``: the transport has no file descriptor for an event loop) wakes
when a message arrives. ``connection_errors`` and ``channel_errors`` are
jsclient's own error classes, so kombu's ``ensure`` retries a publish whose
connection failed (with the same message id) and Celery reconnects a worker.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import jsclient
from jsclient import errors
from jsclient.contrib.celery._config import TransportOptions
from jsclient.contrib.celery._kombu import ChannelError, VirtualTransport
from jsclient.contrib.celery._link import Link
from jsclient.contrib.celery._puller import stop_all
from jsclient.contrib.celery.channel import Channel

__all__ = ["Channel", "Transport"]

#: Seconds ``close_connection`` waits for pullers once their pulls ended.
JOIN_TIMEOUT = 2.0

CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionError,
    errors.ConnectionClosedError,
    errors.NoServersError,
    errors.StaleConnectionError,
    errors.ConnectionReconnectingError,
    errors.OutboundBufferLimitError,
    errors.ForkedConnectionError,
    errors.PublishDisconnectedError,
    errors.NoHeartbeatError,
    # A publish or request whose answer did not come: retried (same message id).
    errors.TimeoutError,
)
CHANNEL_ERRORS: tuple[type[BaseException], ...] = (
    ChannelError,
    errors.APIError,
    errors.NoRespondersError,
    errors.NoStreamResponseError,
)


class Transport(VirtualTransport):  # type: ignore[misc]
    """kombu transport: queues as JetStream streams, broadcast over core NATS."""

    Channel = Channel

    default_port = 4222
    driver_type = "jetstream"
    driver_name = "jsclient"
    polling_interval = None  # drain_events waits for messages; it never sleeps and polls
    connection_errors = CONNECTION_ERRORS
    channel_errors = CHANNEL_ERRORS
    implements = VirtualTransport.implements.extend(
        asynchronous=False,
        exchange_type=frozenset(["direct", "topic", "fanout"]),
        heartbeats=False,
    )

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.options = TransportOptions.from_kombu(client.transport_options)
        self._link: Link | None = None

    def driver_version(self) -> str:
        """jsclient's version."""
        return str(jsclient.__version__)

    @property
    def link(self) -> Link:
        """The NATS side of this connection (connected by ``establish_connection``)."""
        link = self._link
        if link is None or not link.usable:
            if link is not None and link.pid != os.getpid():
                raise errors.ForkedConnectionError(link.pid, os.getpid())
            raise errors.ConnectionClosedError()
        return link

    def establish_connection(self) -> Transport:
        """Connect to NATS (kombu's ``connect``); raises ``connection_errors`` on failure."""
        if self._link is None or not self._link.usable:
            self._link = Link.open(self.client, self.options)
        result: Transport = super().establish_connection()
        return result

    def verify_connection(self, connection: Any) -> bool:
        """True while the NATS connection is usable (connected or reconnecting)."""
        return self._link is not None and self._link.usable

    def close_connection(self, connection: Any) -> None:
        """Close the channels (held messages are nak'd), end the pulls, close NATS."""
        pullers = [p for ch in self.channels for p in ch.pullers()]
        super().close_connection(connection)
        link, self._link = self._link, None
        if link is None:
            return
        stop_all(pullers, JOIN_TIMEOUT, link.close)

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> None:
        """Deliver what arrived, waiting up to ``timeout`` s for something (socket.timeout)."""
        ready = self.link.ready
        items = ready.take(timeout, _worker_stopping())
        if not items:
            raise TimeoutError()
        for i, item in enumerate(items):
            channel = item.channel
            try:
                channel.deliver(item)
            except BaseException:
                ready.put_back(items[i + 1 :])
                raise

    @property
    def default_connection_params(self) -> dict[str, Any]:
        """kombu's defaults for a URL without host or port."""
        return {"port": self.default_port, "hostname": "127.0.0.1"}


def _worker_stopping() -> Callable[[], bool] | None:
    """In a Celery worker: whether it was told to stop (its loop waits in ``drain_events``).

    Celery's worker loop for transports without an event loop calls
    ``drain_events(timeout=2.0)`` and looks at its shutdown flags between
    calls; a wait that notices them ends at once, so a warm shutdown does not
    wait for the rest of the two seconds.
    """
    state = sys.modules.get("celery.worker.state")
    if state is None:
        return None

    def stopping() -> bool:
        # Celery's own test (``maybe_shutdown``): None and False mean "go on".
        return state.should_stop not in (None, False) or state.should_terminate not in (None, False)

    return stopping
