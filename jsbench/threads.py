"""Rows where user code works in threads: handler threads that consume, threads that publish.

They are the rows to compare a free-threaded interpreter with itself, GIL on
(``PYTHON_GIL=1``) and off (``PYTHON_GIL=0``), in the same binary: with the GIL
only one handler runs Python code at a time, without it they can run side by
side. Each message costs :func:`work`, a fixed amount of pure-Python work
(about 50 µs on the project's machine with CPython 3.11), the same for every
client and interpreter.

How each client does it, in its idiomatic way:

- jsclient, consume: one ``consume()`` whose callback hands each message to
  ``threads`` handler threads through a queue as long as the thread count;
  each handler does the work and acks. This is how the Django worker
  (``jetstream_worker --threads N``) runs: the consume buffer alone decides
  how far the client pulls ahead, and one pull loop serves every thread.
  Several ``consume()`` calls on one consumer would each pull a buffer of
  their own.
- nats-py (``pull_subscribe().fetch``) and natsio (``consume()`` iterator),
  consume: the asyncio form of the same thing. The messages go through an
  ``asyncio.Queue`` of ``threads`` to ``threads`` tasks, and each task runs the
  work with ``loop.run_in_executor`` on a ``ThreadPoolExecutor(threads)`` and
  then awaits the ack.
- jsclient, publish: ``threads`` threads call ``publish_async`` on one
  connection and one JetStream context (one window), until the last ack.
- nats-py and natsio, publish: ``threads`` tasks on one event loop and one
  connection. An asyncio connection belongs to the thread that runs its loop,
  so tasks are how their users publish concurrently on one connection; a
  thread of its own per publisher would need a loop and a connection each.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from jsbench.js import (
    BATCH,
    CON_FILTER,
    PUB_SUBJECT,
    WINDOW,
    _consumer,
    _nio_consumer,
)
from jsbench.result import Result, wait_all

# About 50 µs of pure Python per message on the project's machine (3.11).
WORK_ROUNDS = 1100
_WAIT = 300.0  # seconds: a run that takes longer has failed


def work(data: bytes, rounds: int = WORK_ROUNDS) -> int:
    """The handler's job: a loop of integer arithmetic that no C call shortcuts.

    The modulus is made by each call, not a constant of the code: on a
    free-threaded 3.13 every thread running this loop would otherwise change
    the shared constant's reference count at each step, and two threads ran
    it slower than one (0.66x); with an object of its own each thread scales
    (1.84x with 2 threads on 2 cores). The result is the same either way.
    """
    m = int("1000003")
    h = len(data)
    for i in range(rounds):
        h = (h * 31 + i) % m
    return h


def shares(n: int, parts: int) -> list[int]:
    """``n`` split into ``parts`` counts that differ by at most one."""
    q, r = divmod(n, parts)
    return [q + (i < r) for i in range(parts)]


# -- consume ---------------------------------------------------------------------------


def js_consume_threads(url: str, n: int, size: int, threads: int = 2) -> Result:
    import jsclient

    work_q: queue.Queue[Any] = queue.Queue(maxsize=threads)
    dispatched = 0
    all_dispatched = threading.Event()
    failures: list[BaseException] = []

    def dispatch(m: Any) -> None:  # consume's own thread: one call at a time
        nonlocal dispatched
        if dispatched >= n:  # a redelivery after the run: not counted twice
            return
        work_q.put(m, timeout=_WAIT)
        dispatched += 1
        if dispatched >= n:
            all_dispatched.set()

    def handle() -> None:
        try:
            while True:
                m = work_q.get(timeout=_WAIT)
                if m is None:
                    return
                work(m.data)
                m.ack()
        except BaseException as exc:
            failures.append(exc)

    with jsclient.connect(url) as nc:
        c = _consumer(nc, True)
        pool = [
            threading.Thread(target=handle, name=f"bench-handler-{i}", daemon=True)
            for i in range(threads)
        ]
        t0 = time.perf_counter()
        for t in pool:
            t.start()
        cc = c.consume(dispatch, max_messages=BATCH)
        try:
            wait_all(all_dispatched, _WAIT, "consume with handler threads")
        finally:
            try:
                for _ in pool:  # behind the last messages: each handler finishes its share
                    work_q.put(None, timeout=_WAIT)
            except queue.Full:  # the handlers died; their error is raised below
                pass
            for t in pool:
                t.join(_WAIT)
        nc.flush(timeout=30)
        dt = time.perf_counter() - t0
        cc.stop()
    if failures:
        raise failures[0]
    return Result(n / dt)


async def _work_in_threads(feed: AsyncIterator[Any], n: int, threads: int) -> None:
    """Hand the first ``n`` messages of the async iterator ``feed`` to ``threads`` tasks that
    run :func:`work` on a thread pool of the same size and then await the ack."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    loop = asyncio.get_running_loop()
    work_q: asyncio.Queue[Any] = asyncio.Queue(maxsize=threads)

    async def handle(pool: ThreadPoolExecutor) -> None:
        while True:
            m = await work_q.get()
            if m is None:
                return
            await loop.run_in_executor(pool, work, m.data)
            await m.ack()

    with ThreadPoolExecutor(threads, thread_name_prefix="bench-handler") as pool:
        tasks = [asyncio.create_task(handle(pool)) for _ in range(threads)]
        got = 0
        async for m in feed:
            await work_q.put(m)
            got += 1
            if got >= n:
                break
        for _ in tasks:
            await work_q.put(None)
        await asyncio.wait_for(asyncio.gather(*tasks), _WAIT)


def py_consume_threads(url: str, n: int, size: int, threads: int = 2) -> Result:
    import asyncio

    import nats
    from nats.js.api import ConsumerConfig

    async def run() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream()
        cfg = ConsumerConfig(max_ack_pending=20_000)
        psub = await js.pull_subscribe(CON_FILTER, f"p{time.monotonic_ns()}", config=cfg)

        async def feed() -> AsyncIterator[Any]:
            got = 0
            while got < n:
                for m in await psub.fetch(min(BATCH, n - got), timeout=5):
                    got += 1
                    yield m

        t0 = time.perf_counter()
        await _work_in_threads(feed(), n, threads)
        await nc.flush()
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


def nio_consume_threads(url: str, n: int, size: int, threads: int = 2) -> Result:
    import asyncio

    import natsio

    async def run() -> float:
        nc = await natsio.connect(url)
        c = await _nio_consumer(nc, True)
        t0 = time.perf_counter()
        async with c.consume(max_messages=BATCH) as msgs:
            await _work_in_threads(msgs, n, threads)
        await nc.flush()
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


# -- publish ---------------------------------------------------------------------------


def js_publish_threads(url: str, n: int, size: int, threads: int = 2) -> Result:
    import jsclient

    payload = b"x" * size
    start = threading.Barrier(threads + 1, timeout=_WAIT)
    failures: list[BaseException] = []
    with jsclient.connect(url) as nc:
        js = nc.jetstream(publish_async_max_pending=WINDOW, publish_async_stall_wait=60.0)
        js.publish(PUB_SUBJECT, payload)

        def publish(count: int) -> None:
            try:
                start.wait()
                for _ in range(count):
                    js.publish_async(PUB_SUBJECT, payload)
            except BaseException as exc:
                failures.append(exc)

        pool = [
            threading.Thread(target=publish, args=(k,), name=f"bench-publisher-{i}", daemon=True)
            for i, k in enumerate(shares(n, threads))
        ]
        for t in pool:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in pool:
            t.join(_WAIT)
        if failures:
            raise failures[0]
        js.publish_async_complete(timeout=120)
        dt = time.perf_counter() - t0
    return Result(n / dt)


def py_publish_threads(url: str, n: int, size: int, threads: int = 2) -> Result:
    import asyncio

    import nats

    async def run() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream(publish_async_max_pending=WINDOW)
        payload = b"x" * size
        await js.publish(PUB_SUBJECT, payload)

        async def publish(count: int) -> None:
            for _ in range(count):
                await js.publish_async(PUB_SUBJECT, payload)

        t0 = time.perf_counter()
        await asyncio.gather(*(publish(k) for k in shares(n, threads)))
        await js.publish_async_completed()
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


def nio_publish_threads(url: str, n: int, size: int, threads: int = 2) -> Result:
    import asyncio

    import natsio

    async def run() -> float:
        nc = await natsio.connect(url)
        js = nc.jetstream(publish_async_max_pending=WINDOW, publish_async_stall_wait=60.0)
        payload = b"x" * size
        await js.publish(PUB_SUBJECT, payload)

        async def publish(count: int) -> None:
            for _ in range(count):
                await js.publish_async(PUB_SUBJECT, payload)

        t0 = time.perf_counter()
        await asyncio.gather(*(publish(k) for k in shares(n, threads)))
        await js.publish_async_complete(timeout=120)
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))
