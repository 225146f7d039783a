"""The benchmark harness's pure parts: build detection, medians, ratios, targets, tables, JSON."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jsbench import interp, report, runner
from jsbench._child import ROOT
from jsbench.harness import client_order
from jsbench.result import Result, peak_rss, process_cpu
from jsbench.workloads import (
    CLIENTS,
    JSCLIENT,
    NATS_PY,
    NATSC,
    NATSIO,
    RAW,
    Target,
    Workload,
    by_name,
    workloads,
)

# -- interpreter build -------------------------------------------------------------------

PYENV_311 = {  # pyenv's default build: configure's own profile flag, unused
    "CONFIG_ARGS": "'--prefix=/root/.pyenv/versions/3.11.7' '--enable-shared'",
    "PY_CFLAGS": "-Wsign-compare -DNDEBUG -g -fwrapv -O3 -Wall",
    "PY_CFLAGS_NODIST": "-std=c11 -Wextra",
    "PGO_PROF_USE_FLAG": "-fprofile-use -fprofile-correction",
}
DEBIAN_313 = {  # Debian's package: its own profile build, the flag blanked
    "CONFIG_ARGS": "'--enable-shared' '--prefix=/usr' '--with-computed-gotos'",
    "PY_CFLAGS": "-fno-strict-overflow -Wsign-compare -DNDEBUG -g -O2 -Wall",
    "PY_CFLAGS_NODIST": "-Wdate-time -D_FORTIFY_SOURCE=2 -g -fwrapv -O2",
    "PGO_PROF_USE_FLAG": "",
}


@pytest.mark.parametrize(
    ("config", "status", "evidence"),
    [
        (
            {**PYENV_311, "CONFIG_ARGS": "'--enable-optimizations' '--with-lto'"},
            interp.PGO,
            "--enable-optimizations",
        ),
        (
            {**DEBIAN_313, "PY_CFLAGS_NODIST": "-O2 -fprofile-use -fprofile-correction"},
            interp.PGO,
            "PY_CFLAGS_NODIST",
        ),
        ({**DEBIAN_313, "PY_CFLAGS": "-O2 -fprofile-instr-use=code.profdata"}, interp.PGO, "clang"),
        (PYENV_311, interp.NO_PGO, "without --enable-optimizations"),
        (DEBIAN_313, interp.PGO, "blanked"),
        ({}, interp.UNKNOWN, "no configure arguments"),
    ],
)
def test_pgo_status(config: dict[str, str], status: str, evidence: str) -> None:
    got, why = interp.pgo_status(config)
    assert got == status
    if evidence != "clang":
        assert evidence in why
    else:
        assert "-fprofile-instr-use" in why


def test_interpreter_is_described_with_its_build() -> None:
    info = interp.interpreter_info()
    assert info["pgo"] in (interp.PGO, interp.NO_PGO, interp.UNKNOWN)
    lines = interp.describe_interpreter(info)
    assert info["version"] in lines[0] and info["implementation"] in lines[0]
    assert f"build: {info['pgo']}" in lines[1]
    venv = interp.describe_interpreter(
        {**info, "executable": "/v/bin/python", "base_executable": "/usr/bin/python3.13"}
    )
    assert "(venv of /usr/bin/python3.13)" in venv[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_process_cpu_counts_a_busy_process() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\n"
            "while time.process_time() - t < 0.3: pass\nprint('done', flush=True)\n"
            "import sys; sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "done\n"
        used = process_cpu(proc.pid)
        assert used is not None and 0.25 <= used < 30
    finally:
        proc.communicate("", timeout=10)
    assert process_cpu(proc.pid) is None  # reaped: no such process


def test_peak_rss_is_this_process() -> None:
    # In a fresh interpreter: the peak rises with what it touches, and starts
    # from its own size, not this (possibly large) process's peak.
    code = (
        "from jsbench.result import peak_rss\n"
        "before = peak_rss()\n"
        "block = bytearray(64 << 20)\n"
        "block[:: 1 << 12] = bytes(len(block[:: 1 << 12]))\n"
        "print(before, peak_rss())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = map(int, out.stdout.split())
    assert 1 << 20 < before < 48 << 20
    assert after >= before + (48 << 20)
    here = peak_rss()
    assert here is not None and here > 1 << 20


# -- workload registry -------------------------------------------------------------------


def test_registry_rows_and_targets() -> None:
    ws = workloads()
    names = [w.name for w in ws]
    assert len(names) == len(set(names))
    assert all(JSCLIENT in w.fns for w in ws)
    for name in (
        "core-publish-16B",
        "core-publish-1KiB",
        "core-publish-4KiB",
        "core-publish-64KiB",
        "core-receive-next_msg",
        "core-receive-callback",
        "core-request",
        "js-publish-sync",
        "js-publish-async",
        "js-publisher-default",
        "js-fetch-ack",
        "js-consume-ack",
        "js-messages-ack",
        "js-ordered",
        "js-pull-subscribe-ack",
        "js-push-ack",
        "js-ordered-push",
        "kv-get",
        "kv-put",
        "kv-watch-initial",
        "kv-keys",
        "js-atomic-batch",
        "js-fast-ingest",
        "direct-get-batch",
        "obj-put",
        "obj-get",
        "obj-file-1GiB",
    ):
        assert name in names
    # a raw ceiling beside every publish and round-trip row, and nowhere else
    for w in ws:
        publishes = w.name.startswith(
            ("core-publish", "core-request", "js-publish", "kv-get", "kv-put", "obj-put", "obj-get")
        )
        assert (RAW in w.fns) == (publishes or w.name.startswith("js-publisher")), w.name
    # natsio has no legacy pull or push subscriptions
    for name in ("js-pull-subscribe-ack", "js-push-ack", "js-push-ack-callback"):
        assert NATSIO not in by_name(name).fns

    def targets(name: str) -> set[tuple[str, float]]:
        return {(t.against, t.ratio) for t in by_name(name).all_targets()}

    assert targets("core-publish-64KiB") == {(RAW, 0.7), (NATSIO, 1.0), (NATSC, 0.8)}
    assert targets("core-request") == {(RAW, 0.85), (NATSIO, 1.0), (NATSC, 1.5)}
    assert targets("js-publish-sync") == {(RAW, 0.85), (NATSIO, 1.0), (NATSC, 1.5)}
    assert (NATS_PY, 10.0) in targets("core-receive-next_msg")
    assert (NATS_PY, 3.0) in targets("core-receive-callback")
    assert (NATS_PY, 3.0) in targets("js-publish-async")
    assert (NATS_PY, 3.0) in targets("js-publisher-default")
    assert targets("js-fetch-ack") == {(NATS_PY, 5.0), (NATSIO, 2.5), (NATSC, 1.0)}
    assert targets("js-consume-ack") == {(NATS_PY, 5.0), (NATSIO, 2.5)}
    assert by_name("core-publish-4KiB-100k").rss_growth_mb == 64.0
    assert targets("kv-get") == {(RAW, 0.85), (NATS_PY, 1.0), (NATSIO, 1.0)}
    assert targets("kv-put") == {(RAW, 0.85), (NATS_PY, 1.0), (NATSIO, 1.0)}
    assert targets("kv-watch-initial") == {(NATS_PY, 5.0), (NATSIO, 2.0)}
    assert targets("kv-keys") == {(NATS_PY, 5.0), (NATSIO, 1.0)}
    assert (NATS_PY, 2.0) in targets("direct-get-batch")
    for name in ("obj-put", "obj-get"):
        assert targets(name) == {(NATS_PY, 5.0), (NATSIO, 1.0), (RAW, 0.5)}
    assert by_name("obj-file-1GiB").rss_growth_mb == 32.0
    assert Target(RAW, 0.7).label() == "≥0.7x raw"
    assert Target(NATSIO, 2.5).label() == "≥2.5x natsio"
    assert Target(NATS_PY, 10).label() == "≥10x nats-py"


def test_client_order_alternates() -> None:
    w = by_name("core-request")
    first = client_order(w, CLIENTS, 0)
    assert first == [JSCLIENT, NATS_PY, NATSIO, RAW, NATSC]
    assert client_order(w, CLIENTS, 1) == first[::-1]
    assert client_order(w, [JSCLIENT, RAW], 2) == [JSCLIENT, RAW]


# -- medians, ratios, targets -------------------------------------------------------------


def _fake_workload(**kw: object) -> Workload:
    def never(url: str, n: int, size: int) -> Result:
        raise AssertionError("not run")

    fields: dict[str, object] = {
        "name": "w",
        "description": "a row",
        "fns": {JSCLIENT: never, NATS_PY: never, NATSIO: never, RAW: never},
        "n": 100,
        "quick_n": 10,
        "latency": True,
        "targets": (Target(RAW, 0.7), Target(NATS_PY, 3.0)),
    }
    fields.update(kw)
    return Workload(**fields)  # type: ignore[arg-type]


def test_client_stats_are_medians() -> None:
    runs = [
        Result(100.0, 0.001, 0.004, 10 << 20, 30 << 20, cpu=0.5, server_cpu=2.0),
        Result(300.0, 0.003, 0.002, 12 << 20, 50 << 20, cpu=0.3, server_cpu=1.0),
        Result(200.0, 0.002, 0.003, 11 << 20, 40 << 20, cpu=0.4),
    ]
    st = report.client_stats(runs, n=100_000)
    assert st.status == report.OK
    assert st.rate == 200.0
    assert (st.p50_us, st.p99_us) == (2000.0, 3000.0)
    assert (st.rss_start_mb, st.rss_peak_mb, st.rss_growth_mb) == (11.0, 40.0, 29.0)
    assert st.runs == [100.0, 300.0, 200.0]
    # CPU seconds per run over 100k messages: µs per message, medians of what was measured
    assert (st.cpu_us, st.server_cpu_us) == (4.0, 15.0)
    assert report.client_stats(runs).cpu_us is None  # no message count: no per-message figure
    assert report.client_stats([], "Boom: x").status == report.ERROR


def test_outcome_ratios_and_targets() -> None:
    w = _fake_workload()
    o = report.outcome(
        w,
        100,
        {JSCLIENT: [Result(600.0)], NATS_PY: [Result(100.0)], RAW: [Result(1000.0)]},
        {},
        {NATSIO: "n/a (needs Python 3.13+)"},
    )
    assert o.ratio(NATS_PY) == 6.0
    assert o.ratio(RAW) == 0.6
    assert o.ratio(NATSIO) is None
    assert o.clients[NATSIO].status == report.NA
    assert o.clients[NATSIO].reason == "n/a (needs Python 3.13+)"
    met = {t.against: ok for t, _r, ok in o.target_results()}
    assert met == {RAW: False, NATS_PY: True, NATSIO: None}  # ahead-of-natsio: not measured
    # What a raw socket reaches against each peer, beside a missed target only.
    assert (o.ceiling(NATS_PY), o.ceiling(RAW), o.ceiling(NATSIO)) == (10.0, None, None)
    assert "(raw" not in report.targets_cell(o)
    slow = report.outcome(
        w,
        100,
        {JSCLIENT: [Result(50.0)], NATS_PY: [Result(100.0)], RAW: [Result(120.0)]},
        {},
        {},
    )
    assert "(raw 1.20x)" in report.targets_cell(slow)
    assert [t["raw_ratio"] for t in slow.as_dict()["targets_met"]] == [None, 1.2, None]

    # a client without the API is n/a; one whose every round failed is an error
    w2 = _fake_workload(fns={JSCLIENT: w.fns[JSCLIENT], NATS_PY: w.fns[NATS_PY]})
    o2 = report.outcome(w2, 100, {JSCLIENT: [Result(5.0)]}, {NATS_PY: "ChildError: boom"}, {})
    assert o2.clients[RAW].status == report.NA
    assert o2.clients[NATS_PY].status == report.ERROR
    assert o2.ratio(NATS_PY) is None


def test_memory_target() -> None:
    w = _fake_workload(rss_growth_mb=64.0)

    def row(start_mb: int, peak_mb: int) -> report.Outcome:
        res = Result(1.0, rss_start=start_mb << 20, rss_peak=peak_mb << 20)
        return report.outcome(w, 1, {JSCLIENT: [res]}, {}, {})

    assert row(30, 80).memory_target_met() is True
    assert row(30, 400).memory_target_met() is False
    assert "RSS +<64 MB ✗" in report.targets_cell(row(30, 400))


# -- formatting and JSON -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2_370_000, "2.37M"),
        (4_850_000.0, "4.85M"),
        (661_234, "661k"),
        (5_100, "5.1k"),
        (16_800, "16.8k"),
        (999_999, "1M"),
        (486.4, "486"),
        (7.25, "7.25"),
        (None, ""),
    ],
)
def test_fmt_rate(value: float | None, text: str) -> None:
    assert report.fmt_rate(value) == text


def test_fmt_ratio() -> None:
    assert report.fmt_ratio(0.523) == "0.52x"
    assert report.fmt_ratio(12.64) == "12.6x"
    assert report.fmt_ratio(None) == ""


def _sample() -> list[report.Outcome]:
    w = _fake_workload()
    ok = report.outcome(
        w,
        100,
        {
            JSCLIENT: [Result(2_000_000.0, 1e-4, 3e-4, 20 << 20, 40 << 20, 0.0002, 0.0005)],
            NATS_PY: [Result(400_000.0, 2e-4, 5e-4, 25 << 20, 30 << 20)],
            NATSIO: [Result(500_000.0, 2e-4, 4e-4, 26 << 20, 31 << 20)],
            RAW: [Result(4_000_000.0, 1e-4, 2e-4, 18 << 20, 18 << 20)],
        },
        {NATSIO: "ChildError: one round failed"},
        {},
    )
    legacy = report.outcome(
        _fake_workload(name="legacy", latency=False, fns={JSCLIENT: w.fns[JSCLIENT]}),
        100,
        {JSCLIENT: [Result(50_000.0)]},
        {},
        {},
    )
    return [ok, legacy]


def test_tables() -> None:
    text = report.table(_sample())
    rates, memory, cpu, latency, errors = text.split("\n\n")
    head, rule, row, legacy = rates.splitlines()
    assert head.split()[:5] == ["workload", JSCLIENT, NATS_PY, NATSIO, RAW]
    assert set(rule) == {"-"}
    # natsc has no implementation of this row: n/a, and no ratio
    assert row.split()[:9] == ["w", "2M", "400k", "500k!", "4M", "n/a", "5.00x", "4.00x", "0.50x"]
    assert "≥0.7x raw ✗" in row and "≥3x nats-py ✓" in row and "≥1x natsio ✓" in row
    assert legacy.split()[:5] == ["legacy", "50k", "n/a", "n/a", "n/a"]
    assert "40 (+20)" in memory and "18 (+0)" in memory
    cpu_head, _, cpu_row, cpu_legacy = cpu.splitlines()
    assert cpu_head.startswith("CPU µs/msg (server)")
    # 0.2 ms of client and 0.5 ms of server CPU over 100 messages; peers measured no CPU
    assert cpu_row.split()[:3] == ["w", "2.00", "(5.00)"]
    assert cpu_legacy.split()[1:] == ["n/a", "n/a", "n/a", "n/a"]
    assert "100/300" in latency and "legacy" not in latency
    assert "w [natsio]: ChildError: one round failed" in errors


def test_json_round_trip() -> None:
    outcomes = _sample()
    meta = {"interpreter": {"pgo": "unknown"}, "repeat": 3}
    text = report.to_json(outcomes, meta)
    again, meta2 = report.from_json(text)
    assert again == outcomes
    assert meta2 == meta
    assert '"js/' not in text  # ratios are keyed by peer
    assert report.to_json(again, meta2) == text


# -- the child protocol ------------------------------------------------------------------


def test_parse_output() -> None:
    out = "noise\n" + runner.MARKER + '{"rate": 5.0}\nmore noise\n'
    assert runner.parse_output(out) == {"rate": 5.0}
    with pytest.raises(runner.ChildError, match="Boom: x"):
        runner.parse_output(runner.MARKER + '{"error": "Boom: x"}\n')
    with pytest.raises(runner.ChildError, match="no result"):
        runner.parse_output("Traceback ...\n")
    r = Result(1.5, 0.1, 0.2, 3, 4)
    assert Result.from_dict(r.as_dict()) == r


def test_child_commands() -> None:
    js = runner.child_command("core-request", JSCLIENT, "nats://h:1", 10)
    py = runner.child_command("core-request", NATS_PY, "nats://h:1", 10)
    for cmd, client in ((js, JSCLIENT), (py, NATS_PY)):
        # the checkout's root (appended to the child's path), then the runner module
        assert cmd[1] == "-c" and cmd[3:5] == [ROOT, "jsbench.runner"]
        assert cmd[-8:-4] == ["--workload", "core-request", "--client", client]
        assert cmd[-4:] == ["--url", "nats://h:1", "--n", "10"]
