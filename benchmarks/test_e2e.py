"""End-to-end workloads, every client side by side on one embedded server.

Every workload of :mod:`jsbench` (the same ones ``python -m jsclient
bench`` runs) becomes one benchmark here, measured the same way: each client
in a fresh process, the echo peer and stream set-up shared. pytest-benchmark
times the whole row; every client's rate and jsclient's ratios go into
``extra_info`` and are printed. Marked ``e2e``, so the default test run skips
them; run with::

    pytest benchmarks/test_e2e.py -m e2e -s            # full counts
    JSCLIENT_BENCH_QUICK=1 pytest benchmarks/test_e2e.py -m e2e -s
"""

from __future__ import annotations

import os

import pytest

import jsbench as bench
from jsbench import report
from jsbench.workloads import CLIENTS, JSCLIENT, PEERS
from jsclient import _impl
from jsclient.server import NatsServer

QUICK = os.environ.get("JSCLIENT_BENCH_QUICK") == "1"
WORKLOADS = bench.workloads()

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("workload", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_e2e(
    workload: bench.Workload,
    bench_server: NatsServer,
    benchmark: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (row,) = benchmark.pedantic(  # type: ignore[attr-defined]
        bench.run,
        args=(bench_server.url, [workload]),
        kwargs={"quick": QUICK, "impl": _impl.IMPL},
        rounds=1,
        iterations=1,
    )
    rates = {c: row.rate(c) for c in CLIENTS}
    ratios = {p: row.ratio(p) for p in PEERS}
    benchmark.extra_info.update(  # type: ignore[attr-defined]
        {"impl": _impl.IMPL, "rates": rates, "ratios": ratios}
    )
    with capsys.disabled():
        print("\n" + report.rates_table([row]).splitlines()[-1])
    assert row.clients[JSCLIENT].status == report.OK, row.clients[JSCLIENT].error
    for c in CLIENTS:
        assert row.clients[c].status != report.ERROR, (c, row.clients[c].error)
