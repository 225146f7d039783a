"""What one measured run reports: a rate, latency percentiles where they apply, memory."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Result:
    """Messages per second; p50/p99 in seconds for latency-bound workloads.

    ``rss_start`` and ``rss_peak`` (bytes) are the process's peak resident set
    before the workload started (after its client library was imported) and at
    its end, so ``rss_peak - rss_start`` is what the workload itself added.
    They are filled in by the child runner, not by the workload.

    ``cpu`` is the CPU time (user + system, every thread) the client process
    spent in the workload, filled in by the child runner; ``server_cpu`` is
    what the server process spent meanwhile (the whole child run), filled in by
    the parent when it knows the server's pid. Per message, they show which
    side a row's rate is bound by. ``peer_cpu`` is what a peer process the
    workload started itself spent during the measured part (the service host
    of ``svc-echo``), filled in by the workload; None where there is none.
    """

    rate: float
    p50: float | None = None
    p99: float | None = None
    rss_start: int | None = None
    rss_peak: int | None = None
    cpu: float | None = None
    server_cpu: float | None = None
    peer_cpu: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Result:
        return cls(
            rate=float(d["rate"]),
            p50=_opt_float(d.get("p50")),
            p99=_opt_float(d.get("p99")),
            rss_start=_opt_int(d.get("rss_start")),
            rss_peak=_opt_int(d.get("rss_peak")),
            cpu=_opt_float(d.get("cpu")),
            server_cpu=_opt_float(d.get("server_cpu")),
            peer_cpu=_opt_float(d.get("peer_cpu")),
        )


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p99) of a list of latencies (nearest rank; (0, 0) when empty)."""
    s = sorted(samples)
    if not s:
        return 0.0, 0.0
    return s[len(s) // 2], s[min(len(s) - 1, (len(s) * 99) // 100)]


def wait_all(done: Any, timeout: float, what: str) -> None:
    """Wait for a threaded workload's ``done`` event; a run cut short is an error, not a rate."""
    if not done.wait(timeout):
        raise RuntimeError(f"{what}: not all messages arrived within {timeout:g} s")


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used so far; None where unknown.

    Read from ``/proc/<pid>/stat`` (Linux): fields 14 and 15 after the command
    name, in clock ticks.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def peak_rss() -> int | None:
    """This process's peak resident set size in bytes (None where unknown).

    On Linux this is ``VmHWM`` from ``/proc/self/status``, the high-water mark
    of this process image. ``getrusage``'s ``ru_maxrss`` is not usable in a
    child: Linux carries it over from the parent across fork and exec, so a
    fresh child would report at least the parent's peak. Elsewhere it is the
    ``ru_maxrss`` fallback.
    """
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024  # "VmHWM:  10876 kB"
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024
