"""End to end: JetStream publish throughput, jsclient vs nats-py, same server, same run.

Run with ``pytest benchmarks/test_e2e_js_publish.py -m e2e -s``. Each workload
publishes fixed-size messages to a memory stream on an embedded nats-server
(best of ``ROUNDS`` rounds, stream purged between rounds) and prints msgs/s for
both clients and their ratio:

- sync: one ``publish`` at a time, each waiting for its ack;
- async: ``publish_async`` with a window of 4000 in flight for both clients,
  then ``publish_async_complete`` / ``publish_async_completed``.

Environment: ``JSCLIENT_BENCH_SYNC`` / ``JSCLIENT_BENCH_ASYNC`` override the
message counts, ``JSCLIENT_BENCH_PAYLOAD`` the payload size in bytes.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator

import nats
import pytest

import jsclient
from jsclient import _impl
from jsclient.server import NatsServer

SYNC_N = int(os.environ.get("JSCLIENT_BENCH_SYNC", "5000"))
ASYNC_N = int(os.environ.get("JSCLIENT_BENCH_ASYNC", "50000"))
PAYLOAD = b"x" * int(os.environ.get("JSCLIENT_BENCH_PAYLOAD", "128"))
WINDOW = 4000
ROUNDS = 3
SUBJECT = "bench.js"

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=True) as srv:
        nc = jsclient.connect(srv.url)
        try:
            nc.jetstream().create_stream(name="BENCH", subjects=["bench.>"], storage="memory")
        finally:
            nc.close()
        yield srv


def _purge(url: str) -> None:
    with jsclient.connect(url) as nc:
        nc.jetstream().stream("BENCH").purge()


def _best(url: str, n: int, run: Callable[[], float]) -> float:
    """Best msgs/s over ROUNDS runs of ``run`` (which returns elapsed seconds)."""
    rates = []
    for _ in range(ROUNDS):
        _purge(url)
        rates.append(n / run())
    return max(rates)


# -- jsclient -----------------------------------------------------------------


def _jsclient_sync(url: str, n: int) -> float:
    nc = jsclient.connect(url)
    try:
        js = nc.jetstream()
        js.publish(SUBJECT, PAYLOAD)  # warm up the reply subscription
        start = time.perf_counter()
        for _ in range(n):
            js.publish(SUBJECT, PAYLOAD)
        return time.perf_counter() - start
    finally:
        nc.close()


def _jsclient_async(url: str, n: int) -> float:
    nc = jsclient.connect(url)
    try:
        js = nc.jetstream(publish_async_max_pending=WINDOW, publish_async_stall_wait=30.0)
        js.publish(SUBJECT, PAYLOAD)
        start = time.perf_counter()
        publish_async = js.publish_async
        for _ in range(n):
            publish_async(SUBJECT, PAYLOAD)
        js.publish_async_complete(timeout=120)
        return time.perf_counter() - start
    finally:
        nc.close()


# -- nats-py ------------------------------------------------------------------


async def _natspy_sync(url: str, n: int) -> float:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await js.publish(SUBJECT, PAYLOAD)
        start = time.perf_counter()
        for _ in range(n):
            await js.publish(SUBJECT, PAYLOAD)
        return time.perf_counter() - start
    finally:
        await nc.close()


async def _natspy_async(url: str, n: int) -> float:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream(publish_async_max_pending=WINDOW)
        await js.publish(SUBJECT, PAYLOAD)
        start = time.perf_counter()
        for _ in range(n):
            await js.publish_async(SUBJECT, PAYLOAD)
        await js.publish_async_completed()
        return time.perf_counter() - start
    finally:
        await nc.close()


# -- report -------------------------------------------------------------------


def _report(
    capsys: pytest.CaptureFixture[str], name: str, n: int, ours: float, theirs: float
) -> None:
    with capsys.disabled():
        print(
            f"\n{name:<28} {n:>7} msgs x {len(PAYLOAD)} B  "
            f"jsclient[{_impl.IMPL}] {ours:>10,.0f} msgs/s   nats-py {theirs:>10,.0f} msgs/s   "
            f"ratio {ours / theirs:5.2f}x"
        )


def test_e2e_js_publish_sync(server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    url = server.url
    ours = _best(url, SYNC_N, lambda: _jsclient_sync(url, SYNC_N))
    theirs = _best(url, SYNC_N, lambda: asyncio.run(_natspy_sync(url, SYNC_N)))
    _report(capsys, "js.publish (sync)", SYNC_N, ours, theirs)
    assert ours > 0 and theirs > 0


def test_e2e_js_publish_async(server: NatsServer, capsys: pytest.CaptureFixture[str]) -> None:
    url = server.url
    ours = _best(url, ASYNC_N, lambda: _jsclient_async(url, ASYNC_N))
    theirs = _best(url, ASYNC_N, lambda: asyncio.run(_natspy_async(url, ASYNC_N)))
    _report(capsys, f"js.publish_async (window {WINDOW})", ASYNC_N, ours, theirs)
    assert ours > 0 and theirs > 0
