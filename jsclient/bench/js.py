"""JetStream workloads, each for jsclient and for nats-py (asyncio) in the same process.

Streams are memory-backed for publishing and file-backed for consuming, and
are made fresh for every run. Pre-filling is not timed. nats-py gets its best
idiomatic settings: the same publish_async window, the same fetch batch, and
acks awaited one by one (its API has no batched ack).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from jsclient.bench.result import Result, percentiles

WINDOW = 4000
BATCH = 1000


def _fresh_stream(url: str, name: str, subject: str, storage: str, fill: int, size: int) -> None:
    """(Re)create a stream and pre-fill it with ``fill`` messages of ``size`` bytes."""
    import jsclient

    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        try:
            js.delete_stream(name)
        except jsclient.errors.NotFoundError:
            pass
        js.create_stream(name=name, subjects=[subject], storage=storage)
        if fill:
            # Acked publishes: un-acked core publishes this fast overrun the
            # server's JetStream ingest and some are dropped.
            js = nc.jetstream(publish_async_max_pending=4000, publish_async_stall_wait=60.0)
            payload = b"x" * size
            pub_subject = subject.replace(">", "fill")
            for _ in range(fill):
                js.publish_async(pub_subject, payload)
            js.publish_async_complete(timeout=300)
            have = js.stream(name).info().state.messages
            if have != fill:
                raise RuntimeError(f"stream pre-fill stored {have} of {fill} messages")


# -- publish ------------------------------------------------------------------


def js_publish_sync(url: str, n: int, size: int) -> Result:
    import jsclient

    _fresh_stream(url, "BPUB", "bpub.>", "memory", 0, size)
    payload = b"x" * size
    lat: list[float] = []
    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        js.publish("bpub.x", payload)
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            js.publish("bpub.x", payload)
            lat.append(time.perf_counter() - t)
        dt = time.perf_counter() - t0
    return Result(n / dt, *percentiles(lat))


def py_publish_sync(url: str, n: int, size: int) -> Result:
    import nats

    _fresh_stream(url, "BPUB", "bpub.>", "memory", 0, size)

    async def run() -> tuple[float, list[float]]:
        nc = await nats.connect(url)
        js = nc.jetstream()
        payload = b"x" * size
        await js.publish("bpub.x", payload)
        lat: list[float] = []
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await js.publish("bpub.x", payload)
            lat.append(time.perf_counter() - t)
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, lat

    dt, lat = asyncio.run(run())
    return Result(n / dt, *percentiles(lat))


def js_publish_async(url: str, n: int, size: int) -> Result:
    import jsclient

    _fresh_stream(url, "BPUB", "bpub.>", "memory", 0, size)
    payload = b"x" * size
    with jsclient.connect(url) as nc:
        js = nc.jetstream(publish_async_max_pending=WINDOW, publish_async_stall_wait=60.0)
        js.publish("bpub.x", payload)
        publish_async = js.publish_async
        t0 = time.perf_counter()
        for _ in range(n):
            publish_async("bpub.x", payload)
        js.publish_async_complete(timeout=120)
        dt = time.perf_counter() - t0
    return Result(n / dt)


def py_publish_async(url: str, n: int, size: int, window: int = WINDOW) -> Result:
    import nats

    _fresh_stream(url, "BPUB", "bpub.>", "memory", 0, size)

    async def run() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream(publish_async_max_pending=window)
        payload = b"x" * size
        await js.publish("bpub.x", payload)
        t0 = time.perf_counter()
        for _ in range(n):
            await js.publish_async("bpub.x", payload)
        await js.publish_async_completed()
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))


def raw_publish_ceiling(url: str, n: int, size: int, window: int = 1000) -> Result:
    """The server's own pipelined JetStream publish ceiling, as near as a client can get.

    Core publishes with reply subjects, a window of ``window`` outstanding, and
    acks counted without decoding them: what any client's publish_async tops
    out at on this machine.
    """
    import jsclient

    _fresh_stream(url, "BPUB", "bpub.>", "memory", 0, size)
    payload = b"x" * size
    with jsclient.connect(url) as nc:
        inbox = nc.new_inbox()
        acks = nc.subscribe(inbox + ".*", pending_msgs_limit=0, pending_bytes_limit=0)
        nc.flush()
        reply = inbox + ".a"
        got = 0
        t0 = time.perf_counter()
        for i in range(n):
            nc.publish("bpub.x", payload, reply=reply)
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

    _fresh_stream(url, "BPUB", "bpub.>", "memory", 0, size)
    payload = b"x" * size
    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        js.publish("bpub.x", payload)
        t0 = time.perf_counter()
        with jsclient.Publisher(js, max_in_flight=window) as pub:
            for _ in range(n):
                pub.publish_async("bpub.x", payload)
        dt = time.perf_counter() - t0
    return Result(n / dt)


# -- consume ------------------------------------------------------------------


def _consumer(url: str, nc: Any, ack: bool) -> Any:
    js = nc.jetstream()
    return js.create_consumer(
        "BCON",
        durable_name=f"c{time.monotonic_ns()}",
        ack_policy="explicit" if ack else "none",
        max_ack_pending=20_000 if ack else None,
    )


def js_fetch(url: str, n: int, size: int, ack: bool = True) -> Result:
    import jsclient

    _fresh_stream(url, "BCON", "bcon.>", "file", n, size)
    with jsclient.connect(url) as nc:
        c = _consumer(url, nc, ack)
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

    _fresh_stream(url, "BCON", "bcon.>", "file", n, size)
    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        psub = js.pull_subscribe(
            "bcon.>", f"p{time.monotonic_ns()}", config=ConsumerConfig(max_ack_pending=20_000)
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

    _fresh_stream(url, "BCON", "bcon.>", "file", n, size)
    durable = f"push{time.monotonic_ns()}"
    cfg = {"max_ack_pending": 20_000}
    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        t0 = time.perf_counter()
        if mode == "iter":
            sub = js.subscribe("bcon.>", durable=durable, config=cfg)
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

            sub = js.subscribe("bcon.>", durable=durable, config=cfg, cb=on_msg)
            done.wait(300)
        nc.flush(timeout=30)
        dt = time.perf_counter() - t0
        sub.unsubscribe()
    return Result(n / dt)


def py_push(url: str, n: int, size: int, mode: str = "next_msg") -> Result:
    """nats-py's push subscription: ``next_msg`` + ack, or a callback awaiting each ack."""
    import nats
    from nats.js.api import ConsumerConfig

    _fresh_stream(url, "BCON", "bcon.>", "file", n, size)

    async def run() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream()
        cfg = ConsumerConfig(max_ack_pending=20_000)
        durable = f"push{time.monotonic_ns()}"
        t0 = time.perf_counter()
        if mode == "next_msg":
            sub = await js.subscribe("bcon.>", durable=durable, manual_ack=True, config=cfg)
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

            sub = await js.subscribe("bcon.>", durable=durable, cb=cb, manual_ack=True, config=cfg)
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

    _fresh_stream(url, "BCON", "bcon.>", "file", n, size)
    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        t0 = time.perf_counter()
        sub = js.subscribe("bcon.>", ordered_consumer=True)
        for got, _m in enumerate(sub, 1):
            if got >= n:
                break
        dt = time.perf_counter() - t0
        sub.unsubscribe()
    return Result(n / dt)


def js_consume(url: str, n: int, size: int, ack: bool = True) -> Result:
    import jsclient

    _fresh_stream(url, "BCON", "bcon.>", "file", n, size)
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
        c = _consumer(url, nc, ack)
        t0 = time.perf_counter()
        cc = c.consume(on_msg, max_messages=BATCH)
        done.wait(300)
        nc.flush(timeout=30)
        dt = time.perf_counter() - t0
        cc.stop()
    return Result(got / dt)


def js_messages(url: str, n: int, size: int) -> Result:
    import jsclient

    _fresh_stream(url, "BCON", "bcon.>", "file", n, size)
    with jsclient.connect(url) as nc:
        c = _consumer(url, nc, True)
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

    _fresh_stream(url, "BCON", "bcon.>", "file", n, size)
    with jsclient.connect(url) as nc:
        oc = nc.jetstream().ordered_consumer("BCON")
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
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    _fresh_stream(url, "BCON", "bcon.>", "file", n, size)

    async def run() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream()
        cfg = ConsumerConfig(
            ack_policy=AckPolicy.EXPLICIT if ack else AckPolicy.NONE,
            max_ack_pending=20_000 if ack else None,
        )
        psub = await js.pull_subscribe("bcon.>", f"p{time.monotonic_ns()}", config=cfg)
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
    import nats

    _fresh_stream(url, "BCON", "bcon.>", "file", n, size)

    async def run() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream()
        sub = await js.subscribe("bcon.>", ordered_consumer=True, pending_msgs_limit=-1)
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
