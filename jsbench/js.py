"""JetStream workloads for jsclient, nats-py and natsio (both asyncio).

Each function runs in a fresh process of its own and only does the timed work
(plus connecting and making its consumer). The streams are prepared by the
parent before each run (:func:`setup_publish`, :func:`setup_consume`), with
jsclient, so no client's process carries another client's setup in its memory
or time: publish rows get a fresh memory stream, consume rows a file stream
pre-filled once and shared by every consume row and round that needs the same
count and size. The asyncio clients get their best idiomatic settings: the
same publish_async window, the same fetch batch, and acks awaited one by one
(neither has a batched ack).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jsbench.result import Result, wait_all

WINDOW = 4000
BATCH = 1000

PUB_STREAM, PUB_SUBJECT = "BPUB", "bpub.x"
CON_STREAM, CON_FILTER = "BCON", "bcon.>"


# -- set-up and checks, run by the parent ----------------------------------------------


def create_stream_anew(js: Any, **config: Any) -> None:
    """``js.create_stream(**config)`` for a stream just deleted: the server may
    still be removing the old file store (err_code 10049, "error creating store
    for stream", seen on a busy machine), so that answer is retried for a while."""
    import jsclient

    for attempt in range(50):
        try:
            js.create_stream(**config)
            return
        except jsclient.errors.ServerError as exc:
            if exc.err_code != 10049 or attempt == 49:
                raise
            time.sleep(0.1)


def setup_publish(url: str, n: int, size: int) -> None:
    """A fresh, empty memory stream for a publish run."""
    import jsclient

    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        js = nc.jetstream()
        try:
            js.delete_stream(PUB_STREAM)
        except jsclient.errors.NotFoundError:
            pass
        js.create_stream(name=PUB_STREAM, subjects=["bpub.>"], storage="memory")


def check_published(url: str, n: int, size: int) -> str | None:
    """After a publish run: did the stream get every message (``n`` plus the warm-up)?"""
    import jsclient

    with jsclient.connect(url, name="jsclient-bench-check") as nc:
        have = nc.jetstream().stream(PUB_STREAM).info().state.messages
    if have < n:
        return f"the stream stored {have} of {n} messages"
    return None


def setup_consume(url: str, n: int, size: int) -> None:
    """A file stream holding exactly ``n`` messages of ``size`` bytes, with no consumers.

    The stream's description records what it was filled with, so the next run
    that needs the same reuses it (limits retention: consuming keeps the
    messages); only the consumers earlier runs left are deleted.
    """
    import jsclient

    tag = f"jsclient bench: {n} x {size} B"
    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        js = nc.jetstream()
        try:
            stream = js.stream(CON_STREAM)
            info = stream.info()
            if info.config.description == tag and info.state.messages == n:
                for name in list(stream.consumer_names()):
                    stream.delete_consumer(name)
                return
            js.delete_stream(CON_STREAM)
        except jsclient.errors.NotFoundError:
            pass
        create_stream_anew(
            js, name=CON_STREAM, subjects=[CON_FILTER], storage="file", description=tag
        )
        # Acked publishes: un-acked core publishes this fast overrun the
        # server's JetStream ingest and some are dropped.
        js = nc.jetstream(publish_async_max_pending=4000, publish_async_stall_wait=60.0)
        payload = b"x" * size
        for _ in range(n):
            js.publish_async("bcon.fill", payload)
        js.publish_async_complete(timeout=300)
        have = js.stream(CON_STREAM).info().state.messages
        if have != n:
            raise RuntimeError(f"stream pre-fill stored {have} of {n} messages")


def _consumer(nc: Any, ack: bool) -> Any:
    return nc.jetstream().create_consumer(
        CON_STREAM,
        durable_name=f"c{time.monotonic_ns()}",
        ack_policy="explicit" if ack else "none",
        max_ack_pending=20_000 if ack else None,
    )


def js_fetch(url: str, n: int, size: int, ack: bool = True) -> Result:
    import jsclient

    with jsclient.connect(url) as nc:
        c = _consumer(nc, ack)
        got = 0
        t0 = time.perf_counter()
        while got < n:
            for m in c.fetch(min(BATCH, n - got), expires=5.0):
                if ack:
                    m.ack()
                got += 1
        nc.flush(timeout=30)
        dt = time.perf_counter() - t0
    return Result(n / dt)


def js_pull_subscribe(url: str, n: int, size: int) -> Result:
    """Legacy ADR-13 path: ``pull_subscribe().fetch(BATCH)`` + ack, as nats-py's own."""
    import jsclient
    from jsclient.api import ConsumerConfig

    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        psub = js.pull_subscribe(
            CON_FILTER, f"p{time.monotonic_ns()}", config=ConsumerConfig(max_ack_pending=20_000)
        )
        got = 0
        t0 = time.perf_counter()
        while got < n:
            for m in psub.fetch(min(BATCH, n - got), timeout=5.0):
                m.ack()
                got += 1
        nc.flush(timeout=30)
        dt = time.perf_counter() - t0
    return Result(n / dt)


def js_push(url: str, n: int, size: int, mode: str = "iter") -> Result:
    """ADR-15 push subscription (durable, ack explicit): iteration + ack, or auto-ack callback."""
    import jsclient

    durable = f"push{time.monotonic_ns()}"
    cfg = {"max_ack_pending": 20_000}
    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        t0 = time.perf_counter()
        if mode == "iter":
            sub = js.subscribe(CON_FILTER, durable=durable, config=cfg)
            for got, m in enumerate(sub, 1):
                m.ack()
                if got >= n:
                    break
        else:
            done = threading.Event()
            count = 0

            def on_msg(_m: Any) -> None:  # acked after it returns
                nonlocal count
                count += 1
                if count >= n:
                    done.set()

            sub = js.subscribe(CON_FILTER, durable=durable, config=cfg, cb=on_msg)
            wait_all(done, 300, "push callback subscription")
        nc.flush(timeout=30)
        dt = time.perf_counter() - t0
        sub.unsubscribe()
    return Result(n / dt)


def py_push(url: str, n: int, size: int, mode: str = "next_msg") -> Result:
    """nats-py's push subscription: ``next_msg`` + ack, or a callback awaiting each ack."""
    import asyncio

    import nats
    from nats.js.api import ConsumerConfig

    async def run() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream()
        cfg = ConsumerConfig(max_ack_pending=20_000)
        durable = f"push{time.monotonic_ns()}"
        t0 = time.perf_counter()
        if mode == "next_msg":
            sub = await js.subscribe(CON_FILTER, durable=durable, manual_ack=True, config=cfg)
            for _ in range(n):
                m = await sub.next_msg(timeout=30)
                await m.ack()
        else:
            done = asyncio.Event()
            got = 0

            async def cb(m: Any) -> None:
                nonlocal got
                await m.ack()
                got += 1
                if got >= n:
                    done.set()

            sub = await js.subscribe(
                CON_FILTER, durable=durable, cb=cb, manual_ack=True, config=cfg
            )
            await asyncio.wait_for(done.wait(), 300)
        await nc.flush()
        dt = time.perf_counter() - t0
        await sub.unsubscribe()
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


def js_ordered_push(url: str, n: int, size: int) -> Result:
    """ADR-15 ordered push subscription, read by iteration."""
    import jsclient

    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        t0 = time.perf_counter()
        sub = js.subscribe(CON_FILTER, ordered_consumer=True)
        for got, _m in enumerate(sub, 1):
            if got >= n:
                break
        dt = time.perf_counter() - t0
        sub.unsubscribe()
    return Result(n / dt)


def js_consume(url: str, n: int, size: int, ack: bool = True) -> Result:
    import jsclient

    done = threading.Event()
    got = 0

    def on_msg(m: Any) -> None:
        nonlocal got
        if ack:
            m.ack()
        got += 1
        if got >= n:
            done.set()

    with jsclient.connect(url) as nc:
        c = _consumer(nc, ack)
        t0 = time.perf_counter()
        cc = c.consume(on_msg, max_messages=BATCH)
        done.wait(300)
        nc.flush(timeout=30)
        dt = time.perf_counter() - t0
        cc.stop()
    if got < n:
        raise RuntimeError(f"consume delivered {got} of {n} messages")
    return Result(got / dt)


def js_messages(url: str, n: int, size: int) -> Result:
    import jsclient

    with jsclient.connect(url) as nc:
        c = _consumer(nc, True)
        got = 0
        t0 = time.perf_counter()
        with c.messages(max_messages=BATCH) as it:
            for m in it:
                m.ack()
                got += 1
                if got >= n:
                    break
        nc.flush(timeout=30)
        dt = time.perf_counter() - t0
    return Result(n / dt)


def js_ordered(url: str, n: int, size: int) -> Result:
    import jsclient

    with jsclient.connect(url) as nc:
        oc = nc.jetstream().ordered_consumer(CON_STREAM)
        got = 0
        t0 = time.perf_counter()
        with oc.messages(max_messages=BATCH) as it:
            for _m in it:
                got += 1
                if got >= n:
                    break
        dt = time.perf_counter() - t0
    return Result(n / dt)


def py_fetch(url: str, n: int, size: int, ack: bool = True) -> Result:
    import asyncio

    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    async def run() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream()
        cfg = ConsumerConfig(
            ack_policy=AckPolicy.EXPLICIT if ack else AckPolicy.NONE,
            max_ack_pending=20_000 if ack else None,
        )
        psub = await js.pull_subscribe(CON_FILTER, f"p{time.monotonic_ns()}", config=cfg)
        got = 0
        t0 = time.perf_counter()
        while got < n:
            for m in await psub.fetch(min(BATCH, n - got), timeout=5):
                if ack:
                    await m.ack()
                got += 1
        await nc.flush()
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


def py_ordered(url: str, n: int, size: int) -> Result:
    import asyncio

    import nats

    async def run() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream()
        sub = await js.subscribe(CON_FILTER, ordered_consumer=True, pending_msgs_limit=-1)
        got = 0
        t0 = time.perf_counter()
        async for _m in sub.messages:
            got += 1
            if got >= n:
                break
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


async def _nio_consumer(nc: Any, ack: bool) -> Any:
    from natsio.jetstream import AckPolicy, ConsumerConfig

    stream = await nc.jetstream().stream(CON_STREAM)
    return await stream.create_consumer(
        ConsumerConfig(
            durable_name=f"n{time.monotonic_ns()}",
            ack_policy=AckPolicy.EXPLICIT if ack else AckPolicy.NONE,
            max_ack_pending=20_000 if ack else None,
        )
    )


def nio_fetch(url: str, n: int, size: int, ack: bool = True) -> Result:
    """natsio ``consumer.fetch(BATCH)`` + ``await msg.ack()``."""
    import asyncio

    import natsio

    async def run() -> float:
        nc = await natsio.connect(url)
        c = await _nio_consumer(nc, ack)
        got = 0
        t0 = time.perf_counter()
        while got < n:
            for m in await c.fetch(min(BATCH, n - got), timeout=5.0):
                if ack:
                    await m.ack()
                got += 1
        await nc.flush()
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


def nio_consume(url: str, n: int, size: int, ack: bool = True) -> Result:
    """natsio ``consumer.consume(max_messages=BATCH)``: its continuous API, an async iterator."""
    import asyncio

    import natsio

    async def run() -> float:
        nc = await natsio.connect(url)
        c = await _nio_consumer(nc, ack)
        got = 0
        t0 = time.perf_counter()
        async with c.consume(max_messages=BATCH) as msgs:
            async for m in msgs:
                if ack:
                    await m.ack()
                got += 1
                if got >= n:
                    break
        await nc.flush()
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


def nio_ordered(url: str, n: int, size: int) -> Result:
    """natsio ``stream.ordered_consumer().messages(max_messages=BATCH)``."""
    import asyncio

    import natsio

    async def run() -> float:
        nc = await natsio.connect(url)
        stream = await nc.jetstream().stream(CON_STREAM)
        got = 0
        t0 = time.perf_counter()
        async with stream.ordered_consumer() as oc:
            async for _m in oc.messages(max_messages=BATCH):
                got += 1
                if got >= n:
                    break
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))
