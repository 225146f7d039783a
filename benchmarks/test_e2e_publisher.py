"""End-to-end: the managed Publisher against nats-py's ``js.publish_async``, side by side.

Run: ``.venv/bin/python -m pytest benchmarks/test_e2e_publisher.py -m e2e -s``.
One embedded server (memory-storage stream), 100k messages of 16 bytes, the
same window on both sides: the Publisher's ``max_in_flight`` (50 is its
default, with the default full-sawtooth refill at 0) and nats-py's
``publish_async_max_pending``; nats-py runs under ``asyncio.run`` in this
process. Prints msgs/s and the ratio per window, and for reference the rate of
plain ``JetStream.publish_async`` (the layer the Publisher is built on).

``jsclient_publisher_rate`` and ``nats_py_publish_async_rate`` are plain
functions so a CLI benchmark can reuse them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import jsclient
from jsclient import errors
from jsclient.jetstream.publish.publisher import Publisher

STREAM = "BENCHPUB"
SUBJECT = "benchpub.x"
PAYLOAD = b"0123456789abcdef"  # 16 bytes
N = 100_000
WINDOWS = (50, 1000)


def _fresh_stream(js: Any) -> None:
    try:
        js.delete_stream(STREAM)
    except errors.NotFoundError:
        pass
    js.create_stream(name=STREAM, subjects=["benchpub.>"], storage="memory")


def jsclient_publisher_rate(url: str, n: int, window: int) -> float:
    """Msgs/s of ``n`` publishes through a started Publisher(max_in_flight=window), drained."""
    nc = jsclient.connect(url)
    try:
        js = nc.jetstream(publish_async_max_pending=max(window, 4000))
        _fresh_stream(js)
        pub = Publisher(js, max_in_flight=window).start()
        publish = pub.publish_async
        t0 = time.perf_counter()
        for _ in range(n):
            publish(SUBJECT, PAYLOAD)
        pub.drain(timeout=max(60.0, n / 1000))
        elapsed = time.perf_counter() - t0
        if pub.acked_count != n:
            raise RuntimeError(f"publisher acked {pub.acked_count} of {n}")
        stored = js.stream(STREAM).info().state.messages
        if stored != n:
            raise RuntimeError(f"stream holds {stored} of {n}")
        js.delete_stream(STREAM)
        return n / elapsed
    finally:
        nc.close()


def jsclient_publish_async_rate(url: str, n: int, window: int) -> float:
    """Reference: msgs/s of plain ``js.publish_async`` (max pending ``window``) + complete()."""
    nc = jsclient.connect(url)
    try:
        js = nc.jetstream(publish_async_max_pending=window)
        _fresh_stream(js)
        publish = js.publish_async
        t0 = time.perf_counter()
        for _ in range(n):
            publish(SUBJECT, PAYLOAD)
        js.publish_async_complete(timeout=max(60.0, n / 1000))
        elapsed = time.perf_counter() - t0
        stored = js.stream(STREAM).info().state.messages
        if stored != n:
            raise RuntimeError(f"stream holds {stored} of {n}")
        js.delete_stream(STREAM)
        return n / elapsed
    finally:
        nc.close()


async def _nats_py_rate(url: str, n: int, window: int) -> float:
    import nats

    nc = await nats.connect(url)
    try:
        js = nc.jetstream(publish_async_max_pending=window)
        try:
            await js.delete_stream(STREAM)
        except Exception:  # nats-py's NotFoundError
            pass
        await js.add_stream(name=STREAM, subjects=["benchpub.>"], storage="memory")
        publish = js.publish_async
        t0 = time.perf_counter()
        for _ in range(n):
            await publish(SUBJECT, PAYLOAD)
        await js.publish_async_completed()
        elapsed = time.perf_counter() - t0
        stored = (await js.stream_info(STREAM)).state.messages
        if stored != n:
            raise RuntimeError(f"stream holds {stored} of {n}")
        await js.delete_stream(STREAM)
        return n / elapsed
    finally:
        await nc.close()


def nats_py_publish_async_rate(url: str, n: int, window: int) -> float:
    """Msgs/s of ``n`` nats-py ``js.publish_async`` calls (max pending ``window``) + completed()."""
    return asyncio.run(_nats_py_rate(url, n, window))


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_publisher_vs_nats_py(bench_server: Any) -> None:
    url = bench_server.url
    rows = []
    for window in WINDOWS:
        ours = jsclient_publisher_rate(url, N, window)
        theirs = nats_py_publish_async_rate(url, N, window)
        plain = jsclient_publish_async_rate(url, N, window)
        rows.append((window, ours, theirs, plain))
    print()
    print(
        f"{'window':>6} {'Publisher':>12} {'nats-py':>12} {'ratio':>6}   "
        f"{'(jsclient js.publish_async':>26} {'ratio)':>6}"
    )
    for window, ours, theirs, plain in rows:
        print(
            f"{window:>6} {ours:>8,.0f} m/s {theirs:>8,.0f} m/s {ours / theirs:>5.2f}x   "
            f"{plain:>22,.0f} m/s {plain / theirs:>5.2f}x"
        )
    assert all(r > 0 for row in rows for r in row[1:])
