"""Key-Value workloads for jsclient, nats-py and natsio (both asyncio).

Four jobs: a get and a put one at a time (round trips, with latencies), and
the two whole-bucket reads, a watch of every key until its initial values are
delivered and ``keys()``. As in :mod:`jsbench.js`, each function runs in a
fresh process and only does the timed work (plus connecting and binding to the
bucket, neither timed); the buckets are prepared by the parent before each run,
with jsclient's stream API rather than its KV code (the code being measured):
the ADR-8 backing stream ``KV_<bucket>`` as every client's ``create_key_value``
makes it (history 1, file storage, direct get allowed, the default), filled
with acked publishes to ``$KV.<bucket>.<key>``. Keys are ``k0``, ``k1``, ...;
values are ``size`` bytes.

The raw-socket columns of the get and put rows are in :mod:`jsbench.raw`.
"""

from __future__ import annotations

import time
from typing import Any

from jsbench.js import create_stream_anew
from jsbench.result import Result, percentiles

GET_BUCKET, PUT_BUCKET, SCAN_BUCKET = "BENCH_KVGET", "BENCH_KVPUT", "BENCH_KVSCAN"
KEYS = 1000  # the keys a get or put run cycles over


# -- set-up and checks, run by the parent ----------------------------------------------


def _make_bucket(js: Any, bucket: str, description: str | None = None) -> None:
    """Delete ``bucket`` if it exists and create it empty."""
    import jsclient
    from jsclient.api import DiscardPolicy, StorageType

    try:
        js.delete_stream(f"KV_{bucket}")
    except jsclient.errors.NotFoundError:
        pass
    create_stream_anew(
        js,
        name=f"KV_{bucket}",
        description=description,
        subjects=[f"$KV.{bucket}.>"],
        storage=StorageType.FILE,
        max_msgs_per_subject=1,
        max_msgs=-1,
        max_bytes=-1,
        max_msg_size=-1,
        max_consumers=-1,
        discard=DiscardPolicy.NEW,
        duplicate_window=120.0,
        allow_rollup_hdrs=True,
        deny_delete=True,
        allow_direct=True,
    )


def _fill(nc: Any, bucket: str, count: int, size: int) -> None:
    """Put keys ``k0`` .. ``k<count - 1>`` (acked publishes, 4000 outstanding)."""
    js = nc.jetstream(publish_async_max_pending=4000, publish_async_stall_wait=60.0)
    value = b"v" * size
    for i in range(count):
        js.publish_async(f"$KV.{bucket}.k{i}", value)
    js.publish_async_complete(timeout=300)
    have = js.stream(f"KV_{bucket}").info().state.messages
    if have != count:
        raise RuntimeError(f"bucket {bucket} pre-fill stored {have} of {count} keys")


def setup_get(url: str, n: int, size: int) -> None:
    """A fresh bucket holding :data:`KEYS` keys for the get runs to cycle over."""
    import jsclient

    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        _make_bucket(nc.jetstream(), GET_BUCKET)
        _fill(nc, GET_BUCKET, KEYS, size)


def setup_put(url: str, n: int, size: int) -> None:
    """A fresh, empty bucket for a put run."""
    import jsclient

    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        _make_bucket(nc.jetstream(), PUT_BUCKET)


def check_put(url: str, n: int, size: int) -> str | None:
    """After a put run: did the bucket take every put (``n`` plus the warm-up)?"""
    import jsclient

    with jsclient.connect(url, name="jsclient-bench-check") as nc:
        state = nc.jetstream().stream(f"KV_{PUT_BUCKET}").info().state
    if state.last_seq < n + 1:
        return f"the bucket took {state.last_seq} of {n + 1} puts"
    if state.messages != min(n + 1, KEYS):
        return f"the bucket holds {state.messages} values, not {min(n + 1, KEYS)}"
    return None


def setup_scan(url: str, n: int, size: int) -> None:
    """A bucket of ``n`` keys, shared by the watch and keys runs of the same ``n`` and ``size``.

    Those runs only read, so the bucket is refilled only when the last one
    was made for another count or size (its description records which); the
    consumers that earlier runs' watchers left behind are deleted.
    """
    import jsclient

    tag = f"jsclient bench: {n} keys x {size} B"
    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        js = nc.jetstream()
        try:
            stream = js.stream(f"KV_{SCAN_BUCKET}")
            info = stream.info()
            if info.config.description == tag and info.state.messages == n:
                for name in list(stream.consumer_names()):
                    stream.delete_consumer(name)
                return
        except jsclient.errors.NotFoundError:
            pass
        _make_bucket(js, SCAN_BUCKET, description=tag)
        _fill(nc, SCAN_BUCKET, n, size)


# -- get -------------------------------------------------------------------------------


def _check_got(value: bytes, revision: int, size: int) -> None:
    if len(value) != size or revision < 1:
        raise RuntimeError(f"get returned {len(value)} bytes at revision {revision}")


def js_get(url: str, n: int, size: int) -> Result:
    import jsclient

    keys = [f"k{i}" for i in range(KEYS)]
    lat: list[float] = []
    with jsclient.connect(url) as nc:
        kv = nc.jetstream().key_value(GET_BUCKET)
        e = kv.get(keys[0])
        perf = time.perf_counter
        t0 = perf()
        for i in range(n):
            t = perf()
            e = kv.get(keys[i % KEYS])
            lat.append(perf() - t)
        dt = perf() - t0
    _check_got(e.value, e.revision, size)
    return Result(n / dt, *percentiles(lat))


def py_get(url: str, n: int, size: int) -> Result:
    import asyncio

    import nats

    keys = [f"k{i}" for i in range(KEYS)]

    async def run() -> tuple[float, list[float], Any]:
        nc = await nats.connect(url)
        kv = await nc.jetstream().key_value(GET_BUCKET)
        e = await kv.get(keys[0])
        lat: list[float] = []
        perf = time.perf_counter
        t0 = perf()
        for i in range(n):
            t = perf()
            e = await kv.get(keys[i % KEYS])
            lat.append(perf() - t)
        dt = perf() - t0
        await nc.close()
        return dt, lat, e

    dt, lat, e = asyncio.run(run())
    _check_got(e.value, e.revision, size)
    return Result(n / dt, *percentiles(lat))


def nio_get(url: str, n: int, size: int) -> Result:
    import asyncio

    import natsio

    keys = [f"k{i}" for i in range(KEYS)]

    async def run() -> tuple[float, list[float], Any]:
        nc = await natsio.connect(url)
        kv = await nc.jetstream().key_value(GET_BUCKET)
        e = await kv.get(keys[0])
        lat: list[float] = []
        perf = time.perf_counter
        t0 = perf()
        for i in range(n):
            t = perf()
            e = await kv.get(keys[i % KEYS])
            lat.append(perf() - t)
        dt = perf() - t0
        await nc.close()
        return dt, lat, e

    dt, lat, e = asyncio.run(run())
    _check_got(e.value, e.revision, size)
    return Result(n / dt, *percentiles(lat))


# -- put -------------------------------------------------------------------------------


def js_put(url: str, n: int, size: int) -> Result:
    import jsclient

    keys = [f"k{i}" for i in range(KEYS)]
    value = b"v" * size
    lat: list[float] = []
    with jsclient.connect(url) as nc:
        kv = nc.jetstream().key_value(PUT_BUCKET)
        kv.put(keys[0], value)
        perf = time.perf_counter
        t0 = perf()
        for i in range(1, n + 1):
            t = perf()
            kv.put(keys[i % KEYS], value)
            lat.append(perf() - t)
        dt = perf() - t0
    return Result(n / dt, *percentiles(lat))


def py_put(url: str, n: int, size: int) -> Result:
    import asyncio

    import nats

    keys = [f"k{i}" for i in range(KEYS)]
    value = b"v" * size

    async def run() -> tuple[float, list[float]]:
        nc = await nats.connect(url)
        kv = await nc.jetstream().key_value(PUT_BUCKET)
        await kv.put(keys[0], value)
        lat: list[float] = []
        perf = time.perf_counter
        t0 = perf()
        for i in range(1, n + 1):
            t = perf()
            await kv.put(keys[i % KEYS], value)
            lat.append(perf() - t)
        dt = perf() - t0
        await nc.close()
        return dt, lat

    dt, lat = asyncio.run(run())
    return Result(n / dt, *percentiles(lat))


def nio_put(url: str, n: int, size: int) -> Result:
    import asyncio

    import natsio

    keys = [f"k{i}" for i in range(KEYS)]
    value = b"v" * size

    async def run() -> tuple[float, list[float]]:
        nc = await natsio.connect(url)
        kv = await nc.jetstream().key_value(PUT_BUCKET)
        await kv.put(keys[0], value)
        lat: list[float] = []
        perf = time.perf_counter
        t0 = perf()
        for i in range(1, n + 1):
            t = perf()
            await kv.put(keys[i % KEYS], value)
            lat.append(perf() - t)
        dt = perf() - t0
        await nc.close()
        return dt, lat

    dt, lat = asyncio.run(run())
    return Result(n / dt, *percentiles(lat))


# -- whole-bucket reads ----------------------------------------------------------------


def _check_count(what: str, got: int, n: int) -> None:
    if got != n:
        raise RuntimeError(f"{what} gave {got} of {n} keys")


def js_watch_initial(url: str, n: int, size: int) -> Result:
    """``kv.watch(">")``, iterated until the None that ends the initial values."""
    import jsclient

    with jsclient.connect(url) as nc:
        kv = nc.jetstream().key_value(SCAN_BUCKET)
        got = 0
        t0 = time.perf_counter()
        with kv.watch(">") as w:
            for e in w:
                if e is None:
                    break
                got += 1
        dt = time.perf_counter() - t0
    _check_count("watch", got, n)
    return Result(n / dt)


def py_watch_initial(url: str, n: int, size: int) -> Result:
    """nats-py ``kv.watchall()``, iterated (``async for``) until the None marker."""
    import asyncio

    import nats

    async def run() -> tuple[float, int]:
        nc = await nats.connect(url)
        kv = await nc.jetstream().key_value(SCAN_BUCKET)
        got = 0
        t0 = time.perf_counter()
        w: Any = await kv.watchall()
        async for e in w:
            if e is None:
                break
            got += 1
        await w.stop()
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, got

    dt, got = asyncio.run(run())
    _check_count("watchall", got, n)
    return Result(n / dt)


def nio_watch_initial(url: str, n: int, size: int) -> Result:
    """natsio ``async with kv.watch(">")``, iterated until the None marker."""
    import asyncio

    import natsio

    async def run() -> tuple[float, int]:
        nc = await natsio.connect(url)
        kv = await nc.jetstream().key_value(SCAN_BUCKET)
        got = 0
        t0 = time.perf_counter()
        async with kv.watch(">") as w:
            async for e in w:
                if e is None:
                    break
                got += 1
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, got

    dt, got = asyncio.run(run())
    _check_count("watch", got, n)
    return Result(n / dt)


def js_keys(url: str, n: int, size: int) -> Result:
    import jsclient

    with jsclient.connect(url) as nc:
        kv = nc.jetstream().key_value(SCAN_BUCKET)
        t0 = time.perf_counter()
        keys = kv.keys()
        dt = time.perf_counter() - t0
    _check_count("keys()", len(keys), n)
    return Result(n / dt)


def py_keys(url: str, n: int, size: int) -> Result:
    import asyncio

    import nats

    async def run() -> tuple[float, int]:
        nc = await nats.connect(url)
        kv = await nc.jetstream().key_value(SCAN_BUCKET)
        t0 = time.perf_counter()
        keys = await kv.keys()
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, len(keys)

    dt, got = asyncio.run(run())
    _check_count("keys()", got, n)
    return Result(n / dt)


def nio_keys(url: str, n: int, size: int) -> Result:
    import asyncio

    import natsio

    async def run() -> tuple[float, int]:
        nc = await natsio.connect(url)
        kv = await nc.jetstream().key_value(SCAN_BUCKET)
        t0 = time.perf_counter()
        keys = await kv.keys()
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, len(keys)

    dt, got = asyncio.run(run())
    _check_count("keys()", got, n)
    return Result(n / dt)
