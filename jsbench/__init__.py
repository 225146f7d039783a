"""Side-by-side benchmark: jsclient, nats-py, natsio and a raw-socket ceiling.

Every row (:mod:`jsbench.workloads`) is one job done by each client in
its idiomatic best way. ``run()`` measures each (workload, client, round) in a
fresh process of the same interpreter against one shared server, and reports
medians, jsclient's ratios and peak RSS (:mod:`jsbench.report`). Used by
``python -m jsclient bench`` and by the benchmark suite in ``benchmarks/``.

This package imports no client at import time: a child process measuring
nats-py or natsio loads it without jsclient (see :mod:`jsbench.runner`).
"""

from __future__ import annotations

from jsbench.harness import run
from jsbench.report import ClientStats, Outcome, from_json, table, to_json
from jsbench.result import Result, percentiles
from jsbench.workloads import CLIENTS, Target, Workload, workloads

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
