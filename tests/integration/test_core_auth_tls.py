"""Authentication (token, user/password, nkey, creds/JWT) and TLS against a real nats-server."""

from __future__ import annotations

import os
import signal
import ssl
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import nats.errors
import pytest
from _auth import roundtrip as _roundtrip
from _jwt import make_decentralized, new_user_nkey

from jsclient import errors
from jsclient.server import TLSFiles, make_tls_files
from jsclient.testing import NatsServerFactory

if TYPE_CHECKING:
    from conftest import CoreConnect, CoreEvents

pytestmark = pytest.mark.timeout(30)


def _assert_auth_error_fast(fn: object, *args: object, **kwargs: object) -> errors.Error:
    start = time.monotonic()
    with pytest.raises(errors.AuthorizationError) as info:
        fn(*args, **kwargs)  # type: ignore[operator]
    assert time.monotonic() - start < 2, "an auth failure must not be retried"
    assert isinstance(info.value, nats.errors.AuthorizationError)
    return info.value


# -- token --------------------------------------------------------------------


def test_token_auth(nats_server_factory: NatsServerFactory, core_connect: CoreConnect) -> None:
    srv = nats_server_factory(jetstream=False, token="s3cr3t-token")
    _roundtrip(core_connect(srv.url, token="s3cr3t-token"))
    # nats://token@host:port
    _roundtrip(core_connect(f"nats://s3cr3t-token@127.0.0.1:{srv.port}"))
    _assert_auth_error_fast(core_connect, srv.url, token="wrong")
    _assert_auth_error_fast(core_connect, srv.url)


# -- user / password -----------------------------------------------------------


def test_user_password_auth(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect
) -> None:
    srv = nats_server_factory(jetstream=False, user="alice", password="pa$$word")
    _roundtrip(core_connect(srv.url, user="alice", password="pa$$word"))
    _roundtrip(core_connect(f"nats://alice:pa$$word@127.0.0.1:{srv.port}"))


def test_percent_encoded_url_credentials(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect
) -> None:
    srv = nats_server_factory(jetstream=False, user="bob@example", password="p@ss:w/rd")
    _roundtrip(core_connect(f"nats://bob%40example:p%40ss%3Aw%2Frd@127.0.0.1:{srv.port}"))


def test_wrong_password_fails_fast(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect
) -> None:
    srv = nats_server_factory(jetstream=False, user="alice", password="right")
    _assert_auth_error_fast(core_connect, srv.url, user="alice", password="wrong")
    _assert_auth_error_fast(core_connect, f"nats://alice:wrong@127.0.0.1:{srv.port}")
    _assert_auth_error_fast(core_connect, srv.url)  # no credentials at all


def test_auth_error_on_reconnect_is_reported(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_events: CoreEvents,
) -> None:
    """After a restart with other credentials the client reports the auth error and gives up."""
    srv = nats_server_factory(jetstream=False, user="alice", password="old")
    nc = core_connect(
        srv.url,
        user="alice",
        password="old",
        reconnect_wait=0.1,
        reconnect_jitter=0.0,
        max_reconnect_attempts=5,
        **core_events.kwargs(),
    )
    port = srv.port
    srv.stop()
    assert core_events.disconnected.wait(5)
    # Another server on the same port, with another password.
    nats_server_factory(jetstream=False, port=port, user="alice", password="new")
    assert core_events.closed.wait(10)
    assert core_events.errors_of(errors.AuthorizationError)
    assert nc.is_closed


# -- nkeys ----------------------------------------------------------------------


def test_nkey_seed_auth(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect, tmp_path: Path
) -> None:
    key = new_user_nkey()
    srv = nats_server_factory(jetstream=False, nkey_users=[key.public])
    _roundtrip(core_connect(srv.url, nkey_seed=key.seed.decode()))
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(key.seed + b"\n")
    _roundtrip(core_connect(srv.url, nkey_seed=str(seed_file)))
    # Another (unknown) key is refused.
    stranger = new_user_nkey()
    _assert_auth_error_fast(core_connect, srv.url, nkey_seed=stranger.seed.decode())


def test_invalid_nkey_seed(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect
) -> None:
    key = new_user_nkey()
    srv = nats_server_factory(jetstream=False, nkey_users=[key.public])
    with pytest.raises(errors.InvalidUserCredentialsError):
        core_connect(srv.url, nkey_seed="/no/such/seed/file")


# -- creds file (JWT) -----------------------------------------------------------


def test_creds_file_auth(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect, tmp_path: Path
) -> None:
    d = make_decentralized()
    srv = nats_server_factory(jetstream=False, config=d.server_config())
    creds = d.write_creds(tmp_path / "user.creds")
    nc = core_connect(srv.url, creds=creds)
    _roundtrip(nc)
    assert nc.server_info.get("nonce")
    # A user signed by an account the server does not know is refused.
    other = make_decentralized()
    bad = other.write_creds(tmp_path / "other.creds")
    _assert_auth_error_fast(core_connect, srv.url, creds=bad)
    # No credentials at all.
    _assert_auth_error_fast(core_connect, srv.url)


def test_creds_file_problems(
    nats_server_factory: NatsServerFactory, core_connect: CoreConnect, tmp_path: Path
) -> None:
    d = make_decentralized()
    srv = nats_server_factory(jetstream=False, config=d.server_config())
    with pytest.raises(errors.InvalidUserCredentialsError):
        core_connect(srv.url, creds=str(tmp_path / "missing.creds"))
    empty = tmp_path / "empty.creds"
    empty.write_text("nothing useful\n")
    with pytest.raises(errors.InvalidUserCredentialsError):
        core_connect(srv.url, creds=str(empty))


# -- TLS ------------------------------------------------------------------------


@pytest.fixture
def core_tls_files(tmp_path: Path) -> TLSFiles:
    return make_tls_files(tmp_path / "tls")


def test_tls_pub_sub_request(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_tls_files: TLSFiles,
) -> None:
    srv = nats_server_factory(jetstream=False, tls=core_tls_files.server_config())
    nc = core_connect(srv.url, tls=core_tls_files.client_context())
    assert nc.server_info.get("tls_required") is True
    assert isinstance(nc._conn._sock, ssl.SSLSocket)
    _roundtrip(nc)
    # Many messages and a large one over TLS (the reader also does the writing).
    sub = nc.subscribe("tls.bulk")
    big = b"z" * (nc.max_payload - 10)
    for i in range(500):
        nc.publish("tls.bulk", b"%d" % i)
    nc.publish("tls.bulk", big)
    got = [sub.next_msg(timeout=5).data for _ in range(501)]
    assert got[:500] == [b"%d" % i for i in range(500)] and got[500] == big


def test_tls_with_client_verification(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_tls_files: TLSFiles,
) -> None:
    srv = nats_server_factory(jetstream=False, tls=core_tls_files.server_config(verify=True))
    _roundtrip(core_connect(srv.url, tls=core_tls_files.client_context()))
    # Without a client certificate the server refuses the handshake.
    ctx = ssl.create_default_context(cafile=core_tls_files.ca_file)
    with pytest.raises((errors.SecureConnFailedError, errors.NoServersError)):
        core_connect(srv.url, tls=ctx, connect_timeout=1.0)


def test_tls_url_scheme(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_tls_files: TLSFiles,
) -> None:
    srv = nats_server_factory(jetstream=False, tls=core_tls_files.server_config())
    nc = core_connect(f"tls://127.0.0.1:{srv.port}", tls=core_tls_files.client_context())
    _roundtrip(nc)


def test_tls_handshake_first(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_tls_files: TLSFiles,
) -> None:
    srv = nats_server_factory(
        jetstream=False, tls=core_tls_files.server_config(), tls_handshake_first=True
    )
    nc = core_connect(srv.url, tls=core_tls_files.client_context(), tls_handshake_first=True)
    assert isinstance(nc._conn._sock, ssl.SSLSocket)
    _roundtrip(nc)


def test_tls_wrong_ca(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_tls_files: TLSFiles,
    tmp_path: Path,
) -> None:
    srv = nats_server_factory(jetstream=False, tls=core_tls_files.server_config())
    stranger = make_tls_files(tmp_path / "other-ca")
    start = time.monotonic()
    with pytest.raises(errors.SecureConnFailedError) as info:
        core_connect(srv.url, tls=stranger.client_context())
    assert time.monotonic() - start < 3
    assert isinstance(info.value, nats.errors.SecureConnFailedError)


def test_tls_required_without_client_tls_config(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_tls_files: TLSFiles,
) -> None:
    """The server requires TLS: the client upgrades with default trust, which rejects the CA."""
    srv = nats_server_factory(jetstream=False, tls=core_tls_files.server_config())
    with pytest.raises(errors.SecureConnFailedError):
        core_connect(srv.url)


def test_client_tls_against_plain_server(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_tls_files: TLSFiles,
) -> None:
    srv = nats_server_factory(jetstream=False)
    with pytest.raises(errors.SecureConnRequiredError):
        core_connect(srv.url, tls=core_tls_files.client_context())


def test_tls_reconnect(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_tls_files: TLSFiles,
) -> None:
    srv = nats_server_factory(jetstream=False, tls=core_tls_files.server_config())
    nc = core_connect(
        srv.url,
        tls=core_tls_files.client_context(),
        reconnect_wait=0.1,
        reconnect_jitter_tls=0.0,
        **core_events.kwargs(),
    )
    sub = nc.subscribe("tls.rc")
    nc.flush()
    srv.kill()
    assert core_events.disconnected.wait(5)
    for i in range(50):
        nc.publish("tls.rc", b"%d" % i)  # buffered
    srv.start()
    assert core_events.reconnected.wait(10)
    nc.flush(timeout=5)
    assert [sub.next_msg(timeout=5).data for _ in range(50)] == [b"%d" % i for i in range(50)]
    _roundtrip(nc, "tls.after")


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP")
def test_tls_stale_connection_detected(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_tls_files: TLSFiles,
) -> None:
    srv = nats_server_factory(jetstream=False, tls=core_tls_files.server_config())
    nc = core_connect(
        srv.url,
        tls=core_tls_files.client_context(),
        ping_interval=0.2,
        max_pings_outstanding=1,
        reconnect_wait=0.1,
        reconnect_jitter_tls=0.0,
        connect_timeout=0.5,
        **core_events.kwargs(),
    )
    pid = srv.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        assert core_events.disconnected.wait(5)
        assert [e for e in core_events.errors if type(e) is errors.StaleConnectionError]
    finally:
        os.kill(pid, signal.SIGCONT)
    assert core_events.reconnected.wait(10)
    _roundtrip(nc, "tls.stale")


def test_reconnect_from_a_plain_server_to_a_tls_one(
    nats_server_factory: NatsServerFactory,
    core_connect: CoreConnect,
    core_events: CoreEvents,
    core_tls_files: TLSFiles,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The pool mixes a plain server and one that requires TLS (trusted through
    # the default context: SSL_CERT_FILE). After the move to TLS only the reader
    # thread may write: the flusher started for the plain socket must stay off it.
    monkeypatch.setenv("SSL_CERT_FILE", core_tls_files.ca_file)
    plain = nats_server_factory(jetstream=False)
    secure = nats_server_factory(jetstream=False, tls=core_tls_files.server_config())
    nc = core_connect(
        [plain.url, f"tls://127.0.0.1:{secure.port}"],
        dont_randomize=True,
        reconnect_wait=0.1,
        reconnect_jitter_tls=0.0,
        **core_events.kwargs(),
    )
    assert not isinstance(nc._conn._sock, ssl.SSLSocket)
    assert nc._conn.writer.thread is not None  # the flusher runs for the plain socket
    plain.kill()
    assert core_events.reconnected.wait(10)
    assert isinstance(nc._conn._sock, ssl.SSLSocket)
    writer = nc._conn.writer
    flusher_writes: list[str] = []
    write = writer.write

    def watched_write() -> None:  # Writer.write: what the flusher thread calls
        if nc._conn._is_tls:
            flusher_writes.append(threading.current_thread().name)
        write()

    monkeypatch.setattr(writer, "write", watched_write)
    # The flusher looks at the queue every wait slice: make that often, so
    # that it finds frames queued over TLS if it would write them.
    monkeypatch.setattr("jsclient._io.writer.WAIT_SLICE", 0.001)
    sub = nc.subscribe("mixed.bulk")
    nc.flush(timeout=5)
    sent = 0
    until = time.monotonic() + 2.5
    while time.monotonic() < until:
        for _ in range(50):  # at most ~25k in all: within the pending limits
            nc.publish("mixed.bulk", b"%d" % sent)
            sent += 1
        time.sleep(0.005)
    got = [sub.next_msg(timeout=10).data for _ in range(sent)]
    assert got == [b"%d" % i for i in range(sent)]
    assert flusher_writes == []
    assert not core_events.errors
    assert nc.is_connected and nc._conn.reconnects == 1
