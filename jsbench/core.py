"""Core NATS workloads for jsclient, nats-py and natsio (both asyncio).

Each function runs in a fresh process of its own (see
:mod:`jsbench.runner`) and returns a :class:`Result`. Receive workloads
get their messages from a separate publisher process (the same program for
every client, so the comparison is fair), with a credit window so a slow
receiver is never cut off as a slow consumer. Request workloads talk to the
shared echo peer process (:mod:`jsbench.peer`).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any

from jsbench.peer import ECHO_SUBJECT
from jsbench.result import Result, percentiles, wait_all

_SUBJECT = "bench.core"

# A publisher process: sends N messages, waiting for a credit message every
# `window/2` messages so at most `window` are in flight toward the receiver.
_PUBLISHER = r"""
import sys, jsclient
url, n, size, window = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
nc = jsclient.connect(url)
credits = nc.subscribe("bench.credit")
nc.flush()
print("ready", flush=True)
sys.stdin.readline()
payload = b"x" * size
step = max(1, window // 2)
allowed = window
for i in range(n):
    if i >= allowed:
        credits.next_msg(timeout=60)
        allowed += step
    nc.publish("bench.core", payload)
nc.flush(timeout=60)
nc.close()
"""


class _Publisher:
    """The external publisher process for receive workloads."""

    def __init__(self, url: str, n: int, size: int, window: int = 20_000) -> None:
        self.window = window
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _PUBLISHER, url, str(n), str(size), str(window)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError("benchmark publisher failed to start")

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def wait(self) -> None:
        self.proc.wait(timeout=120)


# -- publish ------------------------------------------------------------------


def js_publish(url: str, n: int, size: int) -> Result:
    import jsclient

    payload = b"x" * size
    with jsclient.connect(url) as nc:
        nc.flush()
        t0 = time.perf_counter()
        for _ in range(n):
            nc.publish(_SUBJECT, payload)
        nc.flush(timeout=60)
        dt = time.perf_counter() - t0
    return Result(n / dt)


def py_publish(url: str, n: int, size: int) -> Result:
    import asyncio

    import nats

    async def run() -> float:
        nc = await nats.connect(url)
        payload = b"x" * size
        t0 = time.perf_counter()
        for _ in range(n):
            await nc.publish(_SUBJECT, payload)
        await nc.flush(timeout=60)
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


def nio_publish(url: str, n: int, size: int) -> Result:
    import asyncio

    import natsio

    async def run() -> float:
        nc = await natsio.connect(url)
        payload = b"x" * size
        t0 = time.perf_counter()
        for _ in range(n):
            await nc.publish(_SUBJECT, payload)
        await nc.flush(timeout=60)
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


# -- receive ------------------------------------------------------------------


def js_receive(url: str, n: int, size: int, mode: str) -> Result:
    """mode: next_msg | iter | callback."""
    import jsclient

    pub = _Publisher(url, n, size)
    step = max(1, pub.window // 2)
    done = threading.Event()
    count = 0
    with jsclient.connect(url) as nc:

        def credit(i: int) -> None:
            if i % step == 0:
                nc.publish("bench.credit", b"")

        def on_msg(_m: Any) -> None:
            nonlocal count
            count += 1
            credit(count)
            if count >= n:
                done.set()

        limit = pub.window * 2
        sub = nc.subscribe(
            _SUBJECT,
            cb=on_msg if mode == "callback" else None,
            pending_msgs_limit=limit,
            pending_bytes_limit=1 << 30,
        )
        nc.flush()
        t0 = time.perf_counter()
        pub.go()
        if mode == "callback":
            wait_all(done, 120, "callback subscription")
        elif mode == "next_msg":
            for i in range(1, n + 1):
                sub.next_msg(timeout=30)
                credit(i)
            count = n
        else:
            for i, _m in enumerate(sub, 1):
                credit(i)
                if i >= n:
                    break
            count = n
        dt = time.perf_counter() - t0
    pub.wait()
    return Result(count / dt)


def py_receive(url: str, n: int, size: int, mode: str) -> Result:
    import asyncio

    import nats

    pub = _Publisher(url, n, size)
    step = max(1, pub.window // 2)

    async def run() -> float:
        nc = await nats.connect(url)
        done = asyncio.Event()
        count = 0

        async def on_msg(_m: Any) -> None:
            nonlocal count
            count += 1
            if count % step == 0:
                await nc.publish("bench.credit", b"")
            if count >= n:
                done.set()

        limit = pub.window * 2
        if mode == "callback":
            await nc.subscribe(
                _SUBJECT, cb=on_msg, pending_msgs_limit=limit, pending_bytes_limit=1 << 30
            )
        else:
            sub = await nc.subscribe(
                _SUBJECT, pending_msgs_limit=limit, pending_bytes_limit=1 << 30
            )
        await nc.flush()
        t0 = time.perf_counter()
        pub.go()
        if mode == "callback":
            await asyncio.wait_for(done.wait(), 120)
        elif mode == "next_msg":
            for i in range(1, n + 1):
                await sub.next_msg(timeout=30)
                if i % step == 0:
                    await nc.publish("bench.credit", b"")
        else:
            i = 0
            async for _m in sub.messages:
                i += 1
                if i % step == 0:
                    await nc.publish("bench.credit", b"")
                if i >= n:
                    break
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    dt = asyncio.run(run())
    pub.wait()
    return Result(n / dt)


def nio_receive(url: str, n: int, size: int, mode: str) -> Result:
    """natsio: ``next_msg``, ``async for``, or a plain (non-async) callback, its fastest form."""
    import asyncio

    import natsio

    pub = _Publisher(url, n, size)
    step = max(1, pub.window // 2)

    async def run() -> float:
        nc = await natsio.connect(url)
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        count = 0
        credits: set[Any] = set()

        def on_msg(_m: Any) -> None:
            nonlocal count
            count += 1
            if count % step == 0:
                task = loop.create_task(nc.publish("bench.credit", b""))
                credits.add(task)
                task.add_done_callback(credits.discard)
            if count >= n:
                done.set()

        limit = pub.window * 2
        sub = nc.subscribe(
            _SUBJECT,
            cb=on_msg if mode == "callback" else None,
            pending_msgs_limit=limit,
            pending_bytes_limit=1 << 30,
        )
        await nc.flush()
        t0 = time.perf_counter()
        pub.go()
        if mode == "callback":
            await asyncio.wait_for(done.wait(), 120)
        elif mode == "next_msg":
            for i in range(1, n + 1):
                await sub.next_msg(timeout=30)
                if i % step == 0:
                    await nc.publish("bench.credit", b"")
        else:
            i = 0
            async for _m in sub:
                i += 1
                if i % step == 0:
                    await nc.publish("bench.credit", b"")
                if i >= n:
                    break
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    dt = asyncio.run(run())
    pub.wait()
    return Result(n / dt)


# -- request / reply (against the echo peer process) ------------------------------


def js_request(url: str, n: int, size: int) -> Result:
    import jsclient

    payload = b"x" * size
    lat: list[float] = []
    with jsclient.connect(url) as nc:
        nc.request(ECHO_SUBJECT, payload, timeout=5)  # warm-up: the reply subscription
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            nc.request(ECHO_SUBJECT, payload, timeout=5)
            lat.append(time.perf_counter() - t)
        dt = time.perf_counter() - t0
    return Result(n / dt, *percentiles(lat))


def py_request(url: str, n: int, size: int) -> Result:
    import asyncio

    import nats

    async def run() -> tuple[float, list[float]]:
        nc = await nats.connect(url)
        payload = b"x" * size
        await nc.request(ECHO_SUBJECT, payload, timeout=5)
        lat: list[float] = []
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await nc.request(ECHO_SUBJECT, payload, timeout=5)
            lat.append(time.perf_counter() - t)
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, lat

    dt, lat = asyncio.run(run())
    return Result(n / dt, *percentiles(lat))


def nio_request(url: str, n: int, size: int) -> Result:
    import asyncio

    import natsio

    async def run() -> tuple[float, list[float]]:
        nc = await natsio.connect(url)
        payload = b"x" * size
        await nc.request(ECHO_SUBJECT, payload, timeout=5)
        lat: list[float] = []
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await nc.request(ECHO_SUBJECT, payload, timeout=5)
            lat.append(time.perf_counter() - t)
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, lat

    dt, lat = asyncio.run(run())
    return Result(n / dt, *percentiles(lat))
