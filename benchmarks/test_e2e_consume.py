"""End-to-end consume rates: jsclient's pull API against nats-py's pull_subscribe, same run.

A file stream is pre-filled once with ``JSCLIENT_E2E_MESSAGES`` (default 200 000)
16-byte messages. Each workload drains it through a fresh durable consumer:

- jsclient ``fetch(1000)`` + ``ack``, ``consume()`` + ``ack``, ``messages()`` + ``ack``,
  and ``fetch(1000)`` / ``consume()`` with ack policy none;
- nats-py 2.x ``pull_subscribe().fetch(1000)`` + ``await msg.ack()``, and with ack
  policy none (run with ``asyncio.run`` in this process).

Run: ``pytest benchmarks/test_e2e_consume.py -m e2e -s``. The last test prints
msgs/s and the ratios to nats-py.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jsclient
from jsclient.server import NatsServer

pytestmark = pytest.mark.e2e

N = int(os.environ.get("JSCLIENT_E2E_MESSAGES", "200000"))
STREAM = "BENCH"
SUBJECT = "bench.data"
PAYLOAD = b"0123456789abcdef"
RESULTS: dict[str, float] = {}


@pytest.fixture(scope="module")
def filled_server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=True) as srv:
        with jsclient.connect(srv.url) as nc:
            js = nc.jetstream()
            js.create_stream(name=STREAM, subjects=[SUBJECT])
            publish = nc.publish
            for i in range(N):
                publish(SUBJECT, PAYLOAD)
                if i % 20000 == 19999:
                    nc.flush(30)  # keep the server's inbound buffer in bounds
            nc.flush(30)
            deadline = time.monotonic() + 60
            while js.stream(STREAM).info().state.messages < N:
                assert time.monotonic() < deadline, "stream was not filled"
                time.sleep(0.1)
        yield srv


def _consumer(nc: jsclient.Client, name: str, ack: bool) -> Any:
    js = nc.jetstream()
    return js.create_consumer(
        STREAM, durable_name=name, ack_policy="explicit" if ack else "none", max_ack_pending=-1
    )


def _record(name: str, n: int, seconds: float) -> float:
    assert n == N, f"{name}: consumed {n} of {N}"
    rate = n / seconds
    RESULTS[name] = rate
    print(f"\n{name:<40} {rate:>12,.0f} msgs/s  ({seconds:.2f} s)")
    return rate


def _timed(url: str, name: str, ack: bool, run: Callable[[Any, jsclient.Client], int]) -> None:
    with jsclient.connect(url) as nc:
        c = _consumer(nc, name.replace("-", "_").replace(" ", "_"), ack)
        t0 = time.perf_counter()
        n = run(c, nc)
        nc.flush(30)
        _record(name, n, time.perf_counter() - t0)


def _fetch_loop(c: Any, nc: jsclient.Client, ack: bool) -> int:
    n = 0
    while n < N:
        for msg in c.fetch(1000, expires=5.0):
            if ack:
                msg.ack()
            n += 1
    return n


def _consume(c: Any, nc: jsclient.Client, ack: bool) -> int:
    done = threading.Event()
    count = [0]

    def cb(msg: jsclient.Msg) -> None:
        if ack:
            msg.ack()
        count[0] += 1
        if count[0] == N:
            done.set()

    cc = c.consume(cb, max_messages=1000)
    done.wait(120)
    cc.stop()
    return count[0]


def _messages(c: Any, nc: jsclient.Client, ack: bool) -> int:
    n = 0
    with c.messages(max_messages=1000) as it:
        for msg in it:
            if ack:
                msg.ack()
            n += 1
            if n == N:
                break
    return n


def test_jsclient_fetch_ack(filled_server: NatsServer) -> None:
    _timed(
        filled_server.url, "jsclient fetch(1000)+ack", True, lambda c, nc: _fetch_loop(c, nc, True)
    )


def test_jsclient_consume_ack(filled_server: NatsServer) -> None:
    _timed(filled_server.url, "jsclient consume()+ack", True, lambda c, nc: _consume(c, nc, True))


def test_jsclient_messages_ack(filled_server: NatsServer) -> None:
    _timed(filled_server.url, "jsclient messages()+ack", True, lambda c, nc: _messages(c, nc, True))


def test_jsclient_fetch_ack_none(filled_server: NatsServer) -> None:
    _timed(
        filled_server.url,
        "jsclient fetch(1000) ack none",
        False,
        lambda c, nc: _fetch_loop(c, nc, False),
    )


def test_jsclient_consume_ack_none(filled_server: NatsServer) -> None:
    _timed(
        filled_server.url,
        "jsclient consume() ack none",
        False,
        lambda c, nc: _consume(c, nc, False),
    )


async def _nats_py_fetch(url: str, durable: str, ack: bool) -> tuple[int, float]:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        cfg = ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT if ack else AckPolicy.NONE,
            max_ack_pending=-1,
        )
        await js.add_consumer(STREAM, cfg)
        psub = await js.pull_subscribe_bind(durable, STREAM)
        n = 0
        t0 = time.perf_counter()
        while n < N:
            try:
                msgs = await psub.fetch(1000, timeout=5.0)
            except nats.errors.TimeoutError:
                continue
            for msg in msgs:
                if ack:
                    await msg.ack()
                n += 1
        await nc.flush()
        return n, time.perf_counter() - t0
    finally:
        await nc.close()


def test_nats_py_fetch_ack(filled_server: NatsServer) -> None:
    n, seconds = asyncio.run(_nats_py_fetch(filled_server.url, "natspy_ack", True))
    _record("nats-py fetch(1000)+ack", n, seconds)


def test_nats_py_fetch_ack_none(filled_server: NatsServer) -> None:
    n, seconds = asyncio.run(_nats_py_fetch(filled_server.url, "natspy_none", False))
    _record("nats-py fetch(1000) ack none", n, seconds)


def test_report_ratios() -> None:
    """Print every rate and its ratio to the matching nats-py workload."""
    base_ack = RESULTS.get("nats-py fetch(1000)+ack")
    base_none = RESULTS.get("nats-py fetch(1000) ack none")
    if base_ack is None or base_none is None:
        pytest.skip("run the whole module to compare")
    print(f"\n{'workload':<40} {'msgs/s':>12} {'vs nats-py':>11}")
    for name, rate in RESULTS.items():
        base = base_none if "none" in name else base_ack
        print(f"{name:<40} {rate:>12,.0f} {rate / base:>10.1f}x")
    # A sanity floor, not the 5x target: a blocking client slower than asyncio
    # nats-py on the same machine would be a regression worth failing on.
    assert RESULTS["jsclient fetch(1000)+ack"] > base_ack
    assert RESULTS["jsclient consume()+ack"] > base_ack
