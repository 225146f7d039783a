"""Benchmark fixtures: one embedded nats-server for the end-to-end workloads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jsclient.server import NatsServer


@pytest.fixture(scope="session")
def bench_server() -> Iterator[NatsServer]:
    with NatsServer(jetstream=True) as srv:
        yield srv
