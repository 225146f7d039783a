"""Service (ADR-32) and request-many (ADR-47) rows for jsclient, nats-py and natsio.

Each function runs in a fresh process of its own (see :mod:`jsbench.runner`).

- ``svc-echo``: the service runs in a process of its own
  (:mod:`jsbench.svc_peer`, started here), hosted by the row's own client
  library, as services are deployed (a worker hosts endpoints, a web process
  calls them); the measured process only sends requests. The service
  process's CPU time during the measured part is the result's ``peer_cpu``.
- The other service rows (``svc-echo-local``, ``svc-io-*``): the service and
  its requesters share one connection in the measured process, as a worker
  that also calls its own endpoints would. jsclient's handlers run on the
  endpoint's handler threads (``threads=``); nats-py's ``nats.micro`` and
  natsio's ``natsio.micro`` run theirs on the connection's event loop, one
  request at a time per endpoint (a subscription callback), so how a handler
  runs blocking work is the user's choice (``mode``): ``blocking`` calls it in
  the handler (their default), ``executor`` awaits
  ``loop.run_in_executor(None, ...)`` in the handler (the event loop stays
  free, but the next request waits for this one), ``task`` starts a task per
  request that does the same and replies (requests run side by side). The
  loop's default executor is a ``ThreadPoolExecutor`` of :data:`REQUESTERS`
  threads, as many as jsclient's handler threads.
- Request-many: one request answered by :data:`RESPONDERS` replies from the
  echo peer process (:mod:`jsbench.peer`, started here), so the responder's
  cost is outside the measured process and the same for every client. A
  row's ``n`` counts replies; it sends ``n // RESPONDERS`` requests.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jsbench.peer import EchoPeer
from jsbench.result import Result, percentiles, process_cpu
from jsbench.svc_peer import (
    INFO_SUBJECT,
    SERVICE,
    VERSION,
    ServicePeer,
    add_aio_service,
    aio_connect,
)
from jsbench.threads import shares, work

ECHO_SUBJECT = "bench.svc.echo"
IO_SUBJECT = "bench.svc.io"
MANY_SUBJECT = "bench.many"
IO_WAIT = 0.001  # seconds a request's handler blocks, as a database call would
REQUESTERS = 8  # concurrent requesters in the io rows, and handler threads to serve them
RESPONDERS = 100  # replies to one request-many
MODES = ("blocking", "executor", "task")
_TIMEOUT = 10.0  # seconds per request: a run slower than that has failed
_WAIT = 300.0  # seconds for a whole threaded run


# -- services: jsclient -------------------------------------------------------------


def js_service(
    url: str,
    n: int,
    size: int,
    io: bool = False,
    requesters: int = 1,
    threads: int = 1,
    cpu: bool = False,
) -> Result:
    """``requesters`` threads (1: this one) send ``n`` requests to an endpoint of a service
    on the same connection with ``threads`` handler threads; ``io``: each handler blocks
    :data:`IO_WAIT` seconds before it replies; ``cpu``: each handler first does
    :func:`jsbench.threads.work` (about 50 µs of pure Python)."""
    import jsclient
    from jsclient.micro import Request

    subject = IO_SUBJECT if io else ECHO_SUBJECT
    payload = b"x" * size

    def handler(req: Request) -> None:
        if io:
            time.sleep(IO_WAIT)
        if cpu:
            work(req.data)
        req.respond(req.data)

    with jsclient.connect(url) as nc, nc.add_service(SERVICE, VERSION, threads=threads) as svc:
        svc.add_endpoint("ep", handler, subject=subject)
        nc.request(subject, payload, timeout=_TIMEOUT)  # warm-up: the reply subscription

        def requests(count: int, lat: list[float]) -> None:
            for _ in range(count):
                t = time.perf_counter()
                nc.request(subject, payload, timeout=_TIMEOUT)
                lat.append(time.perf_counter() - t)

        if requesters == 1:
            lat: list[float] = []
            t0 = time.perf_counter()
            requests(n, lat)
            dt = time.perf_counter() - t0
        else:
            lat, dt = _in_threads(requests, shares(n, requesters))
    return Result(n / dt, *percentiles(lat))


def _in_threads(fn: Any, counts: list[int]) -> tuple[list[float], float]:
    """Run ``fn(count, latencies)`` on a thread per count, started together: (latencies, s)."""
    start = threading.Barrier(len(counts) + 1, timeout=_WAIT)
    lats: list[list[float]] = [[] for _ in counts]
    failures: list[BaseException] = []

    def run(count: int, lat: list[float]) -> None:
        try:
            start.wait()
            fn(count, lat)
        except BaseException as exc:
            failures.append(exc)

    pool = [
        threading.Thread(target=run, args=(c, lat), name=f"bench-requester-{i}", daemon=True)
        for i, (c, lat) in enumerate(zip(counts, lats, strict=True))
    ]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join(_WAIT)
    dt = time.perf_counter() - t0
    if failures:
        raise failures[0]
    if any(t.is_alive() for t in pool):
        raise RuntimeError(f"requesters still running after {_WAIT:g} s")
    return [x for lat in lats for x in lat], dt


# -- services: nats-py and natsio ------------------------------------------------------


def py_service(
    url: str, n: int, size: int, io: bool = False, requesters: int = 1, mode: str = "blocking"
) -> Result:
    """nats-py: ``nats.micro``; ``requesters`` tasks on the service's event loop."""
    return _aio_service("nats-py", url, n, size, io, requesters, mode)


def nio_service(
    url: str, n: int, size: int, io: bool = False, requesters: int = 1, mode: str = "blocking"
) -> Result:
    """natsio: ``natsio.micro``; ``requesters`` tasks on the service's event loop."""
    return _aio_service("natsio", url, n, size, io, requesters, mode)


def _aio_service(
    client: str, url: str, n: int, size: int, io: bool, requesters: int, mode: str
) -> Result:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    subject = IO_SUBJECT if io else ECHO_SUBJECT
    payload = b"x" * size
    wait = IO_WAIT if io else 0.0

    async def run() -> tuple[float, list[float]]:
        nc = await aio_connect(client, url)
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(REQUESTERS, thread_name_prefix="bench-handler")
        loop.set_default_executor(pool)
        running: set[Any] = set()

        async def in_executor(req: Any) -> None:
            if wait:
                await loop.run_in_executor(None, time.sleep, wait)
            await req.respond(req.data)

        async def handler(req: Any) -> None:
            if mode == "task":
                task = loop.create_task(in_executor(req))
                running.add(task)  # a task nobody holds may be collected
                task.add_done_callback(running.discard)
            elif mode == "executor":
                await in_executor(req)
            else:
                if wait:
                    time.sleep(wait)  # blocks the event loop, as a sync database call does
                await req.respond(req.data)

        svc = await add_aio_service(client, nc, subject, handler)
        await nc.request(subject, payload, timeout=_TIMEOUT)  # warm-up

        async def requests(count: int, lat: list[float]) -> None:
            for _ in range(count):
                t = time.perf_counter()
                await nc.request(subject, payload, timeout=_TIMEOUT)
                lat.append(time.perf_counter() - t)

        lats: list[list[float]] = [[] for _ in range(requesters)]
        t0 = time.perf_counter()
        await asyncio.gather(
            *(requests(c, lat) for c, lat in zip(shares(n, requesters), lats, strict=True))
        )
        dt = time.perf_counter() - t0
        await svc.stop()
        await nc.close()
        return dt, [x for lat in lats for x in lat]

    dt, lat = asyncio.run(run())
    return Result(n / dt, *percentiles(lat))


# -- services in a process of their own (svc-echo) ---------------------------------------


def _cpu_between(pid: int, before: float | None) -> float | None:
    after = process_cpu(pid)
    return None if before is None or after is None else after - before


def js_remote_echo(url: str, n: int, size: int) -> Result:
    """``n`` sequential requests to the echo endpoint of a service hosted by jsclient in
    the service peer process."""
    import jsclient

    payload = b"x" * size
    with ServicePeer("jsclient", url, ECHO_SUBJECT) as peer, jsclient.connect(url) as nc:
        nc.request(ECHO_SUBJECT, payload, timeout=_TIMEOUT)  # warm-up: the reply subscription
        peer.check_info(nc.request(INFO_SUBJECT, b"", timeout=_TIMEOUT).data)
        lat: list[float] = []
        cpu0 = process_cpu(peer.pid)
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            nc.request(ECHO_SUBJECT, payload, timeout=_TIMEOUT)
            lat.append(time.perf_counter() - t)
        dt = time.perf_counter() - t0
        peer_cpu = _cpu_between(peer.pid, cpu0)
    return Result(n / dt, *percentiles(lat), peer_cpu=peer_cpu)


def py_remote_echo(url: str, n: int, size: int) -> Result:
    """nats-py: as :func:`js_remote_echo`, the service hosted by ``nats.micro``."""
    return _aio_remote_echo("nats-py", url, n, size)


def nio_remote_echo(url: str, n: int, size: int) -> Result:
    """natsio: as :func:`js_remote_echo`, the service hosted by ``natsio.micro``."""
    return _aio_remote_echo("natsio", url, n, size)


def _aio_remote_echo(client: str, url: str, n: int, size: int) -> Result:
    import asyncio

    payload = b"x" * size

    async def run(peer: ServicePeer) -> tuple[float, list[float], float | None]:
        nc = await aio_connect(client, url)
        await nc.request(ECHO_SUBJECT, payload, timeout=_TIMEOUT)  # warm-up
        peer.check_info((await nc.request(INFO_SUBJECT, b"", timeout=_TIMEOUT)).data)
        lat: list[float] = []
        cpu0 = process_cpu(peer.pid)
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await nc.request(ECHO_SUBJECT, payload, timeout=_TIMEOUT)
            lat.append(time.perf_counter() - t)
        dt = time.perf_counter() - t0
        peer_cpu = _cpu_between(peer.pid, cpu0)
        await nc.close()
        return dt, lat, peer_cpu

    with ServicePeer(client, url, ECHO_SUBJECT) as peer:
        dt, lat, peer_cpu = asyncio.run(run(peer))
    return Result(n / dt, *percentiles(lat), peer_cpu=peer_cpu)


# -- request-many ------------------------------------------------------------------------


def _requests(n: int) -> int:
    return max(1, n // RESPONDERS)


def _many_peer(url: str) -> EchoPeer:
    return EchoPeer(url, MANY_SUBJECT, replies=RESPONDERS)


def _expect(got: int) -> None:
    if got != RESPONDERS:
        raise RuntimeError(f"request-many: {got} of {RESPONDERS} replies")


def js_request_many(url: str, n: int, size: int) -> Result:
    import jsclient

    payload = b"x" * size
    count = _requests(n)
    with _many_peer(url), jsclient.connect(url) as nc:

        def one() -> int:
            replies = nc.request_many(MANY_SUBJECT, payload, timeout=_TIMEOUT, max_count=RESPONDERS)
            return sum(1 for _ in replies)

        _expect(one())  # warm-up
        t0 = time.perf_counter()
        for _ in range(count):
            _expect(one())
        dt = time.perf_counter() - t0
    return Result(count * RESPONDERS / dt)


def py_request_many(url: str, n: int, size: int) -> Result:
    """nats-py has no request-many: a new inbox subscription, a publish, ``next_msg`` 100 times."""
    import asyncio

    import nats

    payload = b"x" * size
    count = _requests(n)

    async def run() -> float:
        nc = await nats.connect(url)

        async def one() -> int:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            await nc.publish(MANY_SUBJECT, payload, reply=inbox)
            got = 0
            for _ in range(RESPONDERS):
                await sub.next_msg(timeout=_TIMEOUT)
                got += 1
            await sub.unsubscribe()
            return got

        _expect(await one())
        t0 = time.perf_counter()
        for _ in range(count):
            _expect(await one())
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    with _many_peer(url):
        dt = asyncio.run(run())
    return Result(count * RESPONDERS / dt)


def nio_request_many(url: str, n: int, size: int) -> Result:
    import asyncio

    import natsio

    payload = b"x" * size
    count = _requests(n)

    async def run() -> float:
        nc = await natsio.connect(url)

        async def one() -> int:
            got = 0
            replies = nc.request_many(MANY_SUBJECT, payload, timeout=_TIMEOUT, max_msgs=RESPONDERS)
            async for _m in replies:
                got += 1
            return got

        _expect(await one())
        t0 = time.perf_counter()
        for _ in range(count):
            _expect(await one())
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    with _many_peer(url):
        dt = asyncio.run(run())
    return Result(count * RESPONDERS / dt)
