"""The benchmark's natsc peer: its C program builds, says why when it cannot, and runs.

The build and the real runs need Debian's libnats-dev (scripts/setup.sh
installs it as root) and skip, with the reason, without it.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from jsbench import natsc, report, runner
from jsbench.result import Result
from jsbench.workloads import JSCLIENT, NATSC, by_name
from jsclient.server import NatsServer

USABLE, WHY = natsc.available()
needs_libnats = pytest.mark.skipif(not USABLE, reason=WHY)


def _fake_cc(tmp_path: Path, message: str) -> str:
    """A compiler that fails with ``message``, as a real one would."""
    cc = tmp_path / "cc"
    cc.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    cc.chmod(cc.stat().st_mode | stat.S_IXUSR)
    return str(cc)


@needs_libnats
def test_the_program_builds_once_and_runs(tmp_path: Path) -> None:
    exe = natsc.build(where=tmp_path)
    assert exe.parent == tmp_path and os.access(exe, os.X_OK)
    assert natsc.build(where=tmp_path) == exe  # cached: the same source builds once
    assert [p.name for p in tmp_path.iterdir()] == [exe.name]  # no temporary left
    ok, version = natsc.available(where=tmp_path)
    assert ok and version.startswith("libnats 3.")
    usage = subprocess.run([str(exe), "nope"], capture_output=True, text=True, check=False)
    assert usage.returncode == 2 and "natsc_bench publish URL N SIZE SUBJECT" in usage.stderr


def test_available_says_why_without_a_compiler(tmp_path: Path) -> None:
    ok, why = natsc.available(cc=str(tmp_path / "no-such-cc"), where=tmp_path)
    assert not ok
    assert why.startswith("not available: no C compiler") and "not found" in why
    not_a_program = tmp_path / "cc"
    not_a_program.write_text("")
    ok, why = natsc.available(cc=str(not_a_program), where=tmp_path / "cache")
    assert not ok and "Permission denied" in why


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (
            "x.c:23:10: fatal error: nats/nats.h: No such file or directory",
            "not available: libnats-dev not installed (no nats/nats.h; apt-get install -y "
            "libnats-dev)",
        ),
        (
            "/usr/bin/ld: cannot find -lnats: No such file or directory",
            "not available: libnats-dev not installed (no libnats to link; apt-get install -y "
            "libnats-dev)",
        ),
        ("x.c:1:1: error: something else", "not available: the natsc program did not build"),
    ],
)
def test_available_says_why_the_build_failed(tmp_path: Path, message: str, reason: str) -> None:
    ok, why = natsc.available(cc=_fake_cc(tmp_path, message), where=tmp_path / "cache")
    assert not ok
    assert why.startswith(reason)
    assert not list((tmp_path / "cache").iterdir())  # nothing half-built is kept


def test_the_compiler_and_flags_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JSBENCH_NATSC_CC", _fake_cc(tmp_path, "nats/nats.h: No such file"))
    assert "libnats-dev not installed" in natsc.available(where=tmp_path / "cache")[1]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert natsc.cache_dir() == tmp_path / "xdg" / "jsbench-natsc"


def test_its_line_parses_into_a_result() -> None:
    line = (
        '{"rate": 1250.5, "p50": 0.0001, "p99": 0.0004, "rss_start": 6291456, '
        '"rss_peak": 7340032, "cpu": 0.25}'
    )
    res = natsc.parse("ready\n" + line + "\n")
    assert res == Result(1250.5, 0.0001, 0.0004, 6291456, 7340032, 0.25)
    no_latency = natsc.parse(
        '{"rate": 9.0, "p50": null, "p99": null, "rss_start": 1, "rss_peak": 2, "cpu": 0.0}'
    )
    assert (no_latency.p50, no_latency.p99) == (None, None)
    with pytest.raises(RuntimeError, match="printed no result"):
        natsc.parse("")


def test_the_rows_it_runs_and_their_targets() -> None:
    def natsc_target(name: str) -> float | None:
        return next((t.ratio for t in by_name(name).targets if t.against == NATSC), None)

    for name in ("core-publish-16B", "core-receive-callback", "js-publish-async"):
        assert natsc_target(name) == 0.8
    for name in ("core-request", "js-publish-sync"):
        assert natsc_target(name) == 1.5
    assert natsc_target("js-fetch-ack") == 1.0
    assert NATSC not in by_name("core-receive-iter").fns  # libnats has no iterator
    assert NATSC not in by_name("kv-get").fns


def test_an_unavailable_natsc_column_says_so_and_why() -> None:
    w = by_name("core-publish-1KiB")
    o = report.outcome(w, 10, {JSCLIENT: [Result(100.0)]}, {}, {NATSC: "not selected"})
    why = "not available: libnats-dev not installed (no nats/nats.h; apt-get install ...)"
    (o,) = report.mark_unavailable([o], NATSC, why, [w.name])
    assert o.clients[NATSC].reason == why
    rates = report.rates_table([o]).splitlines()
    assert rates[0].split()[5:7] == [NATSC, "js/nats-py"]
    assert "not available" in rates[2] and "js/natsc" in rates[0]
    assert f"natsc: {why}" in report.table([o])


@needs_libnats
def test_core_publish_against_a_real_server(nats_server: NatsServer) -> None:
    res = natsc.publish(nats_server.url, 2000, 64)
    assert res.rate > 0 and res.p50 is None
    assert res.rss_start is not None and res.rss_peak is not None
    assert 0 < res.rss_start <= res.rss_peak
    assert res.cpu is not None and res.cpu > 0


@needs_libnats
def test_a_child_run_reports_the_programs_own_memory(nats_server: NatsServer) -> None:
    res, data = runner.run_child("core-publish-1KiB", NATSC, nats_server.url, 500, timeout=60)
    assert res.rate > 0 and data["jsclient_loaded"] is False
    # the C program's peak, well below that of the Python child that waited for it
    assert res.rss_peak is not None and res.rss_peak < 24 << 20


@needs_libnats
def test_a_failing_run_says_why(nats_server: NatsServer) -> None:
    with pytest.raises(RuntimeError, match="No responders"):
        natsc.request(nats_server.url, 5, 16)  # no echo peer


def test_the_cli_shows_natsc_as_not_available(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "JSBENCH_NATSC_CC": str(tmp_path / "no-such-cc"),
        "XDG_CACHE_HOME": str(tmp_path),
    }
    only = ["--quick", "--only", "core-publish-64KiB", "--clients", "jsclient,natsc"]
    proc = subprocess.run(
        [sys.executable, "-m", "jsbench", *only],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("core-publish-64"))
    assert "not available" in row
    assert "natsc: not available: no C compiler" in proc.stdout
