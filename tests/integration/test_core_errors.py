"""Error paths of the core client.

Everything the server decides runs against a real nats-server. Only the
malformed-frame tests use a tiny fake server, because a real one never sends
invalid protocol.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import TYPE_CHECKING

import nats.errors
import pytest

from jsclient import errors
from jsclient.msg import Msg
from jsclient.server import NatsServer
from jsclient.testing import NatsServerFactory

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import CoreConnect, CoreEvents, CoreWaitFor

pytestmark = pytest.mark.timeout(30)

BAD_SUBJECTS = ["", "has space", "has\ttab", "has\nnewline", "has\rcr", " lead", "trail "]


# -- invalid arguments -----------------------------------------------------------


@pytest.mark.parametrize("subject", BAD_SUBJECTS)
def test_bad_subject_publish(
    subject: str, nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    with pytest.raises(errors.BadSubjectError) as info:
        nc.publish(subject, b"x")
    assert isinstance(info.value, nats.errors.BadSubjectError)
    with pytest.raises(errors.BadSubjectError):
        nc.publish(subject, b"x", headers={"A": "b"})
    with pytest.raises(errors.BadSubjectError):
        nc.publish("good.subject", b"x", reply=subject or "bad reply")
    with pytest.raises(errors.BadSubjectError):
        nc.request(subject, b"x", timeout=0.5)
    # Nothing invalid reached the server: the connection is healthy.
    nc.flush()
    assert nc.is_connected


@pytest.mark.parametrize("subject", BAD_SUBJECTS)
def test_bad_subject_subscribe(
    subject: str, nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    with pytest.raises(errors.BadSubjectError):
        nc.subscribe(subject)
    with pytest.raises(errors.BadSubjectError):
        nc.subscribe(subject, cb=lambda m: None)
    with pytest.raises(errors.BadSubjectError):
        nc.subscribe("good.subject", queue=subject or "bad queue")
    assert nc._subs == {}
    nc.flush()
    assert nc.is_connected


def test_bad_headers(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    for headers in ({"": "v"}, {"a b": "v"}, {"a:b": "v"}, {"k": "v\r\nInjected: 1"}):
        with pytest.raises(errors.BadHeaderError):
            nc.publish("hdr.bad", b"x", headers=headers)
    nc.flush()
    assert nc.is_connected


def test_max_payload_exceeded(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect
) -> None:
    srv = nats_server_factory(jetstream=False, max_payload=1024)
    nc = core_connect(srv.url)
    assert nc.max_payload == 1024
    sub = nc.subscribe("mp.subj")
    nc.publish("mp.subj", b"x" * 1024)  # exactly the limit is fine
    with pytest.raises(errors.MaxPayloadError) as info:
        nc.publish("mp.subj", b"x" * 1025)
    assert isinstance(info.value, nats.errors.MaxPayloadError)
    with pytest.raises(errors.MaxPayloadError):
        nc.publish("mp.subj", b"x" * 1025, reply="r.s")
    # Headers count against the limit.
    with pytest.raises(errors.MaxPayloadError):
        nc.publish("mp.subj", b"x" * 1010, headers={"Key": "value"})
    with pytest.raises(errors.MaxPayloadError):
        nc.request("mp.subj", b"x" * 2000, timeout=0.5)
    assert len(sub.next_msg(timeout=2).data) == 1024
    with pytest.raises(errors.TimeoutError):
        sub.next_msg(timeout=0.1)
    assert nc.is_connected and len(nc._mux) == 0


def test_server_permission_violation_goes_to_error_cb(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_wait_for: CoreWaitFor,
) -> None:
    conf = (
        "authorization { users: [ { user: limited, password: pw, "
        'permissions: { publish: { deny: ["secret.>"] } } } ] }'
    )
    srv = nats_server_factory(jetstream=False, config=conf)
    nc = core_connect(srv.url, user="limited", password="pw", **core_events.kwargs())
    nc.publish("secret.plans", b"x")
    nc.flush()
    err = core_wait_for(lambda: core_events.errors_of(errors.Error))[0]
    assert "permissions violation" in str(err).lower()
    assert core_events.threads["error"] != "jsclient-reader"
    # The server keeps the connection.
    sub = nc.subscribe("open.subject")
    nc.publish("open.subject", b"fine")
    assert sub.next_msg(timeout=2).data == b"fine"
    assert core_events.counts["disconnected"] == 0


# -- closed connections and subscriptions ------------------------------------------


def test_operations_on_closed_connection(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    nc.close()
    nc.close()  # idempotent
    nc.drain()  # a no-op once closed
    with pytest.raises(errors.ConnectionClosedError) as info:
        nc.publish("closed.subj", b"x")
    assert isinstance(info.value, nats.errors.ConnectionClosedError)
    with pytest.raises(errors.ConnectionClosedError):
        nc.publish("closed.subj", b"x", headers={"A": "b"})
    with pytest.raises(errors.ConnectionClosedError):
        nc.subscribe("closed.subj")
    with pytest.raises(errors.ConnectionClosedError):
        nc.subscribe("closed.subj", cb=lambda m: None)
    with pytest.raises(errors.ConnectionClosedError):
        nc.flush()
    with pytest.raises(errors.ConnectionClosedError):
        nc.request("closed.subj", timeout=0.5)


def test_subscription_after_connection_close(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("sub.closed")
    cb_sub = nc.subscribe("sub.closed.cb", cb=lambda m: None)
    nc.publish("sub.closed", b"queued")
    nc.flush()
    nc.close()
    assert sub.is_closed and cb_sub.is_closed
    # At most what was queued before the close is handed out, then the close reason.
    handed_out = []
    with pytest.raises(errors.ConnectionClosedError):
        for _ in range(3):
            handed_out.append(sub.next_msg(timeout=1).data)
    assert handed_out in ([], [b"queued"])
    with pytest.raises(errors.ConnectionClosedError):
        sub.next_msg(timeout=1)  # repeatable
    with pytest.raises(errors.BadSubscriptionError):
        sub.unsubscribe()
    sub.drain()  # a no-op on a closed subscription
    assert cb_sub._dispatcher is not None
    cb_sub._dispatcher.join(3)
    assert not cb_sub._dispatcher.is_alive()


def test_next_msg_on_unsubscribed(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("sub.gone")
    sub.unsubscribe()
    start = time.monotonic()
    with pytest.raises(errors.BadSubscriptionError) as info:
        sub.next_msg(timeout=5)
    assert time.monotonic() - start < 1, "a closed subscription must not wait"
    assert isinstance(info.value, nats.errors.BadSubscriptionError)
    with pytest.raises(errors.BadSubscriptionError):
        sub.unsubscribe()
    assert list(sub) == []


def test_unsubscribe_wakes_a_blocked_next_msg(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("sub.blocked")
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            sub.next_msg(timeout=10)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    time.sleep(0.1)
    sub.unsubscribe()
    t.join(3)
    assert not t.is_alive()
    assert isinstance(outcome[0], errors.BadSubscriptionError)


def test_close_wakes_a_blocked_next_msg(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("sub.blocked.close")
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            sub.next_msg(timeout=10)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    time.sleep(0.1)
    nc.close()
    t.join(3)
    assert not t.is_alive()
    assert isinstance(outcome[0], errors.ConnectionClosedError)


def test_cb_must_be_callable(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    with pytest.raises(errors.Error):
        nc.subscribe("x.y", cb="not callable")  # type: ignore[arg-type]


# -- connecting ----------------------------------------------------------------------


def test_connect_no_server_listening(core_free_port: Callable[[], int]) -> None:
    import jsclient

    port = core_free_port()
    start = time.monotonic()
    with pytest.raises(errors.NoServersError) as info:
        jsclient.connect(f"nats://127.0.0.1:{port}", connect_timeout=1.0)
    assert time.monotonic() - start < 1.5
    assert isinstance(info.value, nats.errors.NoServersError)


def test_connect_server_never_greets(core_free_port: Callable[[], int]) -> None:
    """A TCP listener that never sends INFO: give up after connect_timeout."""
    import jsclient

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(errors.NoServersError):
            jsclient.connect(f"nats://127.0.0.1:{port}", connect_timeout=0.4)
        elapsed = time.monotonic() - start
    assert 0.3 <= elapsed < 1.5


def test_connect_tries_every_server(
    nats_server: NatsServer, core_connect: CoreConnect, core_free_port: Callable[[], int]
) -> None:
    dead = f"nats://127.0.0.1:{core_free_port()}"
    nc = core_connect([dead, nats_server.url], dont_randomize=True)
    assert nc.connected_url == nats_server.url


def test_connect_bad_url_scheme() -> None:
    import jsclient

    with pytest.raises(errors.Error):
        jsclient.connect("http://127.0.0.1:4222")


# -- malformed frames (fake server) -----------------------------------------------


class _FakeServer:
    """Speaks just enough NATS: INFO, PONG for PING; sends ``garbage`` on the first connection.

    ``info_lines`` replaces the INFO line of the n-th connection (1-based).

    ``after_sub``: send the garbage once the client's first SUB arrived (else after the
    handshake PONG).
    """

    def __init__(
        self, garbage: bytes, after_sub: bool = False, info_lines: dict[int, bytes] | None = None
    ) -> None:
        self.garbage = garbage
        self.after_sub = after_sub
        self.info_lines = info_lines or {}
        self.connections = 0
        self.lines: list[bytes] = []
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept_loop, name="core-fake-accept", daemon=True)
        t.start()
        self._threads.append(t)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            self._socks.append(sock)
            t = threading.Thread(
                target=self._serve, args=(sock, self.connections), name="core-fake", daemon=True
            )
            t.start()
            self._threads.append(t)

    def _serve(self, sock: socket.socket, number: int) -> None:
        info = {
            "server_id": "FAKE",
            "server_name": "fake",
            "version": "2.10.0",
            "proto": 1,
            "max_payload": 1048576,
            "headers": True,
        }
        sock.settimeout(0.2)
        buf = b""
        try:
            if number in self.info_lines:
                sock.sendall(self.info_lines[number])
            else:
                sock.sendall(b"INFO " + json.dumps(info).encode() + b"\r\n")
            handshake_done = False
            while not self._stop.is_set():
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    return
                buf += chunk
                while b"\r\n" in buf:
                    line, buf = buf.split(b"\r\n", 1)
                    self.lines.append(line)
                    if line.startswith(b"PUB "):
                        size = int(line.split()[-1])
                        buf = buf[size + 2 :]
                    if line == b"PING":
                        sock.sendall(b"PONG\r\n")
                        if number == 1 and not handshake_done and not self.after_sub:
                            sock.sendall(self.garbage)
                        handshake_done = True
                    elif line.startswith(b"SUB ") and number == 1 and self.after_sub:
                        self.after_sub = False
                        sock.sendall(self.garbage)
        except OSError:
            return

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for s in self._socks:
            try:
                s.close()
            except OSError:
                pass
        for t in self._threads:
            t.join(2)


GARBAGE = [
    pytest.param(b"MSG foo x 5\r\nhello\r\n", id="bad-sid"),
    pytest.param(b"BOGUS stuff\r\n", id="unknown-op"),
    pytest.param(b"MSG foo 1 5\r\nhelloXX\r\n", id="no-crlf-after-payload"),
    pytest.param(b"MSG foo 1\r\n", id="too-few-args"),
    pytest.param(b"HMSG foo 1 10 5\r\nNATS/1.0\r\n\r\n", id="header-gt-total"),
    pytest.param(b"X" * 5000, id="control-line-too-long"),
]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("garbage", GARBAGE)
def test_malformed_frame_reports_protocol_error_and_reconnects(
    garbage: bytes, core_connect: CoreConnect, core_events: CoreEvents
) -> None:
    fake = _FakeServer(garbage)
    try:
        nc = core_connect(
            fake.url, reconnect_wait=0.05, reconnect_jitter=0.0, **core_events.kwargs()
        )
        assert core_events.disconnected.wait(5), "the bad frame did not drop the connection"
        assert core_events.reconnected.wait(5), "the client did not reconnect"
        protocol_errors = core_events.errors_of(errors.ProtocolError)
        assert protocol_errors, core_events.errors
        assert isinstance(protocol_errors[0], nats.errors.ProtocolError)
        assert core_events.threads["error"] != "jsclient-reader"
        assert fake.connections >= 2
        # The reader is alive and the new connection works.
        reader = nc._conn.reader.thread
        assert reader is not None and reader.is_alive()
        nc.flush(timeout=2)
        assert nc.is_connected
        nc.close()
        assert nc.is_closed
    finally:
        fake.close()


@pytest.mark.timeout(20)
def test_frames_before_the_bad_one_are_delivered(
    core_connect: CoreConnect, core_events: CoreEvents, core_wait_for: CoreWaitFor
) -> None:
    fake = _FakeServer(b"MSG good 1 2\r\nok\r\nMSG bad 1 zz\r\n", after_sub=True)
    try:
        nc = core_connect(
            fake.url, reconnect_wait=0.05, reconnect_jitter=0.0, **core_events.kwargs()
        )
        got: list[Msg] = []
        sub = nc.subscribe("good", cb=got.append)
        assert sub.sid == 1
        core_wait_for(lambda: got)
        assert got[0].data == b"ok"
        assert core_events.reconnected.wait(5)
        assert core_events.errors_of(errors.ProtocolError)
        # The subscription was re-sent on the new connection.
        core_wait_for(lambda: sum(1 for ln in fake.lines if ln.startswith(b"SUB good")) >= 2)
    finally:
        fake.close()


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "info",
    [
        pytest.param(b"INFO {not json\r\n", id="bad-json"),
        pytest.param(b"INFO []\r\n", id="not-an-object"),
        pytest.param(b'INFO {"max_payload": "big"}\r\n', id="bad-max-payload"),
    ],
)
def test_invalid_info_on_connect(info: bytes, core_connect: CoreConnect) -> None:
    fake = _FakeServer(b"", info_lines={1: info})
    try:
        start = time.monotonic()
        with pytest.raises(errors.Error) as exc_info:
            core_connect(fake.url, connect_timeout=1.0)
        assert isinstance(exc_info.value, (errors.ProtocolError, errors.NoServersError))
        assert time.monotonic() - start < 2
    finally:
        fake.close()


@pytest.mark.timeout(20)
def test_invalid_info_during_reconnect(core_connect: CoreConnect, core_events: CoreEvents) -> None:
    # 1st connection: a bad frame forces a reconnect; 2nd: invalid INFO; 3rd: fine.
    fake = _FakeServer(b"BOGUS\r\n", info_lines={2: b"INFO {not json\r\n"})
    try:
        nc = core_connect(
            fake.url,
            reconnect_wait=0.05,
            reconnect_jitter=0.0,
            connect_timeout=1.0,
            **core_events.kwargs(),
        )
        assert core_events.disconnected.wait(5)
        assert core_events.reconnected.wait(5), "the client never recovered"
        reader = nc._conn.reader.thread
        assert reader is not None and reader.is_alive()
        assert fake.connections >= 3
        nc.flush(timeout=2)
    finally:
        fake.close()


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "info",
    [
        pytest.param(b"INFO {not json\r\n", id="bad-json"),
        pytest.param(b'INFO {"max_payload": "big"}\r\n', id="bad-max-payload"),
        pytest.param(b"INFO []\r\n", id="not-an-object"),
    ],
)
def test_invalid_async_info_is_reported_and_survived(
    info: bytes, core_connect: CoreConnect, core_events: CoreEvents, core_wait_for: CoreWaitFor
) -> None:
    """An INFO the client cannot use after the handshake: ProtocolError, and no dead reader."""
    fake = _FakeServer(info)
    try:
        nc = core_connect(
            fake.url, reconnect_wait=0.05, reconnect_jitter=0.0, **core_events.kwargs()
        )
        core_wait_for(lambda: core_events.errors_of(errors.ProtocolError), timeout=2)
        nc.flush(timeout=2)  # connected (still, or again after a reconnect)
        reader = nc._conn.reader.thread
        assert reader is not None and reader.is_alive()
    finally:
        fake.close()
