"""JetStream publish workloads for jsclient, nats-py and natsio (both asyncio).

As in :mod:`jsbench.js` (the consume rows and the parent's set-up), each
function runs in a fresh process of its own and only does the timed work; the
parent gives every publish row a fresh memory stream
(:func:`jsbench.js.setup_publish`) and checks what was stored after it
(:func:`jsbench.js.check_published`). Every client gets the same
``publish_async`` window.
"""

from __future__ import annotations

import time

from jsbench.js import PUB_SUBJECT, WINDOW
from jsbench.result import Result, percentiles


def js_publish_sync(url: str, n: int, size: int) -> Result:
    import jsclient

    payload = b"x" * size
    lat: list[float] = []
    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        js.publish(PUB_SUBJECT, payload)
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            js.publish(PUB_SUBJECT, payload)
            lat.append(time.perf_counter() - t)
        dt = time.perf_counter() - t0
    return Result(n / dt, *percentiles(lat))


def py_publish_sync(url: str, n: int, size: int) -> Result:
    import asyncio

    import nats

    async def run() -> tuple[float, list[float]]:
        nc = await nats.connect(url)
        js = nc.jetstream()
        payload = b"x" * size
        await js.publish(PUB_SUBJECT, payload)
        lat: list[float] = []
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await js.publish(PUB_SUBJECT, payload)
            lat.append(time.perf_counter() - t)
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, lat

    dt, lat = asyncio.run(run())
    return Result(n / dt, *percentiles(lat))


def nio_publish_sync(url: str, n: int, size: int) -> Result:
    import asyncio

    import natsio

    async def run() -> tuple[float, list[float]]:
        nc = await natsio.connect(url)
        js = nc.jetstream()
        payload = b"x" * size
        await js.publish(PUB_SUBJECT, payload)
        lat: list[float] = []
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await js.publish(PUB_SUBJECT, payload)
            lat.append(time.perf_counter() - t)
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, lat

    dt, lat = asyncio.run(run())
    return Result(n / dt, *percentiles(lat))


def js_publish_async(url: str, n: int, size: int, window: int = WINDOW) -> Result:
    import jsclient

    payload = b"x" * size
    with jsclient.connect(url) as nc:
        js = nc.jetstream(publish_async_max_pending=window, publish_async_stall_wait=60.0)
        js.publish(PUB_SUBJECT, payload)
        t0 = time.perf_counter()
        for _ in range(n):
            js.publish_async(PUB_SUBJECT, payload)
        js.publish_async_complete(timeout=120)
        dt = time.perf_counter() - t0
    return Result(n / dt)


def py_publish_async(url: str, n: int, size: int, window: int = WINDOW) -> Result:
    import asyncio

    import nats

    async def run() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream(publish_async_max_pending=window)
        payload = b"x" * size
        await js.publish(PUB_SUBJECT, payload)
        t0 = time.perf_counter()
        for _ in range(n):
            await js.publish_async(PUB_SUBJECT, payload)
        await js.publish_async_completed()
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


def nio_publish_async(url: str, n: int, size: int, window: int = WINDOW) -> Result:
    import asyncio

    import natsio

    async def run() -> float:
        nc = await natsio.connect(url)
        js = nc.jetstream(publish_async_max_pending=window, publish_async_stall_wait=60.0)
        payload = b"x" * size
        await js.publish(PUB_SUBJECT, payload)
        t0 = time.perf_counter()
        for _ in range(n):
            await js.publish_async(PUB_SUBJECT, payload)
        await js.publish_async_complete(timeout=120)
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


def js_publish_ceiling(url: str, n: int, size: int, window: int = 1000) -> Result:
    """Core publishes with reply subjects, ``window`` outstanding, acks counted not decoded.

    What any client's publish_async tops out at against this server, as near
    as jsclient's core API gets.
    """
    import jsclient

    payload = b"x" * size
    with jsclient.connect(url) as nc:
        inbox = nc.new_inbox()
        acks = nc.subscribe(inbox + ".*", pending_msgs_limit=0, pending_bytes_limit=0)
        nc.flush()
        reply = inbox + ".a"
        got = 0
        t0 = time.perf_counter()
        for i in range(n):
            nc.publish(PUB_SUBJECT, payload, reply=reply)
            if i - got >= window:
                acks.next_msg(timeout=30)
                got += 1
        while got < n:
            acks.next_msg(timeout=30)
            got += 1
        dt = time.perf_counter() - t0
    return Result(n / dt)


def js_publisher(url: str, n: int, size: int, window: int = 1000) -> Result:
    import jsclient

    payload = b"x" * size
    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        js.publish(PUB_SUBJECT, payload)
        t0 = time.perf_counter()
        with jsclient.Publisher(js, max_in_flight=window) as pub:
            for _ in range(n):
                pub.publish_async(PUB_SUBJECT, payload)
        dt = time.perf_counter() - t0
    return Result(n / dt)


# -- consume ---------------------------------------------------------------------------
