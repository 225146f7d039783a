"""The bounded write queue: publish memory stays within ``pending_size`` however fast the caller.

A small TCP relay between client and server can stop forwarding the client's
bytes, so the socket fills up and the flusher cannot write: that is where an
unbounded queue would grow without limit.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from _relay import Relay

import jsclient
from jsclient import errors
from jsclient.server import NatsServer


@pytest.fixture
def relay(nats_server: NatsServer) -> Iterator[Relay]:
    r = Relay(nats_server.url)
    yield r
    r.close()


def test_queue_never_exceeds_pending_size(nats_server: NatsServer) -> None:
    limit = 256 * 1024
    payload = b"x" * 4096
    with jsclient.connect(nats_server.url, pending_size=limit) as nc:
        conn = nc._conn
        peak = 0
        for _ in range(20_000):
            nc.publish("wq.a", payload)
            peak = max(peak, conn.pending_bytes())
        nc.flush(timeout=30)
        assert peak <= limit
        assert peak > 0


def test_a_stalled_socket_blocks_the_publisher_within_the_limit(
    nats_server: NatsServer, relay: Relay
) -> None:
    limit = 128 * 1024
    payload = b"y" * 2048
    with jsclient.connect(nats_server.url) as counter:
        sub = counter.subscribe("wq.b", pending_msgs_limit=0, pending_bytes_limit=0)
        counter.flush()
        with jsclient.connect(relay.url, pending_size=limit, flush_timeout=1.0) as nc:
            nc.flush()
            relay.forward.clear()  # the server stops receiving from this client
            conn = nc._conn
            sent = 0
            t0 = time.monotonic()
            with pytest.raises(errors.FlushTimeoutError) as ei:
                while time.monotonic() - t0 < 60:
                    nc.publish("wq.b", payload)
                    sent += 1
                    assert conn.pending_bytes() <= limit
            assert "pending_size" in str(ei.value)
            assert isinstance(ei.value, errors.TimeoutError)
            assert sent * len(payload) > limit  # it did fill the queue first
            relay.forward.set()
            nc.flush(timeout=30)
        # Every publish that returned reached the server; the one that raised did not.
        got = 0
        with contextlib.suppress(errors.TimeoutError):
            while True:
                sub.next_msg(timeout=1.0)
                got += 1
        assert got == sent


def test_large_payloads_reach_the_server_intact(nats_server: NatsServer) -> None:
    sizes = [16, 1024, 16 * 1024, 64 * 1024, 200_000, 3, 70_000]
    with jsclient.connect(nats_server.url) as nc, jsclient.connect(nats_server.url) as rx:
        sub = rx.subscribe("wq.c", pending_msgs_limit=0, pending_bytes_limit=0)
        rx.flush()
        expected = []
        for round_ in range(20):
            for i, size in enumerate(sizes):
                body = bytes([(round_ * 7 + i) % 251]) * size
                expected.append(body)
                nc.publish("wq.c", body)
        nc.flush(timeout=30)
        got = [sub.next_msg(timeout=5).data for _ in expected]
        assert got == expected


def test_a_request_on_a_stalled_socket_times_out(nats_server: NatsServer, relay: Relay) -> None:
    """A caller that writes inline never blocks on a full socket: it leaves that to the flusher."""
    with jsclient.connect(relay.url, pending_size=64 * 1024, flush_timeout=0.5) as nc:
        nc.subscribe("wq.echo", cb=lambda m: m.respond(m.data))
        nc.flush()
        relay.forward.clear()
        big = b"z" * 60_000
        with contextlib.suppress(errors.FlushTimeoutError):
            for _ in range(200):  # fill the socket and the queue
                nc.publish("wq.fill", big)
        t0 = time.monotonic()
        with pytest.raises(errors.TimeoutError):
            nc.request("wq.echo", b"hi", timeout=1.0)
        assert time.monotonic() - t0 < 3.0
        relay.forward.set()
        nc.flush(timeout=30)
        assert nc.request("wq.echo", b"again", timeout=5.0).data == b"again"
