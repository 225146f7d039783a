"""Visibility and redelivery with real workers: ``ack_wait`` is 2 s here.

- an ``acks_late`` task whose worker is killed with SIGKILL mid-run is
  redelivered to another worker and completes once;
- a task that runs longer than ``ack_wait`` runs once (kept alive with ``+WPI``);
- a worker restarted (warm shutdown, then started again) while tasks stream
  in loses none and runs none twice.

Every run of a task appends a line to a records file, so "once" is counted.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Worker, celeryapp, close_app, eventually

from jsclient.server import NatsServer

pytestmark = pytest.mark.timeout(120)

ACK_WAIT = 2.0


@pytest.fixture
def records(tmp_path: Path) -> Path:
    return tmp_path / "runs.log"


@pytest.fixture
def app(server: NatsServer, records: Path) -> Iterator[Any]:
    a = celeryapp.make_app(server.url, ack_wait=ACK_WAIT)
    try:
        yield a
    finally:
        close_app(a)


def _lines(records: Path, kind: str, key: str) -> list[list[str]]:
    return [f for f in celeryapp.records(records) if f[:2] == [kind, key]]


def test_acks_late_task_of_a_killed_worker_runs_again_elsewhere_once(
    app: Any, workers: Callable[..., Worker], records: Path
) -> None:
    first = workers(
        "victim", "-P", "prefork", "-c", "1", ack_wait=ACK_WAIT, records=records
    ).wait_ready()
    r = app.tasks["jsc.slow"].delay("k1", 1.5)
    eventually(lambda: _lines(records, "start", "k1"), 15, "the task to start")
    first.kill()  # SIGKILL, pool included: the message is neither acked nor nak'd
    assert not _lines(records, "done", "k1")
    workers("rescuer", "-P", "threads", "-c", "2", ack_wait=ACK_WAIT, records=records)
    assert r.get(timeout=30) == "k1"
    assert len(_lines(records, "start", "k1")) == 2
    assert len(_lines(records, "done", "k1")) == 1


def test_task_longer_than_ack_wait_runs_once(
    app: Any, workers: Callable[..., Worker], records: Path
) -> None:
    for name in ("long-a", "long-b"):  # an idle second worker would get a redelivery
        workers(name, "-P", "threads", "-c", "2", ack_wait=ACK_WAIT, records=records)
    r = app.tasks["jsc.slow"].delay("k2", 3 * ACK_WAIT)
    held = [app.tasks["jsc.slow"].delay(f"h{i}", 0.1) for i in range(3)]  # prefetched meanwhile
    assert r.get(timeout=30) == "k2"
    assert [h.get(timeout=30) for h in held] == [f"h{i}" for i in range(3)]
    time.sleep(1.0)  # (without the keep-alive, wb would have started it 2 s in)
    assert len(_lines(records, "start", "k2")) == 1
    for i in range(3):
        assert len(_lines(records, "start", f"h{i}")) == 1


def test_worker_restarted_mid_stream_loses_and_duplicates_nothing(
    app: Any, workers: Callable[..., Worker], records: Path
) -> None:
    n = 400
    w = workers(
        "restart", "-P", "threads", "-c", "4", ack_wait=ACK_WAIT, records=records
    ).wait_ready()
    mark = app.tasks["jsc.mark"]
    results: list[Any] = []

    def produce() -> None:
        for i in range(n):
            results.append(mark.delay(f"m{i}", 0.005))
            if i % 20 == 0:
                time.sleep(0.05)

    producer = threading.Thread(target=produce, name="test-producer")
    producer.start()
    eventually(lambda: len(celeryapp.records(records)) >= 50, 20, "the first tasks to run")
    assert len(results) < n  # still producing: mid-stream
    assert w.stop() == 0  # warm shutdown: what it holds and has not started is nak'd
    workers("restart", "-P", "threads", "-c", "4", ack_wait=ACK_WAIT, records=records)
    producer.join(60)
    assert not producer.is_alive()
    assert [r.get(timeout=60) for r in results] == [f"m{i}" for i in range(n)]
    runs = Counter(f[1] for f in celeryapp.records(records) if f[0] == "run")
    assert set(runs) == {f"m{i}" for i in range(n)}
    assert [k for k, c in runs.items() if c != 1] == []
