"""``manage.py jetstream_worker`` and the worker behind it, on a real Django and server.

- as a subprocess: 1,000 messages, SIGTERM mid-stream (exit 0), restart:
  every message handled exactly once (rows in SQLite, one per handler run);
- a second signal exits at once;
- in process: an exception in a handler leads to a redelivery (nak with a
  delay, logged with the stream sequence); stale database connections are
  closed around each message.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _js import eventually
from django.core.management import CommandError, call_command
from django.db import connection
from jsclient_testapp.models import Handled

from jsclient.contrib.django import consumer, get_connection, get_jetstream, registered
from jsclient.contrib.django.consumers import unregister
from jsclient.contrib.django.worker import ConsumerRunner, Worker, WorkerError
from jsclient.msg import Msg
from jsclient.server import NatsServer

HERE = Path(__file__).resolve().parent
MANAGE = HERE / "manage_worker.py"


class WorkerProcess:
    """``manage_worker.py jetstream_worker`` as a subprocess, its log kept in a file."""

    def __init__(self, url: str, db: str, log: Path, *args: str, sleep: float = 0.0) -> None:
        env = dict(os.environ)
        env.update(
            JSCLIENT_TEST_DB=db,
            JSCLIENT_TEST_NATS=url,
            JSCLIENT_TEST_HANDLER_SLEEP=str(sleep),
        )
        self.log_path = log
        self._log = open(log, "ab")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            [sys.executable, str(MANAGE), "jetstream_worker", *args],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_running(self) -> None:
        eventually(
            lambda: "jetstream worker running" in self.log() or self.proc.poll() is not None,
            30,
            "the worker to start",
        )
        assert self.proc.poll() is None, self.log()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.wait()

    def wait(self, timeout: float = 30) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


@pytest.fixture
def jobs(django_nats: NatsServer) -> str:
    get_jetstream().create_stream(name="JOBS", subjects=["jobs.>"])
    Handled.objects.all().delete()
    return "JOBS"


def _publish_jobs(n: int) -> None:
    js = get_jetstream()
    futures = [js.publish_async("jobs.run", b"job-%04d" % i) for i in range(n)]
    js.publish_async_complete(timeout=30)
    for f in futures:
        f.result(timeout=0)


def test_sigterm_mid_stream_then_restart_handles_each_message_once(
    jobs: str, spawn: Callable[..., WorkerProcess]
) -> None:
    total = 1000
    _publish_jobs(total)
    first = spawn(sleep=0.003)
    first.wait_running()
    eventually(lambda: Handled.objects.count() >= 200, 60, "200 messages handled")
    assert first.stop(signal.SIGTERM) == 0, first.log()
    log = first.log()
    assert "SIGTERM: stopping gracefully" in log and "jetstream worker stopped" in log
    done_first = Handled.objects.count()
    assert done_first < total, "the stop did not land mid-stream"
    # What it reports as acked is exactly what it handled.
    assert f"consumer jobs: {done_first} acked, 0 nak'd on errors" in log

    second = spawn()
    second.wait_running()
    eventually(
        lambda: Handled.objects.values("key").distinct().count() >= total,
        60,
        "every message handled after the restart",
    )
    assert second.stop(signal.SIGINT) == 0, second.log()

    logs = f"first worker:\n{first.log()}\nsecond worker:\n{second.log()}"
    rows = list(Handled.objects.values_list("key", "stream_seq", "delivered", "pid"))
    keys = [r[0] for r in rows]
    assert len(set(keys)) == total
    twice = sorted(r for r in rows if keys.count(r[0]) > 1)
    assert twice == [], f"handled twice: {twice[:10]}\n{logs}"
    pids = {r[3] for r in rows}
    assert pids == {first.proc.pid, second.proc.pid}, logs
    # Everything was acked: nothing is left for the consumer.
    info = get_jetstream().consumer(jobs, "jobs").info()
    assert (info.num_ack_pending, info.num_pending) == (0, 0), logs


def test_second_signal_exits_at_once(jobs: str, spawn: Callable[..., WorkerProcess]) -> None:
    _publish_jobs(20)
    w = spawn(sleep=1.0)  # handlers busy for a second per message
    w.wait_running()
    eventually(lambda: "consumer jobs" in w.log(), 10, "the consumer to start")
    time.sleep(0.3)  # let the two handler threads take a message each
    w.proc.send_signal(signal.SIGTERM)
    eventually(lambda: "stopping gracefully" in w.log(), 10, "the first signal to be seen")
    w.proc.send_signal(signal.SIGTERM)
    assert w.wait(10) == 128 + signal.SIGTERM
    assert "SIGTERM again: exiting at once" in w.log()


def test_command_reports_unknown_consumers(django_nats: NatsServer) -> None:
    with pytest.raises(CommandError, match="unknown consumer"):
        call_command("jetstream_worker", consumers=["nope"])
    with pytest.raises(CommandError, match="at least 1"):
        call_command("jetstream_worker", consumers=["jobs"], threads=0)
    # The stream of the registered consumer does not exist on this server.
    with pytest.raises(CommandError, match="stream 'JOBS' does not exist"):
        call_command("jetstream_worker", consumers=["jobs"])
    assert "jobs" in registered()


@pytest.fixture
def local_consumer() -> Iterator[Callable[..., Any]]:
    names: list[str] = []

    def register(**kwargs: Any) -> Callable[[Callable[[Msg], Any]], Any]:
        names.append(kwargs.get("name") or kwargs["durable"])
        return consumer(**kwargs)

    try:
        yield register
    finally:
        for n in names:
            unregister(n)


def _run_worker(worker: Worker) -> tuple[threading.Thread, list[int]]:
    status: list[int] = []
    worker.start()
    t = threading.Thread(target=lambda: status.append(worker.serve()), name="test-worker")
    t.start()
    return t, status


def test_handler_exception_leads_to_redelivery(
    django_nats: NatsServer,
    local_consumer: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    js = get_jetstream()
    js.create_stream(name="FLAKY", subjects=["flaky.>"])
    for i in range(3):
        js.publish("flaky.job", b"%d" % i)
    seen: list[tuple[bytes, int]] = []
    lock = threading.Lock()

    @local_consumer(stream="FLAKY", durable="flaky", nak_delay=0.2, threads=2)
    def flaky(msg: Msg) -> None:
        with lock:
            seen.append((msg.data, msg.metadata.num_delivered))
        if msg.data == b"1" and msg.metadata.num_delivered == 1:
            raise RuntimeError("first try fails")

    caplog.set_level(logging.INFO, logger="jsclient.contrib.django")
    worker = Worker([registered()["flaky"]])
    t, status = _run_worker(worker)
    try:
        eventually(lambda: (b"1", 2) in seen, 15, "the failed message to come back")
    finally:
        worker.request_stop()
        t.join(30)
    assert status == [0]
    assert sorted(seen) == [(b"0", 1), (b"1", 1), (b"1", 2), (b"2", 1)]
    failure = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failure) == 1 and failure[0].name == "jsclient.contrib.django.worker"
    text = failure[0].getMessage()
    assert "stream FLAKY sequence 2 (delivery 1" in text and "redelivery in 0.2 s" in text
    assert failure[0].exc_info is not None
    assert worker.runners[0].acked == 3 and worker.runners[0].nakd == 1
    info = js.consumer("FLAKY", "flaky").info()
    assert info.num_ack_pending == 0 and info.num_redelivered == 0


def test_stale_database_connections_are_closed_around_messages(
    django_nats: NatsServer, local_consumer: Callable[..., Any]
) -> None:
    js = get_jetstream()
    js.create_stream(name="DBC", subjects=["dbc"])
    connections_seen: list[Any] = []

    @local_consumer(stream="DBC", durable="dbc")
    def use_db(msg: Msg) -> None:
        Handled.objects.count()
        connections_seen.append(connection.connection)
        # Make this thread's connection unusable, as a dropped database link
        # would: Django must not hand it to the next message.
        connection.errors_occurred = True
        connection.connection.close()

    worker = Worker([registered()["dbc"]])
    t, status = _run_worker(worker)
    try:
        js.publish("dbc", b"a")
        eventually(lambda: len(connections_seen) == 1, 10, "the first message")
        js.publish("dbc", b"b")
        eventually(lambda: len(connections_seen) == 2, 10, "the second message")
    finally:
        worker.request_stop()
        t.join(30)
    assert status == [0]
    a, b = connections_seen
    assert a is not b  # a fresh connection for the second message
    info = js.consumer("DBC", "dbc").info()
    assert info.num_ack_pending == 0 and info.num_redelivered == 0


def test_worker_without_stream_fails_clearly(
    django_nats: NatsServer, local_consumer: Callable[..., Any]
) -> None:
    @local_consumer(stream="MISSING", durable="m", bind=True)
    def nothing(msg: Msg) -> None:  # pragma: no cover - never runs
        pass

    with pytest.raises(WorkerError, match="does not exist"):
        Worker([registered()["m"]]).start()
    assert get_connection().is_connected


class _Runs:
    """(payload, num_delivered) of every handler run, thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: list[tuple[bytes, int]] = []

    def add(self, msg: Msg) -> int:
        delivered = msg.metadata.num_delivered
        with self.lock:
            self.runs.append((msg.data, delivered))
        return delivered


def test_slow_handler_is_kept_alive_and_handled_once(
    django_nats: NatsServer, local_consumer: Callable[..., Any]
) -> None:
    # ack_wait 1 s, 2.5 s per message, two threads, three messages: the third
    # waits (buffered, then queued) while the first two are handled. Every
    # message held by the worker gets +WPI, so none is delivered twice.
    js = get_jetstream()
    js.create_stream(name="SLOW", subjects=["slow.>"])
    for i in range(3):
        js.publish("slow.job", b"%d" % i)
    got = _Runs()

    @local_consumer(stream="SLOW", durable="slow", threads=2, config={"ack_wait": 1.0})
    def slow(msg: Msg) -> None:
        got.add(msg)
        time.sleep(2.5)

    worker = Worker([registered()["slow"]])
    t, status = _run_worker(worker)
    try:
        eventually(lambda: worker.runners[0].acked == 3, 20, "three messages handled")
    finally:
        worker.request_stop()
        t.join(30)
    assert status == [0]
    assert sorted(got.runs) == [(b"0", 1), (b"1", 1), (b"2", 1)]
    info = js.consumer("SLOW", "slow").info()
    # One delivery per message: a redelivery would have raised the consumer sequence.
    assert info.delivered.consumer_seq == 3 and info.num_ack_pending == 0, info


def test_deadline_ends_the_keepalive(
    django_nats: NatsServer,
    local_consumer: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    js = get_jetstream()
    js.create_stream(name="DL", subjects=["dl.>"])
    js.publish("dl.job", b"hang")
    got = _Runs()

    @local_consumer(stream="DL", durable="dl", threads=2, deadline=0.5, config={"ack_wait": 1.0})
    def hangs_once(msg: Msg) -> None:
        if got.add(msg) == 1:
            time.sleep(3.0)  # past the deadline: the server sends it again meanwhile

    caplog.set_level(logging.INFO, logger="jsclient.contrib.django")
    worker = Worker([registered()["dl"]])
    t, status = _run_worker(worker)
    try:
        eventually(lambda: (b"hang", 2) in got.runs, 10, "the redelivery")
        eventually(lambda: worker.runners[0].acked == 2, 10, "both runs to finish")
    finally:
        worker.request_stop()
        t.join(30)
    assert status == [0]
    late = [r.getMessage() for r in caplog.records if "after its deadline" in r.getMessage()]
    assert len(late) == 1 and "stream DL sequence 1 (delivery 1" in late[0], late


def test_base_exception_in_handler_is_nakd_and_the_thread_goes_on(
    django_nats: NatsServer,
    local_consumer: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # SystemExit, and the CancelledError async_to_sync code raises, used to end
    # the handler thread with the message neither acked nor nak'd.
    js = get_jetstream()
    js.create_stream(name="BASE", subjects=["base.>"])
    for payload in (b"exit", b"cancel", b"ok"):
        js.publish("base.job", payload)
    got = _Runs()

    @local_consumer(stream="BASE", durable="base", threads=1, nak_delay=0.2)
    def raises_once(msg: Msg) -> None:
        if got.add(msg) == 1:
            if msg.data == b"exit":
                raise SystemExit(3)
            if msg.data == b"cancel":
                raise asyncio.CancelledError()

    caplog.set_level(logging.INFO, logger="jsclient.contrib.django")
    worker = Worker([registered()["base"]])
    t, status = _run_worker(worker)
    try:
        eventually(lambda: worker.runners[0].acked == 3, 15, "every message acked")
    finally:
        worker.request_stop()
        t.join(30)
    assert status == [0]
    assert sorted(got.runs) == [
        (b"cancel", 1),
        (b"cancel", 2),
        (b"exit", 1),
        (b"exit", 2),
        (b"ok", 1),
    ]
    assert worker.runners[0].nakd == 2
    # The worker's own records: another test's client may still log (its server gone).
    failures = [
        r
        for r in caplog.records
        if r.levelno == logging.ERROR and r.name.startswith("jsclient.contrib.django")
    ]
    assert len(failures) == 2 and all(r.exc_info for r in failures)


def test_serve_exits_when_a_handler_thread_dies(
    django_nats: NatsServer,
    local_consumer: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    js = get_jetstream()
    js.create_stream(name="DIE", subjects=["die.>"])

    @local_consumer(stream="DIE", durable="die", threads=1)
    def never(msg: Msg) -> None:  # pragma: no cover - _handle is replaced
        pass

    def broken(self: Any, msg: Msg) -> None:
        raise RuntimeError("a bug outside the handler")

    monkeypatch.setattr(ConsumerRunner, "_handle", broken)
    caplog.set_level(logging.INFO, logger="jsclient.contrib.django")
    worker = Worker([registered()["die"]])
    t, status = _run_worker(worker)
    try:
        js.publish("die.job", b"x")
        t.join(15)
    finally:
        worker.request_stop()
        t.join(30)
    assert status == [1]
    text = caplog.text
    assert "handler thread jsclient-django-die-0 failed and ends" in text
    assert "handler thread(s) jsclient-django-die-0 ended; stopping the worker" in text
    assert worker.runners[0].returned == 1  # the message in hand was nak'd, not left
