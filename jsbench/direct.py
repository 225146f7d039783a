"""Batched direct get (ADR-31): read a range of a stream without a consumer.

One row, ``direct-get-batch``: read ``n`` messages, sequences 1..n, of a file
stream that allows direct gets. jsclient reads them with
``Stream.get_batch(seq=1, batch=n)``; nats-py has no batched direct get, so it
reads the same range with its best consumer path, a pull consumer (ack policy
none) fetched in batches of :data:`jsbench.js.BATCH`. natsio 1.0.1 has the
multi-subject form (``get_last_msgs_for``) but no batched get of a range: n/a.
The stream is prepared by the parent, as in :mod:`jsbench.js`, and reused
while its count and size are the same.
"""

from __future__ import annotations

import time

from jsbench.js import BATCH, create_stream_anew
from jsbench.result import Result

DIR_STREAM, DIR_FILTER = "BDIR", "bdir.>"


def setup_direct(url: str, n: int, size: int) -> None:
    """A file stream allowing direct gets, holding exactly ``n`` messages of ``size`` bytes."""
    import jsclient

    tag = f"jsclient bench: {n} x {size} B"
    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        js = nc.jetstream()
        try:
            stream = js.stream(DIR_STREAM)
            info = stream.info()
            if info.config.description == tag and info.state.messages == n:
                for name in list(stream.consumer_names()):
                    stream.delete_consumer(name)
                return
            js.delete_stream(DIR_STREAM)
        except jsclient.errors.NotFoundError:
            pass
        create_stream_anew(
            js,
            name=DIR_STREAM,
            subjects=[DIR_FILTER],
            storage="file",
            allow_direct=True,
            description=tag,
        )
        js = nc.jetstream(publish_async_max_pending=4000, publish_async_stall_wait=60.0)
        payload = b"x" * size
        for _ in range(n):
            js.publish_async("bdir.fill", payload)
        js.publish_async_complete(timeout=300)
        have = js.stream(DIR_STREAM).info().state.messages
        if have != n:
            raise RuntimeError(f"stream pre-fill stored {have} of {n} messages")


def js_get_batch(url: str, n: int, size: int) -> Result:
    """jsclient ``stream.get_batch(seq=1, batch=n)``: pages of 10,000, one buffered."""
    import jsclient

    with jsclient.connect(url) as nc:
        stream = nc.jetstream().stream(DIR_STREAM)
        got = 0
        t0 = time.perf_counter()
        for _m in stream.get_batch(seq=1, batch=n):
            got += 1
        dt = time.perf_counter() - t0
    if got != n:
        raise RuntimeError(f"get_batch read {got} of {n} messages")
    return Result(n / dt)


def py_fetch_range(url: str, n: int, size: int) -> Result:
    """nats-py: a pull consumer from sequence 1, ack policy none, ``fetch(BATCH)``."""
    import asyncio

    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    async def run() -> float:
        nc = await nats.connect(url)
        js = nc.jetstream()
        cfg = ConsumerConfig(ack_policy=AckPolicy.NONE)
        psub = await js.pull_subscribe(DIR_FILTER, f"d{time.monotonic_ns()}", config=cfg)
        got = 0
        t0 = time.perf_counter()
        while got < n:
            got += len(await psub.fetch(min(BATCH, n - got), timeout=5))
        dt = time.perf_counter() - t0
        await nc.close()
        return dt

    return Result(n / asyncio.run(run()))
