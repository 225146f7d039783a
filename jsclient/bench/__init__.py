"""Side-by-side benchmark: jsclient, nats-py, natsio and a raw-socket ceiling.

Every row (:mod:`jsclient.bench.workloads`) is one job done by each client in
its idiomatic best way. ``run()`` measures each (workload, client, round) in a
fresh process of the same interpreter against one shared server, and reports
medians, jsclient's ratios and peak RSS (:mod:`jsclient.bench.report`). Used by
``python -m jsclient bench`` and by the benchmark suite in ``benchmarks/``.

This package imports no client at import time: a child process measuring
nats-py or natsio loads it without jsclient (see :mod:`jsclient.bench.runner`).
"""

from __future__ import annotations

from jsclient.bench.harness import run
from jsclient.bench.report import ClientStats, Outcome, from_json, table, to_json
from jsclient.bench.result import Result, percentiles
from jsclient.bench.workloads import CLIENTS, Target, Workload, workloads

WORKLOADS = workloads

__all__ = [
    "CLIENTS",
    "WORKLOADS",
    "ClientStats",
    "Outcome",
    "Result",
    "Target",
    "Workload",
    "from_json",
    "percentiles",
    "run",
    "table",
    "to_json",
    "workloads",
]
