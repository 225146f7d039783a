"""A real ``celery worker`` (prefork and threads pools) runs 1,000 ``delay()`` with results."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import Worker, app_at

from jsclient.server import NatsServer

N = 1000


@pytest.fixture
def app(server: NatsServer) -> Iterator[Any]:
    with app_at(server.url) as a:
        yield a


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_thousand_tasks_with_results(app: Any, workers: Callable[..., Worker], pool: str) -> None:
    w = workers(f"load-{pool}", "-P", pool, "-c", "2" if pool == "prefork" else "4").wait_ready()
    add = app.tasks["jsc.add"]
    results = [add.delay(i, i) for i in range(N)]
    assert [r.get(timeout=60) for r in results] == [2 * i for i in range(N)]
    assert w.stop() == 0
    assert "Traceback" not in w.log(), w.log()[-3000:]
    conn = app.connection_for_read()
    try:
        assert conn.default_channel.queue_declare("celery", passive=True).message_count == 0
    finally:
        conn.release()
