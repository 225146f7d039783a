"""Celery's features on the transport and the backend, with two real workers.

Worker ``wa`` consumes ``celery`` and ``qa``, worker ``wb`` consumes ``qb``
(``task_routes`` sends ``jsc.on_a`` and ``jsc.on_b`` there): countdown, ETA,
``retry(countdown=...)``, routing, ``celery inspect ping``, ``celery purge``,
group and chord, a publish retried with the same message id, and
``celery control shutdown`` (last: it stops ``wb``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from celery import chord, group
from conftest import Worker, app_at, celery_cli, celeryapp, eventually

from jsclient.server import NatsServer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("records") / "runs.log"


@pytest.fixture(scope="module")
def running(
    server: NatsServer, records: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Worker]]:
    logs = tmp_path_factory.mktemp("logs")
    ws = {
        "wa": Worker(
            server.url,
            logs / "wa.log",
            "wa",
            "-P",
            "threads",
            "-c",
            "4",
            "-Q",
            "celery,qa",
            "-E",  # task events
            records=records,
        ),
        "wb": Worker(
            server.url,
            logs / "wb.log",
            "wb",
            "-P",
            "threads",
            "-c",
            "2",
            "-Q",
            "qb",
            records=records,
        ),
    }
    try:
        for w in ws.values():
            w.wait_ready()
        yield ws
    finally:
        for w in ws.values():
            w.kill()


@pytest.fixture(scope="module")
def app(server: NatsServer) -> Iterator[Any]:
    with app_at(server.url) as a:
        yield a


def test_countdown_and_eta_run_no_earlier(app: Any, running: dict[str, Worker]) -> None:
    started_at = app.tasks["jsc.started_at"]
    t0 = time.time()
    by_countdown = started_at.apply_async(countdown=2)
    by_eta = started_at.apply_async(eta=datetime.now(UTC) + timedelta(seconds=2))
    now = started_at.delay()
    assert now.get(timeout=10) - t0 < 1.5  # not held behind the two waiting ones
    assert by_countdown.get(timeout=15) - t0 >= 1.9
    assert by_eta.get(timeout=15) - t0 >= 1.9


def test_retry_with_countdown(app: Any, running: dict[str, Worker], records: Path) -> None:
    r = app.tasks["jsc.retry_once"].delay("r1", 1)
    assert r.get(timeout=20) == 1
    tries = [float(f[2]) for f in celeryapp.records(records) if f[:2] == ["try", "r1"]]
    assert len(tries) == 2 and tries[1] - tries[0] >= 0.9


def test_task_routes_reach_their_queues(app: Any, running: dict[str, Worker]) -> None:
    ra = [app.tasks["jsc.on_a"].delay() for _ in range(5)]
    rb = [app.tasks["jsc.on_b"].delay() for _ in range(5)]
    assert {r.get(timeout=10) for r in ra} == {"wa"}
    assert {r.get(timeout=10) for r in rb} == {"wb"}


def test_inspect_ping_answers(server: NatsServer, app: Any, running: dict[str, Worker]) -> None:
    out = celery_cli(server, "inspect", "ping", "-t", "1.5")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "wa@" in out.stdout and "wb@" in out.stdout and "pong" in out.stdout
    replies = app.control.ping(timeout=1.0)
    assert {next(iter(r)).split("@")[0] for r in replies} == {"wa", "wb"}


def test_purge_empties_a_queue(server: NatsServer, app: Any, running: dict[str, Worker]) -> None:
    for i in range(5):
        app.tasks["jsc.add"].apply_async((i, i), queue="qpurge")  # nobody consumes qpurge
    with app.connection_for_write() as conn:
        assert conn.default_channel.queue_declare("qpurge", passive=True).message_count == 5
    out = celery_cli(server, "purge", "-f", "-Q", "qpurge")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "5 messages" in out.stdout, out.stdout
    with app.connection_for_write() as conn:
        assert conn.default_channel.queue_declare("qpurge", passive=True).message_count == 0


def test_group_and_chord(app: Any, running: dict[str, Worker]) -> None:
    add, tsum = app.tasks["jsc.add"], app.tasks["jsc.tsum"]
    g = group(add.s(i, i) for i in range(20)).apply_async()
    assert g.get(timeout=30) == [2 * i for i in range(20)]
    c = chord(add.s(i, 1) for i in range(10))(tsum.s())
    assert c.get(timeout=30) == sum(range(10)) + 10


def test_a_publish_retried_with_its_message_id_is_stored_once(app: Any) -> None:
    with app.connection_for_write() as conn:
        ch = conn.channel()
        try:
            ch.queue_declare("qdedupe", durable=True, auto_delete=False)
            message = ch.prepare_message("body", properties={"delivery_mode": 2})
            ch.basic_publish(message, "", "qdedupe")
            # kombu's retry re-prepares the message from the same properties dict.
            again = ch.prepare_message("body", properties=message["properties"])
            ch.basic_publish(again, "", "qdedupe")
            assert ch.queue_declare("qdedupe", passive=True).message_count == 1
        finally:
            ch.close()


def test_events_reach_a_receiver(app: Any, running: dict[str, Worker]) -> None:
    seen: list[dict[str, Any]] = []
    with app.connection_for_read() as conn:
        recv = app.events.Receiver(conn, handlers={"task-succeeded": seen.append})
        t = threading.Thread(target=recv.capture, kwargs={"wakeup": False}, name="test-events")
        t.start()
        try:
            # A worker sees a new listener of the events exchange within binding_cache (5 s).
            deadline = time.monotonic() + 15
            while not seen and time.monotonic() < deadline:
                app.tasks["jsc.add"].delay(1, 1).get(timeout=10)
                time.sleep(0.3)
        finally:
            recv.should_stop = True
            t.join(10)
    assert seen and seen[0]["hostname"].startswith("wa@")


def test_control_shutdown_stops_a_worker(server: NatsServer, running: dict[str, Worker]) -> None:
    wb = running["wb"]
    # A worker does not answer shutdown (it stops), so the command reports no reply.
    celery_cli(server, "control", "shutdown", "-d", f"wb@{_host(wb)}", "-t", "1")
    eventually(lambda: wb.proc.poll() is not None, 20, "wb to shut down")
    assert wb.proc.returncode == 0, wb.log()[-2000:]


def _host(w: Worker) -> str:
    line = next(ln for ln in w.log().splitlines() if " ready." in ln)
    return line.split("@", 1)[1].split(" ready.")[0]
