"""The partitioned consumer group rows of the benchmark (jsbench/pcg.py) on a real server."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from jsbench import pcg
from jsclient.server import NatsServer


def test_both_rows_take_every_message_in_key_order(nats_server: NatsServer) -> None:
    n = 2_000
    for run in (pcg.js_one_consumer, pcg.js_elastic):
        pcg.setup(nats_server.url, n, 16)
        assert run(nats_server.url, n, 16).rate > 0


def test_a_key_out_of_order_fails_the_run() -> None:
    tally = pcg._Tally(3, 1)
    handle = tally.handler(0)
    acked: list[bytes] = []
    for data in (b"0", b"2", b"1"):
        handle(SimpleNamespace(subject="bpcg.k0", data=data, ack=lambda d=data: acked.append(d)))
    assert acked == [b"0", b"2", b"1"]
    with pytest.raises(RuntimeError, match=r"out of order per key: bpcg.k0: 2 after 0"):
        tally.result(time.perf_counter())
