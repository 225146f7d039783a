"""The benchmark harness end to end, with tiny counts: children, echo peer, set-up, CLI.

Timings are not asserted (the machine is shared); these check that every run
happens in a fresh process of its own, reports a rate and its own memory,
and that the parent's pieces (echo peer, stream set-up, checks, report) work
against a real server.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import jsbench as bench
import jsclient
from jsbench import js, raw, report, runner
from jsbench.interp import natsio_status
from jsbench.peer import EchoPeer
from jsbench.workloads import JSCLIENT, NATS_PY, NATSIO, RAW, by_name
from jsclient import _impl
from jsclient.server import NatsServer

NATSIO_OK, NATSIO_WHY = natsio_status()


def test_children_report_rate_and_their_own_memory(nats_server: NatsServer) -> None:
    for client in (JSCLIENT, NATS_PY, RAW):
        res, data = runner.run_child(
            "core-publish-16B", client, nats_server.url, 2000, timeout=60, impl=_impl.IMPL
        )
        assert res.rate > 0
        assert res.rss_start is not None and res.rss_peak is not None
        assert 1 << 20 < res.rss_start <= res.rss_peak
        # its own memory, not this (pytest) process's peak carried over
        assert res.rss_peak < 96 << 20
        assert res.cpu is not None and 0 < res.cpu < 30  # the workload's own CPU time
        assert res.server_cpu is None  # only the parent's harness measures the server
        # only the jsclient run loads jsclient; the others measure their client alone
        assert data["jsclient_loaded"] is (client == JSCLIENT)
        if client == JSCLIENT:
            assert data["impl"] == _impl.IMPL


def test_child_failure_is_reported() -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"nats://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(runner.ChildError, match="ConnectionRefused"):
        runner.run_child("core-publish-16B", RAW, url, 10, timeout=30)


def test_echo_peer_and_raw_round_trips(nats_server: NatsServer) -> None:
    url = nats_server.url
    with EchoPeer(url) as peer:
        with jsclient.connect(url) as nc:
            assert nc.request("bench.echo", b"ping", timeout=5).data == b"ping"
        res = raw.request(url, 50, 16)
        assert res.rate > 0 and res.p50 is not None and res.p99 is not None
        assert res.p50 <= res.p99
    assert peer.proc.poll() is not None  # stopped with the context


def test_raw_ceilings_store_what_they_publish(nats_server: NatsServer) -> None:
    url = nats_server.url
    js.setup_publish(url, 0, 16)
    assert raw.js_publish_sync(url, 20, 16).rate > 0
    assert raw.js_publish_pipelined(url, 500, 16, window=64).rate > 0
    assert raw.js_publish_pipelined(url, 100, 16, window=1000, decode=False).rate > 0
    stored = 1 + 20 + 500 + 100  # the sync ceiling's warm-up publish too
    assert js.check_published(url, stored, 16) is None
    assert f"stored {stored} of {stored + 1}" in (js.check_published(url, stored + 1, 16) or "")
    assert raw.publish(url, 5000, 1024).rate > 0
    assert raw.server_version(url) == nats_server.info.get("version")


def test_consume_stream_is_filled_once_and_reused(nats_server: NatsServer) -> None:
    url = nats_server.url
    js.setup_consume(url, 300, 16)
    with jsclient.connect(url) as nc:
        jsx = nc.jetstream()
        created = jsx.stream(js.CON_STREAM).info().created
        jsx.create_consumer(js.CON_STREAM, durable_name="left-over")
    js.setup_consume(url, 300, 16)  # same fill: kept, consumers cleared
    with jsclient.connect(url) as nc:
        s = nc.jetstream().stream(js.CON_STREAM)
        assert s.info().created == created
        assert list(s.consumer_names()) == []
    js.setup_consume(url, 200, 16)  # another count: made anew
    with jsclient.connect(url) as nc:
        assert nc.jetstream().stream(js.CON_STREAM).info().state.messages == 200


def test_direct_get_batch_columns_read_exactly_the_range(nats_server: NatsServer) -> None:
    from jsbench import direct
    from jsclient.jetstream.manage import direct as _direct

    assert direct.PAGE == _direct.PAGE_MSGS  # both columns send the same requests
    url, n = nats_server.url, 250
    direct.setup_direct(url, n, 16)
    assert direct.js_get_batch(url, n, 16).rate > 0
    assert direct.py_get_batch(url, n, 16).rate > 0  # jetstreamext, one request
    assert direct.py_get_batch(url, n, 16, page=64).rate > 0  # four, the last one short
    # A range past the stream's end is a short read: both columns raise.
    for fn in (direct.js_get_batch, direct.py_get_batch):
        with pytest.raises(RuntimeError, match=f"read {n} of {n + 1} messages"):
            fn(url, n + 1, 16)
    # The nats-py column runs in a child that does not load jsclient.
    res, data = runner.run_child("direct-get-batch", NATS_PY, url, n, timeout=60)
    assert res.rate > 0 and data["jsclient_loaded"] is False


def test_run_rows_with_the_shared_peers(nats_server: NatsServer) -> None:
    clients = [JSCLIENT, NATS_PY, NATSIO, RAW]
    rows = [by_name("core-request"), by_name("js-publish-sync"), by_name("js-fetch-ack")]
    seen: list[str] = []
    outcomes = bench.run(
        nats_server.url,
        rows,
        n=200,
        clients=clients,
        impl=_impl.IMPL,
        timeout=60,
        progress=lambda label, done, total: seen.append(label),
        server_pid=nats_server.pid,
    )
    assert [o.name for o in outcomes] == [w.name for w in rows]
    for o in outcomes:
        for c in clients:
            st = o.clients[c]
            if (c == RAW and o.name == "js-fetch-ack") or (c == NATSIO and not NATSIO_OK):
                assert st.status == report.NA
                continue
            assert st.status == report.OK, (o.name, c, st.error)
            assert st.rate and st.rate > 0
            assert st.rss_peak_mb and st.rss_peak_mb > 1
            assert st.cpu_us is not None and st.cpu_us > 0
            # the server's CPU during the run (in clock ticks: may round to 0)
            assert st.server_cpu_us is not None and st.server_cpu_us >= 0
        assert o.ratio(NATS_PY) is not None
        if not NATSIO_OK:
            assert o.clients[NATSIO].status == report.NA
            assert o.clients[NATSIO].reason == NATSIO_WHY
    request = outcomes[0]
    assert request.latency and request.clients[JSCLIENT].p50_us
    assert request.ratio(RAW) is not None
    assert seen[-1] == "done" and any("[raw]" in s for s in seen)


@pytest.mark.skipif(not NATSIO_OK, reason=NATSIO_WHY)
def test_natsio_child_runs(nats_server: NatsServer) -> None:
    res, data = runner.run_child("core-publish-1KiB", NATSIO, nats_server.url, 500, timeout=60)
    assert res.rate > 0 and data["jsclient_loaded"] is False


def test_cli(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "jsclient",
            "bench",
            "--quick",
            "--only",
            "core-publish-64*",
            "--clients",
            "jsclient,raw",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"Python {sys.version.split()[0]} (")
    assert "build: " in lines[1] and any(s in lines[1] for s in ("PGO", "unknown"))
    assert "nats-py" in lines[2] and "natsio" in lines[2] and "nats-server" in lines[2]
    assert any(line.startswith("core-publish-64KiB") for line in lines)
    cpu_head = lines.index(next(line for line in lines if line.startswith("CPU µs/msg (server)")))
    # jsclient's and raw's CPU per message, each with the embedded server's in brackets
    cpu_row = lines[cpu_head + 2].split()
    assert cpu_row[0] == "core-publish-64KiB" and cpu_row[2].startswith("(")
    outcomes, meta = report.from_json(out.read_text())
    assert meta["repeat"] == 1 and meta["impl"] == _impl.IMPL
    (o,) = outcomes
    assert o.clients[JSCLIENT].status == o.clients[RAW].status == report.OK
    assert o.clients[NATS_PY].status == report.NA  # not selected
    assert json.loads(out.read_text())["results"][0]["ratios"]["raw"] == o.ratio(RAW)

    listing = subprocess.run(
        [sys.executable, "-m", "jsclient", "bench", "--list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "js-pull-subscribe-ack" in listing and "[jsclient, nats-py]" in listing


@pytest.mark.parametrize("client", [JSCLIENT, NATS_PY, NATSIO])
def test_threaded_consume_rows_work_every_message_in_threads_and_ack_it(
    nats_server: NatsServer, client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if client == NATSIO and not NATSIO_OK:
        pytest.skip(NATSIO_WHY)
    from jsbench import threads

    seen: dict[str, int] = {}
    lock = threading.Lock()

    def slow_work(data: bytes, rounds: int = 0) -> int:
        assert data == b"x" * 16
        time.sleep(0.001)  # lets every handler thread take its turn
        with lock:
            name = threading.current_thread().name
            seen[name] = seen.get(name, 0) + 1
        return 0

    monkeypatch.setattr(threads, "work", slow_work)
    url, n = nats_server.url, 200
    js.setup_consume(url, n, 16)
    for k in (2, 4):
        seen.clear()
        assert by_name(f"js-consume-threads-{k}").fns[client](url, n, 16).rate > 0
        assert sum(seen.values()) == n
        assert len(seen) == k, seen  # every handler thread did some of the work
    with jsclient.connect(url) as nc:
        stream = nc.jetstream().stream(js.CON_STREAM)
        deadline = time.monotonic() + 10
        while True:
            infos = list(stream.consumers())
            if all(ci.ack_floor.stream_seq == n for ci in infos) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert len(infos) == 2
    for ci in infos:  # every message acked once the run returned
        assert ci.ack_floor.stream_seq == n and ci.num_ack_pending == 0, ci


@pytest.mark.parametrize("client", [JSCLIENT, NATS_PY, NATSIO])
def test_threaded_publish_rows_store_every_message(nats_server: NatsServer, client: str) -> None:
    if client == NATSIO and not NATSIO_OK:
        pytest.skip(NATSIO_WHY)
    url = nats_server.url
    js.setup_publish(url, 0, 16)
    for k in (2, 4):
        assert by_name(f"js-publish-threads-{k}").fns[client](url, 501, 16).rate > 0
    assert js.check_published(url, 2 * (501 + 1), 16) is None  # each run's warm-up too
    assert "stored" in (js.check_published(url, 2 * (501 + 1) + 1, 16) or "")


def test_otel_modes_run_the_jsclient_rows_instrumented(nats_server: NatsServer) -> None:
    pytest.importorskip("opentelemetry.sdk.trace")
    from jsbench import otel as bench_otel

    outcomes = bench.run(
        nats_server.url,
        [by_name("core-publish-16B")],
        n=500,
        clients=[JSCLIENT, RAW],
        impl=_impl.IMPL,
        timeout=60,
        otel=bench_otel.parse("none,sampled-off,sdk"),
    )
    names = [o.name for o in outcomes]
    assert names == [
        "core-publish-16B",
        "core-publish-16B+otel-sampled-off",
        "core-publish-16B+otel-sdk",
    ]
    plain, *instrumented = outcomes
    assert plain.clients[RAW].status == report.OK  # the plain row as always
    for o in instrumented:
        assert o.clients[JSCLIENT].status == report.OK, o.clients[JSCLIENT]
        assert o.clients[RAW].status == report.NA  # jsclient alone
        assert o.targets == []
    # The child instruments itself: its Client.publish is the instrumentation's.
    _res, data = runner.run_child(
        "core-publish-16B", JSCLIENT, nats_server.url, 200, timeout=60, otel="sampled-off"
    )
    assert data["otel"] == "sampled-off"
    with pytest.raises(runner.ChildError, match="jsclient only"):
        runner.run_child("core-publish-16B", RAW, nats_server.url, 10, timeout=60, otel="sdk")
    with pytest.raises(ValueError, match="not one of"):
        bench_otel.parse("none,always")
