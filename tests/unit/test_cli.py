"""``python -m jsclient``: help, version, commands, and the benchmark from a checkout."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import jsclient
from jsclient import _impl


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jsclient", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_help_lists_the_commands_and_exits_0() -> None:
    for flag in ("--help", "-h"):
        out = _cli(flag)
        assert out.returncode == 0, out.stderr
        assert "demo" in out.stdout and "bench" in out.stdout and "--version" in out.stdout


def test_version() -> None:
    out = _cli("--version")
    assert out.returncode == 0
    assert out.stdout.startswith(f"jsclient {jsclient.__version__} (impl={_impl.IMPL})")


def test_no_or_unknown_command_is_a_usage_error() -> None:
    for args in ((), ("nonsense",)):
        out = _cli(*args)
        assert out.returncode == 2 and "usage: python -m jsclient" in out.stderr, out


def test_each_command_has_its_own_help() -> None:
    demo = _cli("demo", "--help")
    assert demo.returncode == 0 and "--count" in demo.stdout and "--spark" in demo.stdout
    bench = _cli("bench", "--help")
    assert bench.returncode == 0 and "--reliability" in bench.stdout and "--only" in bench.stdout


def test_bench_runs_from_a_checkout_whatever_the_working_directory(tmp_path: Path) -> None:
    out = _cli("bench", "--list", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert any(line.startswith("core-request ") for line in out.stdout.splitlines())


def test_bench_without_the_tooling_says_where_it_is() -> None:
    code = (
        "import sys; sys.modules['jsbench'] = None\n"
        "from jsclient.__main__ import main\n"
        "sys.exit(main(['bench', '--list']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "not part of the installed package" in out.stderr and "checkout" in out.stderr


def test_the_demo_times_receiving_from_the_first_publish() -> None:
    out = _cli("demo", "-n", "20000")
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("core pub/sub:"))
    m = re.search(
        r"published in ([\d.]+)s \(([\d,]+) msg/s\); all received ([\d.]+)s after the first "
        r"publish \(([\d,]+) msg/s\)",
        line,
    )
    assert m, line
    published, received = float(m[1]), float(m[3])
    pub_rate, recv_rate = (int(m[i].replace(",", "")) for i in (2, 4))
    assert received >= published > 0
    assert recv_rate <= pub_rate * 1.01  # nothing is received faster than it was sent
    assert "every sequence exactly once: True" in out.stdout


def test_the_demo_says_in_one_line_that_it_cannot_connect() -> None:
    out = _cli("demo", "--server", "nats://127.0.0.1:1")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to nats://127.0.0.1:1" in lines[0], lines


def test_the_version_is_the_one_in_pyproject() -> None:
    import tomllib

    meta = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert meta["project"]["version"] == jsclient.__version__
