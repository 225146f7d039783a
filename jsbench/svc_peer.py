"""The service host of the ``svc-echo`` row: a service in a process of its own.

Services are deployed in processes of their own (a worker hosts endpoints, a
web process calls them), so the row's requester and its service do not share
a process. :class:`ServicePeer` starts ``main([CLIENT, URL, SUBJECT])`` in a
new interpreter (the measured process's, with its environment, so
``JSCLIENT_IMPL`` carries over). It hosts the service
:data:`SERVICE` / :data:`VERSION` with one echo endpoint on SUBJECT, hosted by
CLIENT, the same client library as the row's requester:

- jsclient: ``nc.add_service`` (one handler thread, its default), a handler
  that calls ``req.respond(req.data)``;
- nats-py: ``nats.micro.add_service`` and ``add_endpoint``; natsio:
  ``natsio.micro``; an async handler that awaits ``req.respond(req.data)``.

The service's metadata holds the host's pid (``{"pid": "..."}``), so a
requester can check that it is answered from this process (``$SRV.INFO``).
It prints ``ready`` once the endpoint's subscription is at the server, and
exits when its standard input closes (the parent ended or died) or the server
goes away (it connects with reconnecting off).

Like every bench module, this one imports no client at import time.
"""

from __future__ import annotations

import os
import select
import sys
import threading
from typing import Any

from jsbench._child import module_command
from jsbench.peer import EchoPeer

SERVICE, VERSION = "bench", "1.0.0"
CLIENTS = ("jsclient", "nats-py", "natsio")
PID = "pid"  # the service metadata key that names its host process
INFO_SUBJECT = f"$SRV.INFO.{SERVICE}"  # the service's description (one instance: one reply)
_POLL = 0.2  # seconds between checks for "stdin closed" or "the connection closed"


async def add_aio_service(
    client: str, nc: Any, subject: str, handler: Any, metadata: dict[str, str] | None = None
) -> Any:
    """nats-py or natsio: a started service with one endpoint on ``subject``, its
    subscription at the server."""
    if client == "nats-py":
        from nats.micro import add_service

        svc = await add_service(nc, name=SERVICE, version=VERSION, metadata=metadata)
        await svc.add_endpoint(name="ep", subject=subject, handler=handler)
    else:
        from natsio.micro import add_service as nio_add_service

        svc = nio_add_service(nc, name=SERVICE, version=VERSION, metadata=metadata)
        svc.add_endpoint("ep", handler, subject=subject)
    await nc.flush()
    return svc


async def aio_connect(client: str, url: str, **options: Any) -> Any:
    """A nats-py or natsio connection."""
    if client == "nats-py":
        import nats

        return await nats.connect(url, **options)
    import natsio

    return await natsio.connect(url, **options)


def _serve_jsclient(url: str, subject: str, stop: threading.Event) -> None:
    import jsclient
    from jsclient.micro import Request

    def echo(req: Request) -> None:
        req.respond(req.data)

    meta = {PID: str(os.getpid())}
    with (
        jsclient.connect(url, reconnect=False) as nc,
        nc.add_service(SERVICE, VERSION, metadata=meta) as svc,
    ):
        svc.add_endpoint("ep", echo, subject=subject)
        nc.flush()
        print("ready", flush=True)
        while not stop.wait(_POLL) and not nc.is_closed:
            pass


async def _serve_aio(client: str, url: str, subject: str, stop: threading.Event) -> None:
    import asyncio

    nc = await aio_connect(client, url, allow_reconnect=False)

    async def echo(req: Any) -> None:
        await req.respond(req.data)

    svc = await add_aio_service(client, nc, subject, echo, {PID: str(os.getpid())})
    print("ready", flush=True)

    def closed() -> bool:
        if client == "nats-py":
            return bool(nc.is_closed)
        return str(nc.status.name) == "CLOSED"

    while not stop.is_set() and not closed():
        await asyncio.sleep(_POLL)
    if not closed():
        await svc.stop()
        await nc.close()


def _until_stdin_closes(stop: threading.Event) -> None:
    """Set ``stop`` when stdin closes; end when ``stop`` is set (not blocked in a read, which
    would wedge the interpreter's exit)."""
    fd = sys.stdin.fileno()
    while not stop.is_set():
        readable, _, _ = select.select([fd], [], [], _POLL)
        if readable and not os.read(fd, 4096):
            break
    stop.set()


def main(argv: list[str]) -> int:
    """``CLIENT URL SUBJECT``: host the echo service until stdin closes or the server goes away."""
    client, url, subject = argv
    if client not in CLIENTS:
        raise SystemExit(f"svc_peer: no client {client!r} (one of {', '.join(CLIENTS)})")
    stop = threading.Event()
    stdin = threading.Thread(
        target=_until_stdin_closes, args=(stop,), name="svc-peer-stdin", daemon=True
    )
    stdin.start()
    try:
        if client == "jsclient":
            _serve_jsclient(url, subject, stop)
        else:
            import asyncio

            asyncio.run(_serve_aio(client, url, subject, stop))
    except OSError:
        pass  # the server went away: nothing left to serve
    finally:
        stop.set()
        stdin.join(5 * _POLL)
    return 0


class ServicePeer(EchoPeer):
    """Starts the service host process (``client`` hosts it) and stops it again."""

    what = "the service peer"

    def __init__(self, client: str, url: str, subject: str, timeout: float = 30.0) -> None:
        if client not in CLIENTS:
            raise ValueError(f"client must be one of {CLIENTS}, got {client!r}")
        self._start(module_command("jsbench.svc_peer", [client, url, subject]), timeout)

    def check_info(self, info: bytes) -> None:
        """Raise unless ``info`` (a ``$SRV.INFO`` reply) comes from this peer's process."""
        import json

        pid = (json.loads(info).get("metadata") or {}).get(PID)
        if pid != str(self.pid) or pid == str(os.getpid()):
            raise RuntimeError(
                f"the service answered from pid {pid}, not from its peer process {self.pid}"
            )

    def __enter__(self) -> ServicePeer:
        return self
