"""Dropped and dripping connections, a hostile server, slow consumers and bad input.

Each fault must end in a typed error (``jsclient.errors``) in the caller's
thread or through ``error_cb``; the connection survives what it can survive;
nothing malformed is ever sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from _js import wait_for

import jsclient
from jsbench.faults import FaultProxy, HostileServer
from jsclient import errors
from jsclient.server import NatsServer

pytestmark = pytest.mark.timeout(60)

INFO = b'INFO {"server_id":"h","version":"2.10.0","max_payload":1048576}\r\n'


@pytest.fixture
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=False) as srv:
        yield srv


def test_dropped_connection_reconnects_and_delivers(server: NatsServer) -> None:
    with FaultProxy(server.host, server.port) as px:
        errs: list[BaseException] = []
        nc = jsclient.connect(px.url, reconnect_wait=0.05, error_cb=errs.append)
        try:
            sub = nc.subscribe("d")
            nc.flush()
            reader = nc._conn.reader.thread
            for round_ in range(3):
                px.drop_all()
                assert wait_for(lambda r=round_: nc.stats["reconnects"] > r, 5)
                nc.publish("d", b"%d" % round_)
                assert sub.next_msg(timeout=5).data == b"%d" % round_
            assert reader is not None and reader.is_alive() and nc._conn.reader.thread is reader
        finally:
            nc.close()
    assert px.alive_threads() == []


def test_slow_drip_splits_frames_everywhere_and_loses_nothing(server: NatsServer) -> None:
    # Every frame reaches the client a few bytes at a time: the parser joins
    # them; no protocol error, every payload intact.
    with FaultProxy(server.host, server.port) as px:
        errs: list[BaseException] = []
        nc = jsclient.connect(px.url, error_cb=errs.append)
        try:
            sub = nc.subscribe("drip")
            nc.flush()
            px.drip_bytes, px.drip_interval = 7, 0.001
            px.set_mode("drip")
            sent = [bytes([65 + i % 26]) * (i * 13 % 200) for i in range(60)]
            for p in sent:
                nc.publish("drip", p, headers={"K": "v"} if len(p) % 2 else None)
            got = [sub.next_msg(timeout=20).data for _ in sent]
            assert got == sent and errs == [] and nc.stats["reconnects"] == 0
        finally:
            nc.close()


# -- a hostile server --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "after_connect", "expected"),
    [
        (b"\x00\xff garbage \r\n", b"", errors.ProtocolError),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", b"", errors.ProtocolError),
        (b'INFO {"server_id":"tru', b"", errors.NoServersError),  # truncated, then silence
        (b"INFO " + b"x" * 2_000_000, b"", errors.ProtocolError),  # an INFO line too long
        (b"INFO [1, 2]\r\n", b"", errors.ProtocolError),
        (INFO, b"MSG a 1 99999999999\r\n", errors.ProtocolError),  # a huge payload length
        (INFO, b"MSG a 1 1000\r\nshort", errors.NoServersError),  # a payload that never ends
        (b"", b"", errors.NoServersError),  # says nothing at all
    ],
)
def test_hostile_server_fails_connect_with_a_typed_error_in_time(
    script: bytes, after_connect: bytes, expected: type[Exception]
) -> None:
    with HostileServer(script, after_connect=after_connect) as hs:
        t0 = time.monotonic()
        with pytest.raises(expected) as info:
            jsclient.connect(hs.url, connect_timeout=0.5, reconnect=False)
        took = time.monotonic() - t0
        assert isinstance(info.value, errors.Error)
        assert took < 0.5 + 0.5, took  # within connect_timeout (plus scheduling)
    assert [t for t in threading.enumerate() if t.name.startswith("jsclient-reader")] == [] or all(
        not t.is_alive() for t in threading.enumerate() if t.name.startswith("jsclient-reader")
    )


# -- slow consumer -----------------------------------------------------------------------


def test_slow_consumer_reported_connection_survives_dropped_counted(server: NatsServer) -> None:
    errs: list[BaseException] = []
    nc = jsclient.connect(server.url, error_cb=errs.append)
    try:
        release = threading.Event()
        handled: list[bytes] = []

        def slow(msg: jsclient.Msg) -> None:
            release.wait(10)
            handled.append(msg.data)

        sub = nc.subscribe("slow", cb=slow, pending_msgs_limit=10)
        nc.flush()
        n = 200
        for i in range(n):
            nc.publish("slow", b"%d" % i)
        nc.flush()
        assert wait_for(lambda: any(isinstance(e, errors.SlowConsumerError) for e in errs), 5)
        slow_err = next(e for e in errs if isinstance(e, errors.SlowConsumerError))
        assert slow_err.subject == "slow" and slow_err.sid == sub.sid
        release.set()
        assert wait_for(lambda: len(handled) + sub.dropped == n, 5)
        assert sub.dropped > 0 and len(handled) == n - sub.dropped
        # the connection is fine
        assert nc.is_connected
        echo = nc.subscribe("after")
        nc.publish("after", b"ok")
        assert echo.next_msg(timeout=2).data == b"ok"
    finally:
        nc.close()


# -- bad input: typed error at the call, nothing sent ------------------------------------


@pytest.mark.parametrize(
    ("subject", "payload", "kwargs", "expected"),
    [
        ("", b"x", {}, errors.BadSubjectError),
        ("a b", b"x", {}, errors.BadSubjectError),
        ("a\r\nPUB x 1", b"x", {}, errors.BadSubjectError),
        ("ok", b"x", {"reply": "bad reply"}, errors.BadSubjectError),
        ("ok", b"x", {"headers": {"Bad Name": "v"}}, errors.BadHeaderError),
        ("ok", b"x", {"headers": {"K": "v\r\nPUB x 1"}}, errors.BadHeaderError),
        ("ok", b"x" * 2001, {}, errors.MaxPayloadError),
        ("ok", b"x" * 1990, {"headers": {"K": "v"}}, errors.MaxPayloadError),
    ],
)
def test_bad_input_raises_at_the_call_and_sends_nothing(
    nats_server_factory: object, subject: str, payload: bytes, kwargs: dict, expected: type
) -> None:
    srv = nats_server_factory(jetstream=True, max_payload=2000)  # type: ignore[operator]
    nc = jsclient.connect(srv.url)
    try:
        spy = nc.subscribe(">")
        nc.flush()
        before = nc.stats["out_msgs"]
        with pytest.raises(expected):
            nc.publish(subject, payload, **kwargs)
        if "reply" not in kwargs:  # the same input through request and JetStream publish
            with pytest.raises(expected):
                nc.request(subject, payload, timeout=0.5, headers=kwargs.get("headers"))
            with pytest.raises(expected):
                nc.jetstream().publish_async(subject, payload, headers=kwargs.get("headers"))
        assert nc.stats["out_msgs"] == before  # no publish went out
        nc.publish("marker", b"end")
        nc.flush()
        # the first message the server routed is the marker: nothing else reached it
        assert spy.next_msg(timeout=2).subject == "marker"
        assert nc.is_connected
    finally:
        nc.close()


# -- security ----------------------------------------------------------------------------


def test_permission_violations_are_typed_and_keep_the_connection(
    nats_server_factory: object,
) -> None:
    conf = (
        "authorization { users: [ { user: u, password: p, permissions: { "
        'publish: { deny: ["secret.>"] }, subscribe: { deny: ["hidden.>"] } } } ] }'
    )
    srv = nats_server_factory(jetstream=False, config=conf)  # type: ignore[operator]
    errs: list[BaseException] = []
    nc = jsclient.connect(srv.url, user="u", password="p", error_cb=errs.append)
    try:
        nc.publish("secret.plans", b"x")
        nc.subscribe("hidden.things")
        nc.flush()
        assert wait_for(
            lambda: len([e for e in errs if isinstance(e, errors.PermissionViolationError)]) >= 2, 5
        )
        found = {
            (e.operation, e.subject) for e in errs if isinstance(e, errors.PermissionViolationError)
        }
        assert found == {("publish", "secret.plans"), ("subscription", "hidden.things")}
        ok = nc.subscribe("open")
        nc.publish("open", b"fine")
        assert ok.next_msg(timeout=2).data == b"fine" and nc.is_connected
        assert nc.stats["reconnects"] == 0
    finally:
        nc.close()
