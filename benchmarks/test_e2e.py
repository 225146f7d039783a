"""End-to-end workloads, jsclient and nats-py side by side on one embedded server.

Every workload of :mod:`jsclient.bench` (the same ones ``python -m jsclient
bench`` runs) becomes one benchmark here. pytest-benchmark times the jsclient
side; both clients' rates and their ratio go into ``extra_info`` and are
printed. Marked ``e2e``, so the default test run skips them; run with::

    pytest benchmarks/test_e2e.py -m e2e -s            # full counts
    JSCLIENT_BENCH_QUICK=1 pytest benchmarks/test_e2e.py -m e2e -s
"""

from __future__ import annotations

import os

import pytest

from jsclient import _impl, bench
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
    n = workload.quick_n if QUICK else workload.n
    py = workload.nats_py(bench_server.url, n, workload.size)
    ours = benchmark.pedantic(  # type: ignore[attr-defined]
        workload.jsclient, args=(bench_server.url, n, workload.size), rounds=1, iterations=1
    )
    ratio = ours.rate / py.rate
    benchmark.extra_info.update(  # type: ignore[attr-defined]
        {"impl": _impl.IMPL, "jsclient_rate": ours.rate, "nats_py_rate": py.rate, "ratio": ratio}
    )
    with capsys.disabled():
        print(
            f"\n{workload.name:<24} jsclient[{_impl.IMPL}] {ours.rate:>12,.0f}/s  "
            f"nats-py {py.rate:>12,.0f}/s  ratio {ratio:5.2f}x"
            + (f"  (target {workload.target}x)" if workload.target else "")
        )
    assert ours.rate > 0 and py.rate > 0
