"""Helpers shared by the core-client integration tests (``test_core_*.py``).

Everything here is prefixed ``core_`` so it cannot clash with fixtures other
test files define. Test modules get the helpers through fixtures (this
directory is not a package, so they do not import this module at run time).
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jsclient
from jsclient.client import Client
from jsclient.server import NatsServer

CoreConnect = Callable[..., Client]
CoreWaitFor = Callable[..., Any]

# ``tests/_jwt.py`` (JWT and creds helpers) is imported as a top-level module.
_TESTS_DIR = str(Path(__file__).resolve().parent.parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)


def core_free_port_impl() -> int:
    """A free TCP port on 127.0.0.1 (nothing listens on it when this returns)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def core_wait_for_impl(
    cond: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01
) -> Any:
    """Poll ``cond`` until it returns something truthy; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"condition not met within {timeout} s: {cond}")
        time.sleep(interval)


class CoreEvents:
    """Records connection callbacks (with the thread each ran on) for assertions."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.errors: list[BaseException] = []
        self.disconnected = threading.Event()
        self.reconnected = threading.Event()
        self.closed = threading.Event()
        self.counts = {"disconnected": 0, "reconnected": 0, "closed": 0}
        self.threads: dict[str, str] = {}

    def _mark(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1
            self.threads[what] = threading.current_thread().name

    def error_cb(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)
            self.threads["error"] = threading.current_thread().name

    def disconnected_cb(self) -> None:
        self._mark("disconnected")
        self.disconnected.set()

    def reconnected_cb(self) -> None:
        self._mark("reconnected")
        self.reconnected.set()

    def closed_cb(self) -> None:
        self._mark("closed")
        self.closed.set()

    def kwargs(self) -> dict[str, Any]:
        """The callback keyword arguments for ``jsclient.connect``."""
        return {
            "error_cb": self.error_cb,
            "disconnected_cb": self.disconnected_cb,
            "reconnected_cb": self.reconnected_cb,
            "closed_cb": self.closed_cb,
        }

    def errors_of(self, cls: type[BaseException]) -> list[BaseException]:
        with self.lock:
            return [e for e in self.errors if isinstance(e, cls)]


@pytest.fixture
def core_wait_for() -> CoreWaitFor:
    """The :func:`core_wait_for` polling helper."""
    return core_wait_for_impl


@pytest.fixture
def core_free_port() -> Callable[[], int]:
    """The :func:`core_free_port_impl` helper."""
    return core_free_port_impl


@pytest.fixture
def core_events() -> CoreEvents:
    """A fresh :class:`CoreEvents` recorder."""
    return CoreEvents()


@pytest.fixture
def core_connect() -> Iterator[CoreConnect]:
    """``core_connect(servers, **options) -> Client``; every client is closed at teardown."""
    clients: list[Client] = []

    def connect(*args: Any, **kwargs: Any) -> Client:
        nc = jsclient.connect(*args, **kwargs)
        clients.append(nc)
        return nc

    try:
        yield connect
    finally:
        for nc in clients:
            try:
                nc.close()
            except Exception:
                pass
        for nc in clients:
            assert nc.is_closed


@pytest.fixture
def nc(nats_server: NatsServer) -> Iterator[jsclient.Client]:
    """A client on the test's server that reconnects quickly; closed after the test."""
    client = jsclient.connect(nats_server.url, reconnect_wait=0.1, max_reconnect_attempts=-1)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def echo(nats_server: NatsServer) -> Iterator[jsclient.Client]:
    """Another connection on the test's server: ``echo.*`` answers with the payload."""
    with jsclient.connect(nats_server.url) as peer:
        peer.subscribe("echo.*", cb=lambda m: m.respond(m.data))
        peer.flush()
        yield peer
