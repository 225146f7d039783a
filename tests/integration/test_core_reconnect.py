"""Reconnection against real nats-servers: restarts, buffering, give-up, stale, clusters."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import TYPE_CHECKING

import pytest

from jsclient import errors
from jsclient.msg import Msg
from jsclient.server import NatsServer
from jsclient.testing import NatsServerFactory

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import CoreConnect, CoreEvents, CoreWaitFor

pytestmark = pytest.mark.timeout(30)

FAST = {"reconnect_wait": 0.1, "reconnect_jitter": 0.0, "connect_timeout": 1.0}


def test_restart_fires_callbacks_and_resubscribes(
    nats_server: NatsServer,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    nc = core_connect(nats_server.url, **FAST, **core_events.kwargs())
    seen: list[bytes] = []
    nc.subscribe("rc.cb", cb=lambda m: seen.append(m.data))
    it = nc.subscribe("rc.iter")
    q = nc.subscribe("rc.q", queue="grp")
    nc.publish("rc.cb", b"before")
    nc.flush()
    core_wait_for(lambda: seen == [b"before"])

    nats_server.restart(down_time=0.5)
    assert core_events.disconnected.wait(5)
    assert core_events.reconnected.wait(5)
    assert nc.is_connected
    assert core_events.threads["disconnected"] != "jsclient-reader"
    assert core_events.threads["reconnected"] != "jsclient-reader"
    assert nc.stats["reconnects"] == 1
    assert core_events.counts["closed"] == 0

    # Subscriptions were re-sent on the new connection.
    nc.publish("rc.cb", b"after")
    nc.publish("rc.iter", b"it-after")
    nc.publish("rc.q", b"q-after")
    nc.flush()
    core_wait_for(lambda: seen == [b"before", b"after"])
    assert it.next_msg(timeout=2).data == b"it-after"
    assert q.next_msg(timeout=2).data == b"q-after"
    # Request/reply (the shared response subscription) works after the reconnect too.
    nc.subscribe("rc.svc", cb=lambda m: m.respond(b"ok"))
    assert nc.request("rc.svc", timeout=2).data == b"ok"


def test_request_subscription_resent_after_reconnect(
    nats_server: NatsServer, core_connect: CoreConnect, core_events: CoreEvents
) -> None:
    nc = core_connect(nats_server.url, **FAST, **core_events.kwargs())
    responder = nc.subscribe("rc.resp", cb=lambda m: m.respond(b"pong"))
    assert nc.request("rc.resp", timeout=2).data == b"pong"
    nats_server.restart(down_time=0.2)
    assert core_events.reconnected.wait(5)
    assert nc.request("rc.resp", timeout=2).data == b"pong"
    assert not responder.is_closed


def test_publishes_buffered_while_disconnected_are_delivered(
    nats_server: NatsServer,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    nc = core_connect(nats_server.url, **FAST, **core_events.kwargs())
    got: list[bytes] = []
    nc.subscribe("rc.buffered", cb=lambda m: got.append(m.data))
    nc.flush()
    nats_server.kill()  # keeps the port: start() brings the same server back
    assert core_events.disconnected.wait(5)
    assert not nc.is_connected
    k = 200
    for i in range(k):
        nc.publish("rc.buffered", b"%d" % i)
    assert nc.pending_data_size > 0
    nats_server.start()
    assert core_events.reconnected.wait(5)
    nc.flush(timeout=5)
    core_wait_for(lambda: len(got) == k)
    assert got == [b"%d" % i for i in range(k)]


def test_flush_waits_across_reconnect(
    nats_server: NatsServer, core_connect: CoreConnect, core_events: CoreEvents
) -> None:
    nc = core_connect(nats_server.url, **FAST, **core_events.kwargs())
    nats_server.kill()
    assert core_events.disconnected.wait(5)
    restarter = threading.Timer(0.3, nats_server.start)
    restarter.start()
    try:
        nc.flush(timeout=5)  # completes once reconnected
    finally:
        restarter.join()
    assert nc.is_connected


def test_flush_times_out_while_disconnected(
    nats_server: NatsServer, core_connect: CoreConnect, core_events: CoreEvents
) -> None:
    nc = core_connect(nats_server.url, **FAST, **core_events.kwargs())
    nats_server.kill()
    assert core_events.disconnected.wait(5)
    start = time.monotonic()
    with pytest.raises(errors.FlushTimeoutError):
        nc.flush(timeout=0.3)
    assert time.monotonic() - start < 2


def test_reconnect_buffer_limit(
    nats_server: NatsServer,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    nc = core_connect(nats_server.url, reconnect_buffer_size=2048, **FAST, **core_events.kwargs())
    got: list[bytes] = []
    nc.subscribe("rc.limit", cb=lambda m: got.append(m.data))
    nc.flush()
    nats_server.kill()
    assert core_events.disconnected.wait(5)
    accepted = 0
    with pytest.raises(errors.OutboundBufferLimitError) as info:
        for i in range(1000):
            nc.publish("rc.limit", b"%04d" % i + b"x" * 96)
            accepted += 1
    assert isinstance(info.value, errors.OutboundBufferLimitError)
    assert 5 <= accepted < 30
    assert nc.pending_data_size <= 2048
    # The buffered part survives and is delivered once the server is back.
    nats_server.start()
    assert core_events.reconnected.wait(5)
    nc.flush(timeout=5)
    core_wait_for(lambda: len(got) == accepted)
    assert [g[:4] for g in got] == [b"%04d" % i for i in range(accepted)]


def test_max_reconnect_attempts_exhausted_closes(
    nats_server: NatsServer,
    core_connect: CoreConnect,
    core_events: CoreEvents,
) -> None:
    nc = core_connect(
        nats_server.url,
        max_reconnect_attempts=3,
        reconnect_wait=0.05,
        reconnect_jitter=0.0,
        **{k: v for k, v in core_events.kwargs().items()},
    )
    sub = nc.subscribe("rc.gone")
    nats_server.kill()
    assert core_events.disconnected.wait(5)
    assert core_events.closed.wait(5), "the client did not give up"
    assert nc.is_closed
    assert core_events.errors_of(errors.NoServersError)
    assert core_events.threads["closed"] != "jsclient-reader"
    with pytest.raises(errors.ConnectionClosedError):
        nc.publish("rc.gone", b"x")
    with pytest.raises(errors.ConnectionClosedError):
        sub.next_msg(timeout=0.1)
    assert list(sub) == []


def test_no_reconnect_closes_on_disconnect(
    nats_server: NatsServer, core_connect: CoreConnect, core_events: CoreEvents
) -> None:
    nc = core_connect(nats_server.url, reconnect=False, **core_events.kwargs())
    nats_server.kill()
    assert core_events.disconnected.wait(5)
    assert core_events.closed.wait(5)
    assert nc.is_closed
    assert core_events.counts["reconnected"] == 0


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP")
def test_stale_connection_detected(
    nats_server: NatsServer,
    core_connect: CoreConnect,
    core_events: CoreEvents,
) -> None:
    nc = core_connect(
        nats_server.url,
        ping_interval=0.2,
        max_pings_outstanding=1,
        reconnect_wait=0.1,
        connect_timeout=0.5,
        **core_events.kwargs(),
    )
    pid = nats_server.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        assert core_events.disconnected.wait(5), "stale connection not detected"
        stale = [e for e in core_events.errors if type(e) is errors.StaleConnectionError]
        assert stale, core_events.errors
        assert core_events.threads["error"] != "jsclient-reader"
    finally:
        os.kill(pid, signal.SIGCONT)
    assert core_events.reconnected.wait(10)
    assert nc.is_connected
    nc.flush(timeout=2)


def test_pings_keep_a_healthy_connection(
    nats_server: NatsServer, core_connect: CoreConnect, core_events: CoreEvents
) -> None:
    nc = core_connect(
        nats_server.url, ping_interval=0.05, max_pings_outstanding=1, **core_events.kwargs()
    )
    time.sleep(0.5)
    assert nc.is_connected
    assert core_events.counts["disconnected"] == 0
    assert core_events.errors == []


def _cluster_pair(
    factory: NatsServerFactory, free_port: Callable[[], int]
) -> tuple[NatsServer, Callable[[], NatsServer]]:
    """Server a, and a function that starts b in a's cluster (routes both ways)."""
    ca, cb = free_port(), free_port()

    def conf(listen: int, route: int) -> str:
        return (
            f"cluster {{ name: c1, listen: 127.0.0.1:{listen}, "
            f"routes: [nats-route://127.0.0.1:{route}] }}"
        )

    a = factory(jetstream=False, config=conf(ca, cb))
    return a, lambda: factory(jetstream=False, config=conf(cb, ca))


def test_a_stable_cluster_is_no_discovery(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_wait_for: CoreWaitFor,
    core_free_port: Callable[[], int],
) -> None:
    # The servers the first INFO lists are learned quietly, as nats.go does:
    # only a server that joins later is a discovery.
    a, start_b = _cluster_pair(nats_server_factory, core_free_port)
    b = start_b()
    probe = core_connect(a.url)
    core_wait_for(lambda: b.url in probe.discovered_servers, timeout=15)  # the routes are up
    discovered = threading.Event()
    nc = core_connect(a.url, discovered_server_cb=discovered.set)
    assert b.url in nc.discovered_servers  # learned from the first INFO
    assert not discovered.wait(1.0)


@pytest.mark.timeout(40)
def test_cluster_discovery_and_failover(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
    core_free_port: Callable[[], int],
) -> None:
    a, start_b = _cluster_pair(nats_server_factory, core_free_port)
    discovered = threading.Event()
    nc = core_connect(a.url, discovered_server_cb=discovered.set, **FAST, **core_events.kwargs())
    assert nc.connected_url == a.url
    b = start_b()  # joins after the connection: a discovery
    core_wait_for(lambda: b.url in nc.discovered_servers, timeout=15)
    assert a.url not in nc.discovered_servers
    assert set(nc.servers) == {a.url, b.url}
    assert discovered.wait(2)
    ignoring = core_connect(a.url, ignore_discovered_servers=True)
    assert ignoring.discovered_servers == [] and ignoring.servers == [a.url]

    got: list[Msg] = []
    nc.subscribe("cl.subj", cb=got.append)
    nc.flush()
    a.kill()
    assert core_events.reconnected.wait(10)
    assert nc.connected_url == b.url
    # The subscription moved to the other server with the connection.
    other = core_connect(b.url)
    core_wait_for(lambda: (other.publish("cl.subj", b"via-b"), other.flush(), got)[2], timeout=5)
    assert got[0].data == b"via-b"


def test_subscribe_and_request_while_disconnected(
    nats_server: NatsServer,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    nc = core_connect(nats_server.url, **FAST, **core_events.kwargs())
    nc.flush()
    nats_server.kill()
    assert core_events.disconnected.wait(5)
    # Both the buffered SUB and the resubscription reach the server: no duplicates.
    got: list[bytes] = []
    nc.subscribe("rc.late", cb=lambda m: got.append(m.data))
    nc.subscribe("rc.late.svc", cb=lambda m: m.respond(b"answer"))
    replies: list[bytes] = []
    asker = threading.Thread(
        target=lambda: replies.append(nc.request("rc.late.svc", timeout=10).data), daemon=True
    )
    asker.start()
    time.sleep(0.1)
    nats_server.start()
    assert core_events.reconnected.wait(5)
    asker.join(10)
    assert replies == [b"answer"]
    nc.publish("rc.late", b"once")
    nc.flush()
    core_wait_for(lambda: got)
    time.sleep(0.1)
    assert got == [b"once"]


def test_auto_unsubscribe_survives_reconnect(
    nats_server: NatsServer, core_connect: CoreConnect, core_events: CoreEvents
) -> None:
    nc = core_connect(nats_server.url, **FAST, **core_events.kwargs())
    sub = nc.subscribe("rc.max", max_msgs=5)
    for i in range(2):
        nc.publish("rc.max", b"%d" % i)
    nc.flush()
    assert [sub.next_msg(timeout=2).data for _ in range(2)] == [b"0", b"1"]
    nats_server.restart(down_time=0.2)
    assert core_events.reconnected.wait(5)
    for i in range(2, 10):
        nc.publish("rc.max", b"%d" % i)
    nc.flush()
    assert [m.data for m in sub] == [b"2", b"3", b"4"]
    assert sub.delivered == 5


@pytest.mark.skipif(not hasattr(signal, "SIGUSR2"), reason="needs SIGUSR2")
def test_lame_duck_mode(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    srv = nats_server_factory(
        jetstream=False, config='lame_duck_duration: "30s"\nlame_duck_grace_period: "10s"'
    )
    ldm = threading.Event()
    with_cb = core_connect(srv.url, lame_duck_cb=ldm.set)
    without_cb = core_connect(srv.url, error_cb=core_events.error_cb)
    pid = srv.pid
    assert pid is not None
    os.kill(pid, signal.SIGUSR2)  # nats-server enters lame duck mode
    assert ldm.wait(5)
    assert with_cb.server_info.get("ldm") is True
    err = core_wait_for(lambda: core_events.errors_of(errors.Error))[0]
    assert "lame duck" in str(err)
    assert with_cb.is_connected and without_cb.is_connected
    with_cb.close()
    without_cb.close()
    srv.kill()  # a server in lame duck mode ignores SIGTERM for a while
