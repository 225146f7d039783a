"""The natsc peer: the C client library libnats doing the rows it has an API for.

The program is ``jsbench/natsc/natsc_bench.c``, one subcommand per workload,
built here with the system C compiler (``cc -O2 ... -lnats``) and cached
under ``$XDG_CACHE_HOME/jsbench-natsc/`` (else ``.cache/jsbench-natsc/`` in
the checkout), named by a hash of its source and build command, so an edit
builds anew and every run after reuses it. Debian's ``libnats-dev`` provides
the header and the library.

Each work function runs the program from the child process of its run (see
:mod:`jsbench.runner`) and returns the :class:`Result` it printed: the rate
and latency of its timed part, and its own peak RSS and CPU time, which the
runner keeps (the Python child only waits meanwhile). Subjects, windows,
batch sizes and stream names are the other clients' (passed on the command
line); a receive row uses the same external publisher and credit window.

Environment: ``JSBENCH_NATSC_CC`` (else ``CC``, else ``cc``) is the compiler,
``JSBENCH_NATSC_CFLAGS`` extra flags (``-I``/``-L`` for a libnats elsewhere).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from jsbench import core, js
from jsbench._child import ROOT
from jsbench.peer import ECHO_SUBJECT
from jsbench.result import Result

SOURCE = Path(__file__).with_name("natsc") / "natsc_bench.c"
INSTALL_HINT = "apt-get install -y libnats-dev"
NOT_AVAILABLE = "not available"
_CREDIT_SUBJECT = "bench.credit"  # the external publisher's credit subject
_MAX_ACK_PENDING = 20_000  # as the other clients' fetch consumers


class Unavailable(RuntimeError):
    """The program cannot be built or run here; the message says why."""


def cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg, "jsbench-natsc") if xdg else Path(ROOT, ".cache", "jsbench-natsc")


def _compiler(cc: str | None) -> list[str]:
    return shlex.split(cc or os.environ.get("JSBENCH_NATSC_CC") or os.environ.get("CC") or "cc")


def _flags(cflags: Sequence[str] | None) -> list[str]:
    if cflags is not None:
        return list(cflags)
    return shlex.split(os.environ.get("JSBENCH_NATSC_CFLAGS", ""))


def build(
    cc: str | None = None, cflags: Sequence[str] | None = None, where: Path | None = None
) -> Path:
    """The built program (built now unless cached); :class:`Unavailable` with the reason."""
    command = [*_compiler(cc), "-O2", "-Wall", *_flags(cflags), str(SOURCE), "-lnats", "-lpthread"]
    key = hashlib.sha256(SOURCE.read_bytes() + "\0".join(command).encode()).hexdigest()[:16]
    folder = where if where is not None else cache_dir()
    exe = folder / f"natsc_bench-{key}"
    if exe.exists():
        return exe
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{exe.name}.{os.getpid()}.tmp"  # then renamed: parallel builds are safe
    try:
        _compile([*command, "-o", str(tmp)])
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, exe)
    return exe


def _compile(command: list[str]) -> None:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except OSError as exc:
        why = "not found" if isinstance(exc, FileNotFoundError) else exc.strerror
        hint = "set JSBENCH_NATSC_CC or CC"
        raise Unavailable(f"{NOT_AVAILABLE}: no C compiler ({command[0]} {why}; {hint})")
    if proc.returncode != 0:
        raise Unavailable(build_failure(proc.stderr))


def build_failure(stderr: str) -> str:
    """Why the build failed, from the compiler's messages."""
    if "nats/nats.h" in stderr:
        return f"{NOT_AVAILABLE}: libnats-dev not installed (no nats/nats.h; {INSTALL_HINT})"
    if "-lnats" in stderr:
        return f"{NOT_AVAILABLE}: libnats-dev not installed (no libnats to link; {INSTALL_HINT})"
    lines = stderr.strip().splitlines()
    return f"{NOT_AVAILABLE}: the natsc program did not build ({lines[-1] if lines else '?'})"


def available(
    cc: str | None = None, cflags: Sequence[str] | None = None, where: Path | None = None
) -> tuple[bool, str]:
    """(True, "libnats VERSION") once the program builds and runs; else (False, why)."""
    try:
        exe = build(cc, cflags, where)
    except Unavailable as exc:
        return False, str(exc)
    proc = subprocess.run([str(exe), "version"], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        return False, f"{NOT_AVAILABLE}: the natsc program does not run ({_tail(proc.stderr)})"
    return True, f"libnats {proc.stdout.strip()}"


def parse(stdout: str) -> Result:
    """The Result of the program's last output line (rate, p50/p99, its RSS and CPU)."""
    lines = stdout.strip().splitlines()
    if not lines:
        raise RuntimeError("the natsc program printed no result")
    return Result.from_dict(json.loads(lines[-1]))


def _tail(stderr: str) -> str:
    """The program's own error lines (libnats's error stack follows them), else the last lines."""
    lines = stderr.strip().splitlines()
    own = [line for line in lines if line.startswith("natsc_bench:")]
    return " | ".join(own or lines[-3:])


def _start(command: str, url: str, n: int, size: int, *args: str) -> subprocess.Popen[str]:
    argv = [str(build()), command, url, str(n), str(size), *args]
    return subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _result(proc: subprocess.Popen[str], command: str) -> Result:
    stdout, stderr = proc.communicate(timeout=600)  # its stdin closed: nothing more to say
    if proc.returncode != 0:
        raise RuntimeError(f"natsc_bench {command} exited {proc.returncode}: {_tail(stderr)}")
    return parse(stdout)


def _run(command: str, url: str, n: int, size: int, *args: str) -> Result:
    return _result(_start(command, url, n, size, *args), command)


# -- the work functions ----------------------------------------------------------------


def publish(url: str, n: int, size: int) -> Result:
    """natsConnection_Publish n times, then natsConnection_FlushTimeout."""
    return _run("publish", url, n, size, core._SUBJECT)


def receive(url: str, n: int, size: int, mode: str) -> Result:
    """mode next_msg (natsSubscription_NextMsg) or callback, from the external publisher."""
    pub = core._Publisher(url, n, size)
    args = (core._SUBJECT, _CREDIT_SUBJECT, mode, str(pub.window))
    proc = _start("receive", url, n, size, *args)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        if proc.stdout.readline().startswith("ready"):
            proc.stdin.write("go\n")  # its clock starts, then the publisher's messages
            proc.stdin.flush()
            pub.go()
        res = _result(proc, "receive")
        pub.wait()
        return res
    finally:
        for p in (proc, pub.proc):  # after a failure: neither waits for the other
            if p.poll() is None:
                p.kill()
                p.wait()


def request(url: str, n: int, size: int) -> Result:
    """natsConnection_Request, sequential, against the echo peer."""
    return _run("request", url, n, size, ECHO_SUBJECT)


def js_publish_sync(url: str, n: int, size: int) -> Result:
    """js_Publish, one at a time, each PubAck awaited."""
    return _run("js-publish", url, n, size, js.PUB_SUBJECT)


def js_publish_async(url: str, n: int, size: int, window: int = js.WINDOW) -> Result:
    """js_PublishAsync with PublishAsync.MaxPending ``window``, then js_PublishAsyncComplete."""
    return _run("js-publish-async", url, n, size, js.PUB_SUBJECT, str(window))


def js_fetch(url: str, n: int, size: int) -> Result:
    """js_PullSubscribe (a new durable), natsSubscription_Fetch(BATCH), natsMsg_Ack each."""
    durable = f"nc{time.monotonic_ns()}"
    args = (js.CON_FILTER, durable, str(js.BATCH), str(_MAX_ACK_PENDING))
    return _run("js-fetch", url, n, size, *args)
