"""One measurement in a fresh process: the child side, and the parent's way to start one.

The parent (``python -m jsclient bench``) measures every (workload, client,
round) in a new process of the same interpreter, so no run inherits another's
heap, threads, event loop or imported modules, and the peak RSS a run reports
is its own. The child prints one line, :data:`MARKER` followed by JSON: the
workload's :class:`Result` with ``rss_start`` (peak RSS once its client library
is imported), ``rss_peak`` (at the end) and ``cpu`` (the CPU time the workload
took), or ``{"error": ...}``.

A jsclient child imports jsclient as usual; any other client's child never
does (the bench modules import no client at import time). A natsc child runs
a C program (:mod:`jsbench.natsc`) and reports that program's RSS and CPU
time, not its own.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from jsbench._child import module_command
from jsbench.result import Result, peak_rss
from jsbench.row import NATSC

MARKER = "JSCLIENT-BENCH-RESULT "

# What each client imports before its starting RSS is taken.
_IMPORTS = {
    "jsclient": ("jsclient", "jsclient.jetstream.context"),  # as nats.js for nats-py
    "nats-py": ("asyncio", "nats", "nats.js"),
    "natsio": ("asyncio", "natsio", "natsio.jetstream"),
    "raw": (),
    "natsc": (),  # a C program: it measures its own RSS and CPU time
}


class ChildError(RuntimeError):
    """A child run failed: its error, or why it produced no result."""


def measure(workload: str, client: str, url: str, n: int, otel: str = "none") -> Result:
    """Run one workload for one client in this process, with its RSS and CPU time.

    ``otel`` (a jsclient run only): instrument with jsclient.contrib.otel first
    (jsbench/otel.py's modes).
    """
    from jsbench import otel as bench_otel
    from jsbench.workloads import by_name

    w = by_name(workload)
    fn = w.fns.get(client)
    if fn is None:
        raise ChildError(f"{client} has no implementation of {workload}")
    for mod in _IMPORTS[client]:
        importlib.import_module(mod)
    if otel != bench_otel.NONE and client != "jsclient":
        raise ChildError(f"--otel {otel} instruments jsclient only, not {client}")
    keep = bench_otel.instrument(otel)  # noqa: F841 - instrumented while the workload runs
    start = peak_rss()
    cpu0 = time.process_time()
    res = fn(url, n, w.size)
    cpu = time.process_time() - cpu0
    if client == NATSC:  # the figures of the program that did the work, not of this waiting child
        return res
    return replace(res, rss_start=start, rss_peak=peak_rss(), cpu=cpu)


def main(argv: list[str] | None = None) -> int:
    """The child: measure, print the result line, exit 0 (or 1 with an error line)."""
    ap = argparse.ArgumentParser(prog="jsbench.runner")
    ap.add_argument("--workload", required=True)
    ap.add_argument("--client", required=True, choices=sorted(_IMPORTS))
    ap.add_argument("--url", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--otel", default="none")
    args = ap.parse_args(argv)
    try:
        res = measure(args.workload, args.client, args.url, args.n, args.otel)
    except BaseException as exc:
        traceback.print_exc()
        out: dict[str, Any] = {"error": f"{type(exc).__name__}: {exc}"}
        print(MARKER + json.dumps(out), flush=True)
        return 1
    out = res.as_dict()
    # Whether this process loaded jsclient's client code (only a jsclient run should).
    out["jsclient_loaded"] = "jsclient.client" in sys.modules
    # Whether the GIL was on at the end (3.13+; a free-threaded build runs either way).
    probe = getattr(sys, "_is_gil_enabled", None)
    out["gil_enabled"] = True if probe is None else bool(probe())
    if args.client == "jsclient":
        from jsclient import _impl

        out["impl"] = _impl.IMPL
        out["otel"] = args.otel
    print(MARKER + json.dumps(out), flush=True)
    return 0


def parse_output(stdout: str) -> dict[str, Any]:
    """The result a child printed (the last marker line), or ChildError."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            data: dict[str, Any] = json.loads(line[len(MARKER) :])
            if "error" in data:
                raise ChildError(str(data["error"]))
            return data
    raise ChildError("the child printed no result")


def child_command(workload: str, client: str, url: str, n: int, otel: str = "none") -> list[str]:
    args = ["--workload", workload, "--client", client, "--url", url, "--n", str(n)]
    if otel != "none":
        args += ["--otel", otel]
    return module_command("jsbench.runner", args)


def run_child(
    workload: str,
    client: str,
    url: str,
    n: int,
    *,
    timeout: float = 600.0,
    impl: str | None = None,
    otel: str = "none",
    env: Mapping[str, str] | None = None,
) -> tuple[Result, dict[str, Any]]:
    """Start a child for one run and return its Result (and the raw JSON).

    ``otel``: a jsclient child instruments itself first (jsbench/otel.py).
    ``env``: variables to set in the child (``PYTHON_GIL``, for instance).

    The child runs in a session of its own; on timeout the whole group (it
    and any publisher it started) is killed.
    """
    child_env = {**os.environ, **(env or {})}
    if impl:
        child_env["JSCLIENT_IMPL"] = impl
    proc = subprocess.Popen(
        child_command(workload, client, url, n, otel),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=child_env,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        raise ChildError(f"no result within {timeout:.0f}s") from None
    try:
        data = parse_output(stdout)
    except ChildError as exc:
        tail = " | ".join(stderr.strip().splitlines()[-3:])
        raise ChildError(f"{exc} (exit {proc.returncode}{'; ' + tail if tail else ''})") from None
    if impl and client == "jsclient" and data.get("impl") != impl:
        raise ChildError(f"the child ran jsclient impl={data.get('impl')}, not {impl}")
    if otel != "none" and data.get("otel") != otel:
        raise ChildError(f"the child ran with otel={data.get('otel')}, not {otel}")
    return Result.from_dict(data), data


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


if __name__ == "__main__":
    sys.exit(main())
