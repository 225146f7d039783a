"""The Django example under ``opentelemetry-instrument``, as real processes: one trace
from the web request (Django's own instrumentation) through ``publish_on_commit``
to the worker's ``@consumer`` handler, read from the spans both processes export.

The web process is ``manage.py runserver --noreload`` and the worker
``manage.py jetstream_worker``, each started by ``opentelemetry-instrument``
with the console span exporter (a JSON object per span on stdout).
``opentelemetry-instrument`` needs a configurator (what ``opentelemetry-distro``
registers) and finds jsclient's instrumentor through its entry point; an
editable install made before the entry point was added lacks it, so a
dist-info on the children's ``PYTHONPATH`` declares both (the entry point is
the line of pyproject.toml; the configurator is the SDK's own, which the
distro subclasses). A fresh setup installs the entry point for real.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _js import eventually

from jsclient.server import NatsServer

pytest.importorskip("opentelemetry.instrumentation.django")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "django_worker"
BIN = Path(sys.executable).parent


def _free_port() -> int:
    """A free port for runserver, below the kernel's ephemeral range: a port the
    kernel hands out (to a nats-server of another test lane, or to any outgoing
    connection) cannot take it between this check and runserver's bind."""
    low = _ephemeral_low()
    for _ in range(100):
        port = random.randrange(max(1024, low - 12_000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _entry_points(root: Path) -> None:
    """A dist-info declaring jsclient's instrumentor and the SDK's configurator."""
    dist = root / "jsclient_otel_e2e-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: jsclient-otel-e2e\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(
        "[opentelemetry_instrumentor]\n"
        "jsclient = jsclient.contrib.otel:JsclientInstrumentor\n"
        "[opentelemetry_configurator]\n"
        "jsclient_e2e = opentelemetry.sdk._configuration:_OTelSDKConfigurator\n"
    )


def _spans(path: Path) -> list[dict[str, Any]]:
    """The span objects in a console exporter's output (other output is skipped)."""
    text = path.read_text(errors="replace")
    dec = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    i = text.find("{")
    while i >= 0:
        try:
            obj, end = dec.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict) and "context" in obj and "name" in obj:
            found.append(obj)
        i = text.find("{", end)
    return found


class Proc:
    def __init__(self, name: str, args: list[str], env: dict[str, str], tmp: Path) -> None:
        self.out = tmp / f"{name}.out"
        self.err = tmp / f"{name}.err"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.p = subprocess.Popen(args, cwd=EXAMPLE, env=env, stdout=out, stderr=err)

    def logs(self) -> str:
        return "".join(f"--- {f.name}\n{f.read_text()}\n" for f in (self.out, self.err))

    def stop(self) -> None:
        import signal

        if self.p.poll() is None:
            # SIGINT: runserver exits through KeyboardInterrupt and the worker stops
            # gracefully (the spans asserted were exported before).
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)


@pytest.fixture
def example_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    with NatsServer() as srv:
        ep = tmp_path / "ep"
        ep.mkdir()
        _entry_points(ep)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "DJANGO_"))}
        env.update(
            NATS_URL=srv.url,
            EXAMPLE_DB=str(tmp_path / "db.sqlite3"),
            DJANGO_SETTINGS_MODULE="exampleproject.settings",
            PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            PYTHONPATH=str(ep),
            PYTHONUNBUFFERED="1",
        )
        for cmd in (["migrate", "--verbosity", "0"], ["setup_streams"]):
            subprocess.run(
                [sys.executable, "manage.py", *cmd], cwd=EXAMPLE, env=env, check=True, timeout=60
            )
        env.update(
            OTEL_SERVICE_NAME="example",
            OTEL_TRACES_EXPORTER="console",
            OTEL_METRICS_EXPORTER="none",
            OTEL_LOGS_EXPORTER="none",
            OTEL_BSP_SCHEDULE_DELAY="200",  # ms: spans reach stdout while the test polls
        )
        yield env


def test_opentelemetry_instrument_traces_web_request_to_worker_handler(
    example_env: dict[str, str], tmp_path: Path
) -> None:
    port = _free_port()
    tool = str(BIN / "opentelemetry-instrument")
    worker = Proc(
        "worker", [tool, sys.executable, "manage.py", "jetstream_worker"], example_env, tmp_path
    )
    web = Proc(
        "web",
        [tool, sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        example_env,
        tmp_path,
    )
    procs = (web, worker)
    try:
        body = urllib.parse.urlencode({"item": "book", "quantity": 2}).encode()

        def place() -> dict[str, Any] | None:
            for p in procs:
                assert p.p.poll() is None, p.logs()
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/orders/", body, timeout=20
                ) as resp:
                    assert resp.status == 201
                    order: dict[str, Any] = json.loads(resp.read())
                    return order
            except OSError:  # runserver not listening yet
                return None

        # 60 s: two interpreters under opentelemetry-instrument start beside the
        # other CI lanes (the slowest seen: the free-threaded build's).
        order = eventually(place, 60, "runserver answers POST /orders/")

        def handled() -> dict[str, Any] | None:
            for p in procs:
                assert p.p.poll() is None, p.logs()
            for s in _spans(worker.out):
                if s["name"] == "process orders.new":
                    return s
            return None

        proc_span = eventually(handled, 30, "the worker's process span")
        acks = eventually(
            lambda: [s for s in _spans(worker.out) if s["name"] == "ack ORDERS"],
            15,
            "the handler's ack span",
        )
        server_span = eventually(
            lambda: next((s for s in _spans(web.out) if s["kind"] == "SpanKind.SERVER"), None),
            15,
            "the web request's server span",
        )
    except BaseException:
        print(web.logs() + worker.logs())  # shown with the failure
        raise
    finally:
        for p in procs:
            p.stop()
    logs = web.logs() + worker.logs()
    web_spans = _spans(web.out)
    (send,) = [s for s in web_spans if s["name"] == "send orders.new"]
    trace_id = server_span["context"]["trace_id"]
    # Django's instrumentation: the request's SERVER span, a root.
    assert server_span["parent_id"] is None, logs
    assert server_span["attributes"].get("http.request.method", "POST") == "POST"
    # The view's publish_on_commit: a child of the request's span.
    assert send["kind"] == "SpanKind.PRODUCER"
    assert send["context"]["trace_id"] == trace_id
    assert send["parent_id"] == server_span["context"]["span_id"]
    assert send["attributes"]["messaging.message.id"] == f"order-{order['id']}"
    # The worker (another process): the handler's span is the send's child.
    assert proc_span["context"]["trace_id"] == trace_id
    assert proc_span["parent_id"] == send["context"]["span_id"]
    assert proc_span["kind"] == "SpanKind.CONSUMER"
    assert proc_span["attributes"]["code.function.name"].endswith("bill")
    assert proc_span["attributes"]["messaging.consumer.group.name"] == "billing"
    # The worker's ack after the handler: the handler span's child.
    assert [a["parent_id"] for a in acks] == [proc_span["context"]["span_id"]], logs
