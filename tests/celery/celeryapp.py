"""The Celery app of the tests: ``celery -A celeryapp worker`` and the tests' producer side.

:func:`make_app` builds an app on a server (a fresh one per test module); the
worker processes get theirs from the environment (``JSC_NATS_URL``,
``JSC_ACK_WAIT``, ``JSC_RECORDS``). Tasks that must prove "exactly once"
append a line to the records file (``O_APPEND`` writes of one short line do
not interleave), so a test counts every run, in every worker process.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from celery import Celery

import jsclient.contrib.celery  # noqa: F401  registers jetstream://

ROUTES = {"jsc.on_a": {"queue": "qa"}, "jsc.on_b": {"queue": "qb"}}


def record(path: str | None, *fields: object) -> None:
    """Append one line to the records file."""
    if path:
        line = " ".join(str(f) for f in fields) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def records(path: Path) -> list[list[str]]:
    """Every line of the records file, split."""
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def make_app(url: str, ack_wait: float = 30.0, records_path: str | None = None) -> Celery:
    """An app on the server at ``url`` (``nats://``), with the tests' tasks."""
    broker = url.replace("nats://", "jetstream://")
    app = Celery("jsc", broker=broker, backend=broker, set_as_current=False)
    app.conf.update(
        broker_transport_options={"ack_wait": ack_wait},
        task_routes=ROUTES,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        result_expires=600,
        worker_prefetch_multiplier=4,
    )

    @app.task(name="jsc.add", shared=False)
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="jsc.tsum", shared=False)
    def tsum(values: list[int]) -> int:
        return sum(values)

    @app.task(name="jsc.started_at", shared=False)
    def started_at() -> float:
        return time.time()

    @app.task(name="jsc.mark", shared=False)
    def mark(key: str, seconds: float = 0.0) -> str:
        record(records_path, "run", key, os.getpid())
        time.sleep(seconds)
        return key

    @app.task(name="jsc.slow", acks_late=True, shared=False)
    def slow(key: str, seconds: float) -> str:
        record(records_path, "start", key, os.getpid())
        time.sleep(seconds)
        record(records_path, "done", key, os.getpid())
        return key

    @app.task(name="jsc.retry_once", bind=True, max_retries=3, shared=False)
    def retry_once(self: Any, key: str, countdown: float) -> int:
        record(records_path, "try", key, time.time())
        if self.request.retries == 0:
            raise self.retry(countdown=countdown)
        return int(self.request.retries)

    @app.task(name="jsc.on_a", shared=False)
    def on_a() -> str:
        return os.environ.get("JSC_WORKER", socket.gethostname())

    @app.task(name="jsc.on_b", shared=False)
    def on_b() -> str:
        return os.environ.get("JSC_WORKER", socket.gethostname())

    return app


def _from_env() -> Celery | None:
    url = os.environ.get("JSC_NATS_URL")
    if not url:
        return None
    return make_app(url, float(os.environ.get("JSC_ACK_WAIT", "30")), os.environ.get("JSC_RECORDS"))


#: The worker's app (``celery -A celeryapp``): None in the test process itself.
app = _from_env()
