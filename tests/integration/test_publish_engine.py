"""The async-publish engine's one disconnect rule, for each of its users.

``jsclient.jetstream.publish.engine``: a publish fails as disconnected only if
it was written to a socket that was then lost. One made while disconnected
waits in the reconnect buffer and goes out on reconnect; the "disconnected"
event, which reaches the library on its events thread a moment after the
socket was lost (or later still), must leave it alone. The same scenario runs
against ``js.publish_async``, the managed ``Publisher`` and the Spark sink's
``AckWindow`` (driven directly, no Spark session).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from _js import wait_for

from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream.publish.publisher import Publisher
from jsclient.server import NatsServer
from jsclient.spark._publish import LOST, OK, PENDING, Ack, AckWindow, header_block

pytestmark = pytest.mark.timeout(60)

N = 3


class _User:
    """Publishes N messages to ``subject`` and reports their outcomes, through one engine user."""

    subject = "f.x"

    def send(self) -> None:
        raise NotImplementedError

    def listening(self) -> bool:
        """The user's disconnect listener is registered (publish_async's first
        publish and the Spark window's constructor register it before they return)."""
        return True

    def failed(self) -> list[Any]:
        """The publishes that ended with an error so far."""
        raise NotImplementedError

    def seqs(self) -> list[int]:
        """Wait for every ack; their stream sequences."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class _PublishAsync(_User):
    def __init__(self, nc: Client) -> None:
        self.nc = nc
        self.js = nc.jetstream(timeout=30)  # ack timeouts out of the picture

    def send(self) -> None:
        self.futs = [self.js.publish_async(self.subject, b"%d" % i) for i in range(N)]

    def failed(self) -> list[Any]:
        return [f.exception() for f in self.futs if f.done() and f.exception() is not None]

    def seqs(self) -> list[int]:
        return [f.result(15).seq for f in self.futs]


class _ManagedPublisher(_User):
    def __init__(self, nc: Client) -> None:
        self.nc = nc
        # No retries: a disconnect failure would show as a failed flight.
        self.pub = Publisher(nc.jetstream(), wait_timeout=30.0).start()

    def send(self) -> None:
        self.flights = [self.pub.publish_async(self.subject, b"%d" % i) for i in range(N)]
        assert all(f.result(5).attempts == 1 for f in self.flights)  # written (to the buffer)

    def listening(self) -> bool:
        return self.pub._on_conn_event in self.nc._listeners  # the flights runner runs

    def failed(self) -> list[Any]:
        futs = [f.publish_ack_future for f in self.flights]
        return [f.exception() for f in futs if f.done() and f.exception() is not None]

    def seqs(self) -> list[int]:
        seqs = [f.publish_ack_future.result(15).seq for f in self.flights]
        assert self.pub.failed_count == 0 and self.pub.timed_out_count == 0
        return seqs

    def close(self) -> None:
        self.pub.stop()


class _SparkWindow(_User):
    def __init__(self, nc: Client) -> None:
        self.nc = nc
        self.win = AckWindow(nc, 10, 30.0)

    def send(self) -> None:
        win = self.win
        self.acks = [
            Ack(win, i, self.subject, b"%d" % i, header_block(f"engine-test:{i}")) for i in range(N)
        ]
        win.submit(self.acks)

    def failed(self) -> list[Any]:
        return [a.error for a in self.acks if a.state not in (PENDING, OK)]

    def seqs(self) -> list[int]:
        self.win.drain()
        assert [a.state for a in self.acks] == [OK] * N, [a.error for a in self.acks]
        return [a.seq for a in self.acks]

    def close(self) -> None:
        self.win.close()


USERS: dict[str, Callable[[Client], _User]] = {
    "publish_async": _PublishAsync,
    "publisher": _ManagedPublisher,
    "spark_window": _SparkWindow,
}


def _events_ran(nc: Client) -> bool:
    # The events thread runs its queue in order: once this marker ran, every
    # event queued before it has been handled.
    done = threading.Event()
    nc._events.submit(done.set)
    return done.wait(10)


@pytest.mark.parametrize("user", sorted(USERS))
def test_a_late_disconnect_event_leaves_buffered_publishes_alone(
    user: str, nats_server: NatsServer, nc: Client
) -> None:
    js = nc.jetstream()
    js.create_stream(name="F", subjects=["f.>"], storage="file")
    nats_server.stop(keep_store=True)  # same port and store on start()
    assert wait_for(lambda: not nc.is_connected)
    assert _events_ran(nc)  # the real "disconnected" event was handled
    u = USERS[user](nc)
    try:
        u.send()  # after the socket was lost: into the reconnect buffer
        assert wait_for(u.listening)
        nc._notify("disconnected")  # that loss's event, arriving after the sends
        assert _events_ran(nc)
        assert u.failed() == []  # the old publish_async failed them here, the Spark window at drain
        nats_server.start()
        assert sorted(u.seqs()) == list(range(1, N + 1))
        assert js.stream("F").info().state.messages == N  # sent once each
    finally:
        u.close()


@pytest.mark.parametrize("user", sorted(USERS))
def test_a_publish_written_to_the_lost_socket_fails_as_disconnected(
    user: str, nats_server: NatsServer, nc: Client
) -> None:
    # The other half of the rule: a subscriber that never answers holds the
    # acks; the publishes were written to the socket (a flush came back) and
    # the socket is then lost: their acks are lost with it.
    nc.subscribe("hold.>")
    nc.flush()
    u = USERS[user](nc)
    u.subject = "hold.x"
    try:
        u.send()
        nc.flush()  # written to this socket
        assert wait_for(u.listening)
        nats_server.restart()
        assert wait_for(lambda: len(u.failed()) == N, timeout=10)
        assert all(isinstance(e, errors.PublishDisconnectedError) for e in u.failed())
        if isinstance(u, _SparkWindow):
            assert [a.state for a in u.acks] == [LOST] * N  # the writer sends them again
    finally:
        u.close()
