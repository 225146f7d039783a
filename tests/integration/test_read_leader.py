"""Leader/follower reads: a requester reads its own reply, and nothing else suffers for it.

A thread waiting for a reply reads the socket itself (see Connection "reading");
these tests check the rest of the traffic meanwhile: other requesters, other
subscriptions, timeouts, reconnects and close.
"""

from __future__ import annotations

import threading
import time

import pytest
from _js import wait_for

import jsclient
from jsclient import _impl, errors
from jsclient._io import reader as reader_mod
from jsclient.server import NatsServer


def test_requests_lead_and_linger(echo: jsclient.Client, nc: jsclient.Client) -> None:
    leads = 0
    orig = reader_mod.Reader._lead

    def counting(
        self: reader_mod.Reader, sock: object, waiter: object, deadline: float | None
    ) -> bool:
        nonlocal leads
        leads += 1
        return orig(self, sock, waiter, deadline)  # type: ignore[arg-type]

    # Checked: the role stays with a thread that requests in a loop. Not
    # checked: scheduling. While the reader thread holds the role, a reply that
    # arrives before it hands over is read by it, so on busy cores the first
    # requests (and any after a pause longer than the 1 ms linger) may not
    # lead. So the count starts once a requester holds the role, with a linger
    # that outlasts a descheduled thread.
    rs = nc._conn.rs
    linger = rs.linger
    rs.linger = 1.0

    def requester_holds_role() -> bool:
        assert nc.request("echo.a", b"w", timeout=5).data == b"w"
        return bool(rs.role == _impl.readstate.LINGER)

    if reader_mod.LEADER_READS:
        assert wait_for(requester_holds_role, timeout=10)
    reader_mod.Reader._lead = counting  # type: ignore[method-assign,assignment]
    try:
        for i in range(200):
            assert nc.request("echo.a", b"%d" % i, timeout=5).data == b"%d" % i
    finally:
        reader_mod.Reader._lead = orig  # type: ignore[method-assign]
        rs.linger = linger
    if reader_mod.LEADER_READS:
        assert leads >= 195  # the requesting thread read its own replies
    else:
        assert leads == 0  # pure Python: only the reader thread reads
    # After the linger the reader thread reads again: a plain subscription works.
    sub = nc.subscribe("plain")
    nc.flush()
    echo.publish("plain", b"p")
    assert sub.next_msg(timeout=2).data == b"p"


def test_many_threads_request_at_once(echo: jsclient.Client, nc: jsclient.Client) -> None:
    errors_seen: list[BaseException] = []
    counts = [0] * 8

    def worker(k: int) -> None:
        try:
            for i in range(150):
                body = b"%d-%d" % (k, i)
                assert nc.request(f"echo.{k}", body, timeout=10).data == body
                counts[k] += 1
        except BaseException as exc:
            errors_seen.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors_seen and counts == [150] * 8


def test_subscription_traffic_flows_while_a_thread_requests(
    echo: jsclient.Client, nc: jsclient.Client
) -> None:
    got: list[int] = []
    done = threading.Event()

    def on_msg(m: jsclient.Msg) -> None:
        got.append(int(m.data))
        if len(got) == 2000:
            done.set()

    nc.subscribe("feed", cb=on_msg)
    nc.flush()
    stop = threading.Event()

    def feeder() -> None:
        for i in range(2000):
            echo.publish("feed", b"%d" % i)
            if i % 100 == 0:
                time.sleep(0.002)
        echo.flush()

    requests = 0

    def requester() -> None:
        nonlocal requests
        while not stop.is_set():
            nc.request("echo.x", b"r", timeout=5)
            requests += 1

    r = threading.Thread(target=requester)
    r.start()
    feeder()
    assert done.wait(10)
    stop.set()
    r.join(10)
    assert got == list(range(2000))
    assert requests > 0


def test_a_message_arriving_while_the_role_lingers_is_delivered(
    echo: jsclient.Client, nc: jsclient.Client
) -> None:
    sub = nc.subscribe("late")
    nc.flush()
    for _ in range(5):
        nc.request("echo.a", b"x", timeout=5)  # the role lingers with this thread now
        echo.publish("late", b"l")
        echo.flush()
        t0 = time.monotonic()
        assert sub.next_msg(timeout=2).data == b"l"
        assert time.monotonic() - t0 < 0.5


def test_a_leading_request_times_out_and_reading_goes_on(
    nats_server: NatsServer, nc: jsclient.Client, echo: jsclient.Client
) -> None:
    nc.subscribe("silent")  # a subscriber that never answers: no 503, no reply
    nc.flush()
    t0 = time.monotonic()
    with pytest.raises(errors.TimeoutError):
        nc.request("silent", b"?", timeout=0.3)
    assert 0.25 <= time.monotonic() - t0 < 1.5
    assert nc.request("echo.a", b"after", timeout=5).data == b"after"
    sub = nc.subscribe("s2")
    nc.flush()
    echo.publish("s2", b"ok")
    assert sub.next_msg(timeout=2).data == b"ok"


def test_server_killed_while_a_request_leads(nats_server: NatsServer, nc: jsclient.Client) -> None:
    nc.subscribe("silent")
    nc.flush()
    box: list[BaseException] = []

    def run() -> None:
        try:
            nc.request("silent", b"?", timeout=3)
        except BaseException as exc:
            box.append(exc)

    t = threading.Thread(target=run)
    t0 = time.monotonic()
    t.start()
    time.sleep(0.2)
    nats_server.kill()
    nats_server.start()
    t.join(10)
    # As for any request whose connection dropped: a timeout at its deadline.
    assert len(box) == 1 and isinstance(box[0], errors.TimeoutError)
    assert time.monotonic() - t0 >= 2.5
    deadline = time.monotonic() + 10
    while not nc.is_connected and time.monotonic() < deadline:
        time.sleep(0.02)
    with jsclient.connect(nats_server.url) as peer:
        peer.subscribe("echo.b", cb=lambda m: m.respond(m.data))
        peer.flush()
        assert nc.request("echo.b", b"back", timeout=5).data == b"back"


def test_close_releases_a_leading_request(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url)
    nc.subscribe("silent")
    nc.flush()
    box: list[BaseException] = []

    def run() -> None:
        try:
            nc.request("silent", b"?", timeout=10)
        except BaseException as exc:
            box.append(exc)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    nc.close()
    t.join(5)
    assert not t.is_alive() and time.monotonic() - t0 < 3
    assert len(box) == 1 and isinstance(box[0], errors.ConnectionClosedError | errors.TimeoutError)
