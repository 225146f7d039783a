"""Real Celery workers on a real nats-server: processes started, waited for and cleaned up.

A :class:`Worker` is ``python -m celery -A celeryapp worker ...`` in a session
of its own (``start_new_session``), so that stopping it for good signals its
whole process group by the group's id, the pool's children included.
``workers`` (a fixture) kills every worker a test started that is still
running, with its children, and waits for them; every wait has a timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jsclient.server import NatsServer

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import celeryapp  # noqa: E402
from _js import eventually  # noqa: E402

pytest.importorskip("celery")


class Worker:
    """One ``celery worker`` process (and its pool), its output in a log file."""

    def __init__(
        self,
        url: str,
        log: Path,
        name: str,
        *args: str,
        ack_wait: float = 30.0,
        records: Path | None = None,
    ) -> None:
        env = dict(os.environ)
        env.update(
            JSC_NATS_URL=url,
            JSC_ACK_WAIT=str(ack_wait),
            JSC_RECORDS=str(records or ""),
            JSC_WORKER=name,
            PYTHONPATH=os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]),
        )
        self.name = name
        self.log_path = log
        self._log = open(log, "ab")  # noqa: SIM115 - closed in wait()/kill()
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "celeryapp",
            "worker",
            "-n",
            f"{name}@%h",
            "-l",
            "info",
            "--without-mingle",
            "--without-gossip",
            *args,
        ]
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=HERE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        """What the worker printed so far."""
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 30.0) -> Worker:
        """Wait for Celery's ``ready.`` line (the consumers are up)."""
        eventually(
            lambda: " ready." in self.log() or self.proc.poll() is not None,
            timeout,
            f"worker {self.name} to start",
        )
        assert self.proc.poll() is None, self.log()
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """Warm shutdown (SIGTERM to the main process); its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the worker's whole process group (its pool too) and reap it."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._wait_group_gone()
        if not self._log.closed:
            self._log.close()

    def _wait_group_gone(self) -> None:
        # Pool children reparented to init are reaped by it; wait until none is left.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    """One JetStream server for the module."""
    with NatsServer(jetstream=True) as srv:
        yield srv


@pytest.fixture
def workers(server: NatsServer, tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    """``start(name, *celery_args, ack_wait=..., records=...)``; all killed at teardown."""
    started: list[Worker] = []

    def start(name: str, *args: str, **kwargs: Any) -> Worker:
        w = Worker(server.url, tmp_path / f"{name}-{len(started)}.log", name, *args, **kwargs)
        started.append(w)
        return w

    try:
        yield start
    finally:
        for w in started:
            w.kill()


def celery_cli(
    server: NatsServer, *args: str, timeout: float = 30.0
) -> subprocess.CompletedProcess[str]:
    """``celery -A celeryapp ARGS`` against ``server`` (output captured)."""
    env = dict(
        os.environ,
        JSC_NATS_URL=server.url,
        PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    )
    return subprocess.run(
        [sys.executable, "-m", "celery", "-A", "celeryapp", *args],
        env=env,
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def close_app(app: Any) -> None:
    """Close a producer app's connections (kombu pools, the results' connections)."""
    import jsclient.contrib.celery

    app.close()
    jsclient.contrib.celery.close_connections()


@contextmanager
def app_at(url: str) -> Iterator[Any]:
    """A producer app on the server at ``url``, closed after."""
    a = celeryapp.make_app(url)
    try:
        yield a
    finally:
        close_app(a)


__all__ = ["Worker", "app_at", "celery_cli", "celeryapp", "close_app", "eventually"]
