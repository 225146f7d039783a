"""Leader/follower reads: a requester reads its own reply, and nothing else suffers for it.

A thread waiting for a reply reads the socket itself (see Connection "reading");
these tests check the rest of the traffic meanwhile: other requesters, other
subscriptions, timeouts, reconnects and close.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

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


# -- service handler threads take the role too (as takers) ---------------------------


@contextlib.contextmanager
def _leads_counted(nc: jsclient.Client, linger: float | None = None) -> Iterator[dict[str, int]]:
    """Count Reader._lead calls per calling thread (handler threads as "svc") inside
    the block; ``linger``: the connection's linger meanwhile (a descheduled thread
    still finds its linger)."""
    names: dict[str, int] = {}
    orig = reader_mod.Reader._lead
    rs = nc._conn.rs
    old_linger = rs.linger

    def counting(
        self: reader_mod.Reader, sock: object, waiter: object, deadline: float | None
    ) -> bool:
        name = threading.current_thread().name
        key = "svc" if name.startswith("jsclient-svc-") else name
        names[key] = names.get(key, 0) + 1
        return orig(self, sock, waiter, deadline)  # type: ignore[arg-type]

    if linger is not None:
        rs.linger = linger
    reader_mod.Reader._lead = counting  # type: ignore[method-assign]
    try:
        yield names
    finally:
        reader_mod.Reader._lead = orig  # type: ignore[method-assign]
        rs.linger = old_linger


def _echo_service(nc: jsclient.Client, subject: str) -> Any:
    svc = nc.add_service("lead", "1.0.0")
    svc.add_endpoint("ep", lambda req: req.respond(req.data), subject=subject)
    nc.flush()
    return svc


def test_a_service_alone_on_its_connection_reads_its_own_requests(
    nc: jsclient.Client, echo: jsclient.Client
) -> None:
    with _echo_service(nc, "svc.alone"):
        assert echo.request("svc.alone", b"w", timeout=5).data == b"w"
        with _leads_counted(nc, linger=1.0) as leads:
            for i in range(200):
                assert echo.request("svc.alone", b"%d" % i, timeout=5).data == b"%d" % i
    if reader_mod.LEADER_READS:
        # The handler thread read the socket for (almost) every request: one
        # wake-up per request instead of the reader thread's and then its own.
        assert leads.get("svc", 0) >= 150, leads
    else:
        assert leads == {}  # pure Python: only the reader thread reads


def test_a_slow_handler_leaves_reading_to_the_reader_thread(
    nc: jsclient.Client, echo: jsclient.Client
) -> None:
    def slow(req: Any) -> None:
        time.sleep(0.005)  # longer than the role's linger: the reader thread has it back
        req.respond(req.data)

    with nc.add_service("slow", "1.0.0") as svc:
        svc.add_endpoint("ep", slow, subject="svc.slow")
        nc.flush()
        assert echo.request("svc.slow", b"w", timeout=5).data == b"w"
        with _leads_counted(nc) as leads:
            for i in range(40):
                assert echo.request("svc.slow", b"%d" % i, timeout=5).data == b"%d" % i
    # After a slow request the handler thread does not wake the reader thread
    # to take the role back (two wake-ups more than the reader thread handing
    # it the next request): it leads only when handed the role after a read.
    assert leads.get("svc", 0) <= 5, leads


def test_a_requester_keeps_the_role_beside_its_own_service(nc: jsclient.Client) -> None:
    me = threading.current_thread().name
    with _echo_service(nc, "svc.beside"):
        for _ in range(3):
            assert nc.request("svc.beside", b"w", timeout=5).data == b"w"
        with _leads_counted(nc, linger=1.0) as leads:
            for i in range(200):
                assert nc.request("svc.beside", b"%d" % i, timeout=5).data == b"%d" % i
    if reader_mod.LEADER_READS:
        # Requesters come first: the requesting thread reads both the request
        # (handing it to the handler thread's queue) and the reply; the handler
        # thread does not take the role from it.
        assert leads.get(me, 0) >= 190 and leads.get("svc", 0) <= 10, leads
    else:
        assert leads == {}


def test_an_idle_service_leaves_the_reader_thread_asleep(nc: jsclient.Client) -> None:
    parks = 0
    reader = nc._conn.reader
    orig = reader._park

    def counting(sock: Any) -> None:
        nonlocal parks
        parks += 1
        orig(sock)

    rs = nc._conn.rs
    with _echo_service(nc, "svc.idle"):
        if reader_mod.LEADER_READS:  # the handler thread leads (its first wait may not)
            assert wait_for(lambda: rs.role == _impl.readstate.LEADER, timeout=5)
        reader._park = counting  # type: ignore[method-assign]
        try:
            time.sleep(0.5)
        finally:
            del reader._park
    # A lead past DEEP_AFTER parks the reader thread until the lead ends, instead
    # of waking it every linger (1 ms: 90 times or more in this half second).
    assert parks < 25, parks


def test_the_role_goes_to_the_handler_thread_when_a_requester_linger_ends(
    nc: jsclient.Client,
) -> None:
    rs = nc._conn.rs
    with _echo_service(nc, "svc.after"):
        for _ in range(3):
            # The handler thread waits for its next request while this thread
            # holds the role or its linger: it does not lead then ...
            assert nc.request("svc.after", b"r", timeout=5).data == b"r"
            if not reader_mod.LEADER_READS:
                continue
            # ... but the reader thread hands it the role as the linger ends,
            # not after its next read (up to a second on an idle connection).
            assert wait_for(
                lambda: rs.role == _impl.readstate.LEADER and rs.leader.taker, timeout=0.5
            )


def test_frames_for_the_reader_thread_while_a_handler_thread_leads(
    nc: jsclient.Client, echo: jsclient.Client
) -> None:
    sub = nc.subscribe("plain.lead")
    with _echo_service(nc, "svc.frames"):
        for _ in range(3):
            time.sleep(0.05)  # a long lead: the reader thread parks until woken
            t0 = time.monotonic()
            nc.flush(timeout=5)  # its PONG is for the reader thread
            echo.publish("plain.lead", b"p")
            echo.flush()
            assert sub.next_msg(timeout=5).data == b"p"
            assert time.monotonic() - t0 < 0.5
            assert echo.request("svc.frames", b"r", timeout=5).data == b"r"


def test_server_restart_while_a_handler_thread_leads(
    nats_server: NatsServer, nc: jsclient.Client
) -> None:
    with _echo_service(nc, "svc.restart"):
        time.sleep(0.2)
        nats_server.kill()
        nats_server.start()
        assert wait_for(lambda: nc.is_connected, timeout=10)
        with jsclient.connect(nats_server.url) as peer:

            def answered() -> bool:
                try:
                    return bool(peer.request("svc.restart", b"b", timeout=1).data == b"b")
                except errors.Error:
                    return False

            assert wait_for(answered, timeout=10)


def test_close_ends_a_leading_handler_thread(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url)
    svc = _echo_service(nc, "svc.close")
    time.sleep(0.2)
    workers = [t for t in threading.enumerate() if t.name.startswith("jsclient-svc-lead-")]
    assert workers
    t0 = time.monotonic()
    nc.close()
    for t in workers:
        t.join(5)
    assert not any(t.is_alive() for t in workers)
    assert time.monotonic() - t0 < 3
    del svc
