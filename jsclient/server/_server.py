"""One ``nats-server`` child process: :class:`NatsServer`."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NoReturn

from jsclient.server._binary import (
    _INSTALL_HINT,
    _LOG_TAIL_LINES,
    _PORT_IN_USE,
    NatsServerError,
    NatsServerNotFoundError,
    TLSConfig,
    _free_port,
    _q,
    _read_line,
    _track,
    _untrack,
    _url_host,
    find_nats_server,
)
from jsclient.server._flags import FLAG_NAME, feature_flags_from_env
from jsclient.server._guard import Guard


class NatsServer:
    """A ``nats-server`` child process with a generated config.

    ``port=None`` picks a free port on ``host``; ``store_dir=None`` uses a temp
    dir that ``stop()`` removes (unless ``keep_store=True``). ``config`` is raw
    config text appended to the generated file (later keys win); ``args`` are
    extra command-line flags. ``debug=True`` turns on the server's debug and
    protocol trace logging (see :meth:`log_text`). ``feature_flags`` goes to the
    config's ``feature_flags`` block (ADR-53, server 2.14+; e.g.
    ``{"js_ack_fc_v2": True}``); without it, the flags the environment variable
    ``JSCLIENT_TEST_SERVER_FEATURES`` names (see :func:`feature_flags_from_env`).
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
        feature_flags: Mapping[str, bool] | None = None,
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
        flags = feature_flags_from_env() if feature_flags is None else dict(feature_flags)
        for name, on in flags.items():
            if not (isinstance(name, str) and FLAG_NAME.fullmatch(name)):
                raise ValueError(f"invalid feature flag name {name!r}")
            if not isinstance(on, bool):
                raise TypeError(f"feature flag {name!r} must be True or False, not {on!r}")
        self._feature_flags = flags

        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._guard: Guard | None = None  # kills the server if this process dies (_guard.py)
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
        """The address the server listens on (loopback unless given)."""
        return self._host

    @property
    def port(self) -> int:
        """The client port (a free one picked at ``start()``); NatsServerError before."""
        if self._port is None:
            raise NatsServerError("the server has no port yet: call start() first")
        return self._port

    @property
    def url(self) -> str:
        """``nats://host:port``, for :func:`jsclient.connect`."""
        host = _url_host(self._host)
        return f"nats://{host}:{self.port}"

    @property
    def store_dir(self) -> Path:
        """The JetStream store folder: the one given, else one in the server's temporary folder."""
        if self._user_store_dir is not None:
            return self._user_store_dir
        if self._workdir is None:
            raise NatsServerError("the server has no store dir yet: call start() first")
        return self._workdir / "store"

    @property
    def log_path(self) -> Path:
        """The server's log file; NatsServerError before ``start()``."""
        if self._workdir is None:
            raise NatsServerError("the server has no log yet: call start() first")
        return self._workdir / "server.log"

    @property
    def config_path(self) -> Path:
        """The config file written at ``start()``; NatsServerError before."""
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
        """True while the server process is alive."""
        proc = self._proc
        return proc is not None and proc.poll() is None

    @property
    def server_name(self) -> str:
        """The server's name (``server_name`` in its config; unique per instance)."""
        return self._server_name

    @property
    def feature_flags(self) -> dict[str, bool]:
        """The feature flags written into the config (empty: the server's defaults)."""
        return dict(self._feature_flags)

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
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.release()  # after the server is gone: its pid is not killed later
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
        if self._feature_flags:
            lines.append("feature_flags {")
            lines += [f"  {k}: {'true' if v else 'false'}" for k, v in self._feature_flags.items()]
            lines.append("}")
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
        try:
            self._guard = Guard(self._proc.pid)
        except OSError:
            self._guard = None  # no interpreter to run it (an embedded Python): atexit only
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
