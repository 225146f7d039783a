"""Celery on four brokers in one run: jsclient, nats-py in a loop thread, Redis, RabbitMQ.

    python benchmarks/celery_bench.py [--tasks 2000] [--latency-tasks 300] [--brokers ...]

It starts what it needs on free loopback ports, each in a temporary
directory, and stops it at the end: an embedded nats-server (``NatsServer``),
``redis-server`` (Debian's package: ``apt-get install -y redis-server``) and
``rabbitmq-server`` (Debian's package; its own ``epmd``, nodename, ports and
data directories, owned by the ``rabbitmq`` user the server script switches
to). The Python client of Redis is ``redis`` (``pip install redis``); kombu
brings ``amqp``. A broker whose server cannot start here is reported as
skipped, with why.

For each broker, with a real ``celery worker`` (prefork pool) and an empty
task (``ignore_result``, no result backend: the brokers alone are compared):

- **enqueue/s**: ``task.delay()`` calls per second from one thread, into a
  queue nobody consumes;
- **e2e tasks/s** with 1 and with 4 worker processes (``-c 1``, ``-c 4``):
  a queue filled with ``--tasks`` tasks is drained by a worker started after;
  the rate runs from the first task's start to the last one's (each task
  notes its start time), so the worker's own start is not counted;
- **latency p50/p99**: ``--latency-tasks`` tasks sent 10 ms apart to an idle
  4-process worker, from ``delay()`` to the task's start.

``--repeat`` rounds (2), each in another broker order; the table shows the
medians.

``natspy`` is ``benchmarks/_celery_natspy.py``: the asyncio-wrapping approach
of the kombu NATS transports proposed so far (kombu issue #2103), for the
comparison only. All brokers, workers and this script share the machine's
cores: compare the columns of one run, not runs of different days.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
QUEUE = "bench"
BROKERS = ("jsclient", "natspy", "redis", "rabbitmq")


# -- the app (the workers import this module: celery -A celery_bench) ----------------------


def make_app(broker: str, transport: str | None, records: str | None) -> Any:
    """The bench's Celery app on ``broker`` (with ``transport`` when the URL does not say)."""
    from celery import Celery

    import jsclient.contrib.celery  # noqa: F401  registers jetstream://

    app = Celery("bench", broker=broker, set_as_current=False)
    app.conf.update(
        broker_transport=transport,
        task_default_queue=QUEUE,
        task_ignore_result=True,
        worker_hijack_root_logger=False,
        worker_prefetch_multiplier=4,
        broker_connection_retry_on_startup=True,
    )

    @app.task(name="bench.noop", shared=False)
    def noop(sent_at: float) -> None:
        started = time.time()
        if records:
            fd = os.open(records, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{sent_at} {started}\n".encode())
            finally:
                os.close(fd)

    return app


app = (
    make_app(
        os.environ["CELERY_BENCH_BROKER"],
        os.environ.get("CELERY_BENCH_TRANSPORT") or None,
        os.environ.get("CELERY_BENCH_RECORDS"),
    )
    if os.environ.get("CELERY_BENCH_BROKER")
    else None
)


# -- servers -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"port {port} not listening after {timeout} s")


def stop_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, wait: float = 15) -> None:
    """Signal the process group of ``proc`` (started in a session of its own) and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(10)


def stop_pid(pid: int, wait: float = 30) -> None:
    """SIGTERM ``pid`` (a process this run started), SIGKILL if it is still there after ``wait``."""
    if pid <= 0:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


class Servers:
    """The brokers' servers of one run; ``stop()`` stops every one that started."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.urls: dict[str, tuple[str, str | None]] = {}
        self.skipped: dict[str, str] = {}
        self._stops: list[Callable[[], None]] = []

    def start(self, wanted: list[str]) -> None:
        if {"jsclient", "natspy"} & set(wanted):
            from jsclient.server import NatsServer

            srv = NatsServer(jetstream=True).start()
            self._stops.append(srv.stop)
            port = srv.url.rsplit(":", 1)[1]
            self.urls["jsclient"] = (f"jetstream://127.0.0.1:{port}", None)
            self.urls["natspy"] = (f"nats://127.0.0.1:{port}", "_celery_natspy:Transport")
        if "redis" in wanted:
            self._try("redis", self._redis)
        if "rabbitmq" in wanted:
            self._try("rabbitmq", self._rabbitmq)

    def _try(self, name: str, start: Callable[[], str]) -> None:
        try:
            self.urls[name] = (start(), None)
        except Exception as exc:  # reported in the table, the others still run
            self.skipped[name] = f"{type(exc).__name__}: {exc}"

    def _redis(self) -> str:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server not installed (apt-get install -y redis-server)")
        import redis  # noqa: F401  kombu's Redis transport needs the client

        port = free_port()
        d = self.tmp / "redis"
        d.mkdir()
        proc = subprocess.Popen(
            [
                exe,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(d),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._stops.append(lambda: stop_group(proc))
        wait_port(port, 15, proc)
        return f"redis://127.0.0.1:{port}/0"

    def _rabbitmq(self) -> str:
        exe, epmd = shutil.which("rabbitmq-server"), shutil.which("epmd")
        if exe is None or epmd is None:
            raise RuntimeError(
                "rabbitmq-server not installed (Debian: apt-get install rabbitmq-server)"
            )
        port, dist, epmd_port = free_port(), free_port(), free_port()
        d = self.tmp / "rabbitmq"
        d.mkdir()
        (d / "enabled_plugins").write_text("[].\n")
        (d / "rabbitmq.conf").write_text("loopback_users = none\n")
        shutil.chown(d, "rabbitmq", "rabbitmq")
        for p in d.iterdir():
            shutil.chown(p, "rabbitmq", "rabbitmq")
        env = dict(
            os.environ,
            HOME=str(d),
            ERL_EPMD_PORT=str(epmd_port),
            RABBITMQ_NODE_PORT=str(port),
            RABBITMQ_DIST_PORT=str(dist),
            RABBITMQ_NODENAME=f"bench{port}@localhost",
            RABBITMQ_MNESIA_BASE=str(d / "mnesia"),
            RABBITMQ_LOG_BASE=str(d / "log"),
            RABBITMQ_LOGS="-",
            RABBITMQ_PID_FILE=str(d / "pid"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(d / "enabled_plugins"),
            RABBITMQ_CONFIG_FILE=str(d / "rabbitmq"),
            RABBITMQ_FEATURE_FLAGS_FILE=str(d / "feature_flags"),
            RABBITMQ_PLUGINS_EXPAND_DIR=str(d / "plugins-expand"),
            RABBITMQ_QUORUM_DIR=str(d / "quorum"),
            RABBITMQ_STREAM_DIR=str(d / "stream"),
        )
        log = open(d / "server.log", "wb")  # noqa: SIM115 - closed with the server
        proc = subprocess.Popen(
            [exe], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

        def stop() -> None:
            # The server script switches user, so the Erlang VM runs in a session
            # of its own: it is stopped by the pid it wrote, then the epmd it
            # started on this run's port (by that port), then the script's group.
            pid_file = d / "pid"
            if pid_file.exists():
                stop_pid(int(pid_file.read_text().strip() or 0))
            stop_group(proc, wait=10)
            subprocess.run(
                [epmd, "-port", str(epmd_port), "-kill"],
                env=env,
                timeout=10,
                capture_output=True,
                check=False,
            )
            log.close()

        self._stops.append(stop)
        try:
            wait_port(port, 60, proc)
        except RuntimeError as exc:
            tail = (d / "server.log").read_text(errors="replace")[-500:]
            raise RuntimeError(f"{exc}; server log: {tail}") from None
        return f"amqp://guest:guest@127.0.0.1:{port}//"

    def stop(self) -> None:
        for stop in reversed(self._stops):
            try:
                stop()
            except Exception as exc:
                print(f"  (stopping a server: {exc})", file=sys.stderr)


# -- one broker's measurements ---------------------------------------------------------------


class Worker:
    """``celery -A celery_bench worker -P prefork -c N`` on one broker."""

    def __init__(
        self, broker: str, transport: str | None, records: Path, procs: int, log: Path
    ) -> None:
        env = dict(
            os.environ,
            CELERY_BENCH_BROKER=broker,
            CELERY_BENCH_TRANSPORT=transport or "",
            CELERY_BENCH_RECORDS=str(records),
            PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        )
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.log = log
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "celery_bench",
                "worker",
                "-P",
                "prefork",
                "-c",
                str(procs),
                "-Q",
                QUEUE,
                "-l",
                "info",
                "--without-mingle",
                "--without-gossip",
                "--without-heartbeat",
            ],
            env=env,
            cwd=HERE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while " ready." not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("worker did not start: " + self.log.read_text()[-1500:])
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # warm shutdown of the main process
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        stop_group(self.proc, signal.SIGKILL)
        self._log.close()


def _records(path: Path) -> list[tuple[float, float]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        a, b = line.split()
        out.append((float(a), float(b)))
    return out


def _wait_records(path: Path, n: int, timeout: float) -> list[tuple[float, float]]:
    deadline = time.monotonic() + timeout
    while True:
        recs = _records(path)
        if len(recs) >= n or time.monotonic() > deadline:
            return recs
        time.sleep(0.1)


def _purge(app: Any) -> None:
    with app.connection_for_write() as conn:
        conn.default_channel.queue_declare(QUEUE, durable=True, auto_delete=False)
        conn.default_channel.queue_purge(QUEUE)


def measure(
    name: str, broker: str, transport: str | None, tmp: Path, n: int, n_latency: int
) -> dict[str, float]:
    """One broker's row."""
    d = tmp / f"run-{name}"
    d.mkdir(parents=True)
    producer = make_app(broker, transport, None)
    noop = producer.tasks["bench.noop"]
    row: dict[str, float] = {}
    try:
        _purge(producer)
        noop.delay(0.0)  # connect, declare: not timed
        _purge(producer)
        for procs in (1, 4):
            records = d / f"e2e{procs}.log"
            t0 = time.perf_counter()
            for _ in range(n):
                noop.delay(time.time())
            elapsed = time.perf_counter() - t0
            if procs == 1:
                row["enqueue/s"] = n / elapsed
            w = Worker(broker, transport, records, procs, d / f"worker{procs}.log")
            try:
                w.wait_ready()
                recs = _wait_records(records, n, 120)
                starts = sorted(s for _, s in recs)
                if len(starts) < n:
                    tail = w.log.read_text(errors="replace")[-800:]
                    raise RuntimeError(f"{len(starts)} of {n} tasks ran; worker log: {tail}")
                row[f"e2e/s c{procs}"] = (n - 1) / (starts[-1] - starts[0])
                if procs == 4:  # the same idle worker then takes the latency tasks
                    row.update(_latency(producer, n_latency, records))
            finally:
                w.stop()
    finally:
        producer.close()
    return row


def _latency(producer: Any, n: int, records_path: Path) -> dict[str, float]:
    # The running worker notes these in its records file too; they are told
    # apart from the e2e tasks by their send times (all later).
    noop = producer.tasks["bench.noop"]
    t_begin = time.time()
    for _ in range(n):
        noop.delay(time.time())
        time.sleep(0.01)
    deadline = time.monotonic() + 60
    while True:
        lat = [s - a for a, s in _records(records_path) if a >= t_begin]
        if len(lat) >= n or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    lat.sort()
    return {
        "p50 ms": 1000 * statistics.median(lat),
        "p99 ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--latency-tasks", type=int, default=300)
    ap.add_argument("--brokers", default=",".join(BROKERS))
    ap.add_argument("--repeat", type=int, default=2, help="rounds; the table shows medians")
    args = ap.parse_args(argv)
    wanted = [b for b in args.brokers.split(",") if b]
    tmp = Path(tempfile.mkdtemp(prefix="celery-bench-"))
    os.chmod(tmp, 0o755)  # the rabbitmq user reads its directory in here
    servers = Servers(tmp)
    rows: dict[str, dict[str, float] | str] = {}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in wanted}
    try:
        servers.start(wanted)
        for r in range(args.repeat):
            # Each round in another order, so that load from elsewhere on the
            # machine does not always fall on the same broker.
            for name in wanted[r % len(wanted) :] + wanted[: r % len(wanted)]:
                if name in servers.skipped or isinstance(rows.get(name), str):
                    continue
                broker, transport = servers.urls[name]
                print(f"round {r + 1}: {name} ({broker})", file=sys.stderr)
                try:
                    runs[name].append(
                        measure(
                            name, broker, transport, tmp / f"r{r}", args.tasks, args.latency_tasks
                        )
                    )
                except Exception as exc:
                    rows[name] = f"failed: {type(exc).__name__}: {exc}"[:200]
                    print(f"{name} failed: {exc}", file=sys.stderr)
        for name in wanted:
            if name in servers.skipped:
                rows[name] = "skipped: " + servers.skipped[name]
            elif name not in rows and runs[name]:
                rows[name] = {
                    c: statistics.median(run[c] for run in runs[name]) for c in runs[name][0]
                }
    finally:
        servers.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    cols = ["enqueue/s", "e2e/s c1", "e2e/s c4", "p50 ms", "p99 ms"]
    print(
        f"\nCelery, {args.tasks} empty tasks (latency: {args.latency_tasks}), medians of "
        f"{args.repeat} rounds, Python {sys.version.split()[0]}, {os.cpu_count()} cores\n"
    )
    print("| broker | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for name, row in rows.items():
        if isinstance(row, str):
            print(f"| {name} | {row} |")
        else:
            print(
                f"| {name} | "
                + " | ".join(f"{row[c]:.1f}" if c.endswith("ms") else f"{row[c]:.0f}" for c in cols)
                + " |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
