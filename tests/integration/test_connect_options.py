"""ADR-40 connection options against real servers: the reconnect-target callback,
``force_reconnect()``, ``ignore_discovered_servers`` and ``retry_on_failed_connect``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

import jsclient
from jsclient import errors
from jsclient.server import NatsCluster, NatsServer, make_tls_files

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from conftest import CoreConnect, CoreEvents, CoreWaitFor

pytestmark = pytest.mark.timeout(60)

FAST: dict[str, Any] = {"reconnect_wait": 0.1, "reconnect_jitter": 0.0, "connect_timeout": 1.0}


@pytest.fixture(scope="module")
def trio() -> Iterator[NatsCluster]:
    """A 3-server cluster (no JetStream) that the tests here never stop."""
    with NatsCluster(3, jetstream=False) as cluster:
        yield cluster


def _all_known(nc: jsclient.Client, urls: list[str]) -> bool:
    return set(nc.servers) == set(urls)


def _picking(
    trio: NatsCluster,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> tuple[list[str], Picker, jsclient.Client]:
    """The cluster's URLs, a Picker, and a client of the cluster that asks it before each
    reconnect, once the client has discovered every server."""
    urls = trio.urls
    pick = Picker()
    nc = core_connect(urls[0], reconnect_to_server_cb=pick, **FAST, **core_events.kwargs())
    core_wait_for(lambda: _all_known(nc, urls), timeout=10)
    return urls, pick, nc


def _force_to(
    nc: jsclient.Client, url: str, core_events: CoreEvents, core_wait_for: CoreWaitFor
) -> None:
    """``force_reconnect()`` and wait until the client is connected to ``url``."""
    core_events.reconnected.clear()
    nc.force_reconnect()
    assert core_events.reconnected.wait(5)
    core_wait_for(lambda: nc.connected_url == url)


class Picker:
    """A reconnect_to_server_cb that records its calls and answers ``self.answer``."""

    def __init__(self) -> None:
        self.answer: Any = None
        self.calls: list[tuple[list[str], dict[str, Any] | None, str]] = []
        self.lock = threading.Lock()

    def __call__(self, servers: list[str], info: dict[str, Any] | None) -> Any:
        with self.lock:
            self.calls.append((list(servers), info, threading.current_thread().name))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def test_callback_picks_the_server_on_force_reconnect(
    trio: NatsCluster,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    urls, pick, nc = _picking(trio, core_connect, core_events, core_wait_for)
    first_id = nc.server_info["server_id"]
    for target in (urls[2], urls[1], urls[2]):
        pick.answer = target
        _force_to(nc, target, core_events, core_wait_for)
    assert len(pick.calls) == 3
    servers, info, thread = pick.calls[0]
    assert set(servers) == set(urls)  # the whole pool, discovered servers included
    assert info is not None and info["server_id"] == first_id  # the latest INFO
    assert thread == "jsclient-callbacks"  # user code: never the reader thread
    assert nc.stats["reconnects"] == 3
    assert core_events.errors == []


def test_callback_delay_replaces_reconnect_wait(
    trio: NatsCluster,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    urls, pick, nc = _picking(trio, core_connect, core_events, core_wait_for)
    pick.answer = (urls[1], 1.0)
    start = time.monotonic()
    nc.force_reconnect()
    assert core_events.reconnected.wait(8)
    assert time.monotonic() - start >= 0.9  # the callback's delay, not reconnect_wait (0.1)
    core_wait_for(lambda: nc.connected_url == urls[1])
    # A zero delay dials at once.
    pick.answer = (urls[2], 0)
    _force_to(nc, urls[2], core_events, core_wait_for)


def test_callback_errors_fall_back_to_the_pool(
    trio: NatsCluster,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    urls, pick, nc = _picking(trio, core_connect, core_events, core_wait_for)
    sub = nc.subscribe("opt.fallback")
    bad: list[Any] = [
        RuntimeError("boom"),  # raises
        "nats://127.0.0.1:1",  # not in the pool (ADR-40: never dialled)
        42,  # not a URL
        (urls[1], -1),  # a bad delay
    ]
    for answer in bad:
        core_events.reconnected.clear()
        before = len(core_events.errors)
        pick.answer = answer
        nc.force_reconnect()
        assert core_events.reconnected.wait(5), answer
        assert nc.connected_url in urls
        core_wait_for(lambda: len(core_events.errors) > before)  # noqa: B023
        assert "reconnect_to_server_cb" in str(core_events.errors[-1])
    assert isinstance(core_events.errors[0].__cause__, RuntimeError)
    # None: the pool's choice, no error.
    core_events.reconnected.clear()
    pick.answer = None
    before = len(core_events.errors)
    nc.force_reconnect()
    assert core_events.reconnected.wait(5)
    assert len(core_events.errors) == before
    nc.publish("opt.fallback", b"still here")
    assert sub.next_msg(timeout=5).data == b"still here"


def test_force_reconnect_keeps_subscriptions_and_loses_nothing(
    nats_server: NatsServer,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    nc = core_connect(nats_server.url, **FAST, **core_events.kwargs())
    got: list[bytes] = []
    nc.subscribe("opt.force.cb", cb=lambda m: got.append(m.data))
    it = nc.subscribe("opt.force.it")
    nc.subscribe("opt.force.svc", cb=lambda m: m.respond(b"ok"))
    nc.flush()
    for round_ in range(3):
        core_events.reconnected.clear()
        nc.force_reconnect()
        # Published right after force_reconnect returned: buffered, then sent.
        for i in range(100):
            nc.publish("opt.force.cb", b"%d-%d" % (round_, i))
        nc.publish("opt.force.it", b"it-%d" % round_)
        assert core_events.reconnected.wait(5)
        assert it.next_msg(timeout=5).data == b"it-%d" % round_
    core_wait_for(lambda: len(got) == 300)
    assert got == [b"%d-%d" % (r, i) for r in range(3) for i in range(100)]
    assert nc.request("opt.force.svc", timeout=5).data == b"ok"
    assert core_events.counts["disconnected"] == 3
    assert core_events.counts["reconnected"] == 3
    assert core_events.threads["disconnected"] == "jsclient-callbacks"
    assert nc.stats["reconnects"] == 3
    assert core_events.errors == []


def test_force_reconnect_over_tls(
    tmp_path: Path,
    core_connect: CoreConnect,
    core_events: CoreEvents,
) -> None:
    files = make_tls_files(tmp_path / "tls")
    with NatsServer(jetstream=False, tls=files.server_config()) as srv:
        nc = core_connect(srv.url, tls=files.client_context(), **FAST, **core_events.kwargs())
        sub = nc.subscribe("opt.tls")
        nc.flush()
        nc.force_reconnect()
        nc.publish("opt.tls", b"after")
        assert core_events.reconnected.wait(5)
        assert sub.next_msg(timeout=5).data == b"after"
        assert core_events.errors == []  # TLS is cut, not half-closed: no protocol error


def test_force_reconnect_on_closed_client_raises(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    nc.close()
    with pytest.raises(errors.ConnectionClosedError):
        nc.force_reconnect()


def test_ignore_discovered_servers_stays_on_its_node(
    core_connect: CoreConnect, core_wait_for: CoreWaitFor
) -> None:
    with NatsCluster(3, jetstream=False) as cluster:
        urls = cluster.urls
        learning = core_connect(urls[0], max_reconnect_attempts=-1, **FAST)
        closed = threading.Event()
        reconnected = threading.Event()
        ignoring = core_connect(
            urls[0],
            ignore_discovered_servers=True,
            max_reconnect_attempts=3,
            closed_cb=closed.set,
            reconnected_cb=reconnected.set,
            **FAST,
        )
        core_wait_for(lambda: _all_known(learning, urls), timeout=10)
        ignoring.flush()  # INFOs from the cluster have come by now
        assert ignoring.servers == [urls[0]]
        assert ignoring.discovered_servers == []
        cluster.servers[0].kill()
        # Without the option the client moves to another node ...
        core_wait_for(lambda: learning.connected_url in urls[1:], timeout=10)
        # ... with it, the client only ever dials its own node, and gives up.
        assert closed.wait(10)
        assert not reconnected.is_set()
        assert ignoring.is_closed


def test_retry_on_failed_connect_sends_once_a_server_starts(
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_free_port: Callable[[], int],
) -> None:
    port = core_free_port()
    url = f"nats://127.0.0.1:{port}"
    # Off (the default): nothing listens, so connect raises.
    with pytest.raises(errors.NoServersError):
        jsclient.connect(url, **FAST)
    pick = Picker()
    nc = core_connect(
        url,
        retry_on_failed_connect=True,
        max_reconnect_attempts=-1,
        reconnect_to_server_cb=pick,
        **FAST,
        **core_events.kwargs(),
    )
    assert not nc.is_connected and not nc.is_closed
    sub = nc.subscribe("opt.retry")
    for i in range(10):
        nc.publish("opt.retry", b"%d" % i)
    time.sleep(0.3)  # a few failed attempts
    assert not nc.is_connected
    with NatsServer(jetstream=False, port=port):
        assert [sub.next_msg(timeout=8).data for _ in range(10)] == [b"%d" % i for i in range(10)]
        assert nc.is_connected and nc.connected_url == url
        assert core_events.reconnected.wait(5)  # the first connection is announced so
        assert nc.stats["reconnects"] == 0
        assert pick.calls and pick.calls[0][:2] == ([url], None)  # no INFO seen yet
        nc.close()
    assert core_events.counts["disconnected"] == 0
    assert core_events.errors == []


def test_retry_on_failed_connect_gives_up_and_closes(
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_free_port: Callable[[], int],
) -> None:
    url = f"nats://127.0.0.1:{core_free_port()}"
    nc = core_connect(
        url,
        retry_on_failed_connect=True,
        max_reconnect_attempts=3,
        **FAST,
        **core_events.kwargs(),
    )
    nc.publish("opt.never", b"x")  # buffered, never sent
    assert core_events.closed.wait(8)
    assert nc.is_closed
    assert core_events.errors_of(errors.NoServersError)
    assert core_events.counts["reconnected"] == 0
    with pytest.raises(errors.ConnectionClosedError):
        nc.publish("opt.never", b"y")
