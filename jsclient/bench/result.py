"""What a workload measures: a rate, and latency percentiles where they apply."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    """Messages per second; p50/p99 in seconds for latency-bound workloads."""

    rate: float
    p50: float | None = None
    p99: float | None = None


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p99) of a list of latencies."""
    s = sorted(samples)
    if not s:
        return 0.0, 0.0
    return s[len(s) // 2], s[min(len(s) - 1, (len(s) * 99) // 100)]
