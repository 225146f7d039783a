"""pytest plugin (entry point ``pytest11: jsclient``): real-server fixtures and a header.

Fixtures:

- ``nats_server``: a fresh JetStream-enabled :class:`~jsclient.server.NatsServer`
  for one test, stopped (and its store removed) afterwards;
- ``nats_url``: that server's URL;
- ``nats_server_factory``: ``factory(**NatsServer kwargs) -> started server``, for
  tests needing auth, TLS or several servers; all are stopped at teardown;
- ``shared_nats_server``: one server for the whole session, for tests that only
  read or that use names of their own.

The report header says which protocol implementation (``JSCLIENT_IMPL``) ran.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jsclient.server import NatsServer

__all__ = [
    "nats_server",
    "nats_server_factory",
    "nats_url",
    "pytest_report_header",
    "shared_nats_server",
]

NatsServerFactory = Callable[..., NatsServer]


def pytest_report_header(config: pytest.Config) -> str:
    """``jsclient: impl=c (JSCLIENT_IMPL=auto)``, or why the implementation did not load."""
    requested = os.environ.get("JSCLIENT_IMPL", "auto")
    try:
        # Imported here: loading the plugin must not pick (or fail to pick) an implementation.
        from jsclient import _impl
    except Exception as exc:
        return (
            f"jsclient: impl=<unavailable: {type(exc).__name__}: {exc}> (JSCLIENT_IMPL={requested})"
        )
    return f"jsclient: impl={_impl.IMPL} (JSCLIENT_IMPL={requested})"


@pytest.fixture
def nats_server_factory() -> Iterator[NatsServerFactory]:
    """Start servers with any :class:`NatsServer` keyword arguments; all stop at teardown."""
    servers: list[NatsServer] = []

    def factory(**kwargs: Any) -> NatsServer:
        srv = NatsServer(**kwargs)
        servers.append(srv)
        return srv.start()

    try:
        yield factory
    finally:
        errors: list[BaseException] = []
        for srv in reversed(servers):
            try:
                srv.stop()
            except Exception as exc:  # stop the others before reporting
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A fresh JetStream-enabled server on a free loopback port, for one test."""
    with NatsServer(jetstream=True) as srv:
        yield srv


@pytest.fixture
def nats_url(nats_server: NatsServer) -> str:
    """The URL of :func:`nats_server`."""
    return nats_server.url


@pytest.fixture(scope="session")
def shared_nats_server() -> Iterator[NatsServer]:
    """One JetStream-enabled server for the whole session; tests must not assume it is empty."""
    with NatsServer(jetstream=True) as srv:
        yield srv
