"""Side-by-side workloads: jsclient against nats-py, on the same server, in one run.

Each :class:`Workload` names a jsclient function and a nats-py function that do
the same job with each client's idiomatic best settings; ``run()`` measures
both, alternating, and reports the ratio. Used by ``python -m jsclient bench``
and by the pytest-benchmark suite in ``benchmarks/``.
"""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from jsclient.bench import core, js
from jsclient.bench.result import Result, percentiles

__all__ = ["WORKLOADS", "Outcome", "Result", "Workload", "percentiles", "run"]

WorkFn = Callable[[str, int, int], Result]


@dataclass(frozen=True)
class Workload:
    """One comparison: ``n`` messages of ``size`` bytes (``quick_n`` with --quick)."""

    name: str
    description: str
    jsclient: WorkFn
    nats_py: WorkFn
    n: int
    quick_n: int
    size: int = 16
    latency: bool = False
    target: float | None = None  # the ratio the project aims for, if any


@dataclass
class Outcome:
    """Measured result of a workload (median over repetitions)."""

    name: str
    description: str
    n: int
    size: int
    jsclient_rate: float
    nats_py_rate: float
    ratio: float
    target: float | None
    jsclient_p50_us: float | None = None
    jsclient_p99_us: float | None = None
    nats_py_p50_us: float | None = None
    nats_py_p99_us: float | None = None
    runs: dict[str, list[float]] = field(default_factory=dict)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _core_workloads() -> list[Workload]:
    out = []
    for size, n, qn in ((16, 300_000, 60_000), (1024, 150_000, 30_000)):
        out.append(
            Workload(
                f"core-publish-{size}B",
                f"core publish {size} B, then flush",
                functools.partial(core.js_publish),
                functools.partial(core.py_publish),
                n,
                qn,
                size,
                target=3.0,
            )
        )
    for mode, target, py_mode in (
        ("next_msg", 10.0, "next_msg"),
        ("iter", 10.0, "next_msg"),
        ("callback", 3.0, "callback"),
    ):
        out.append(
            Workload(
                f"core-receive-{mode}",
                f"core receive 16 B via {mode} (nats-py: {py_mode}), external publisher",
                functools.partial(core.js_receive, mode=mode),
                functools.partial(core.py_receive, mode=py_mode),
                200_000,
                40_000,
                16,
                target=target,
            )
        )
    out.append(
        Workload(
            "core-request",
            "request/reply round trip, 16 B",
            core.js_request,
            core.py_request,
            5_000,
            1_000,
            16,
            latency=True,
        )
    )
    return out


def _js_workloads() -> list[Workload]:
    P = functools.partial
    return [
        Workload(
            "js-publish-sync",
            "JetStream publish, wait for each PubAck (memory stream)",
            js.js_publish_sync,
            js.py_publish_sync,
            5_000,
            1_000,
            latency=True,
            target=2.5,
        ),
        Workload(
            "js-publish-async",
            f"publish_async, window {js.WINDOW} for both",
            js.js_publish_async,
            js.py_publish_async,
            50_000,
            10_000,
            target=3.0,
        ),
        Workload(
            "js-publish-ceiling",
            "server ceiling: raw pipelined publish (window 1000, acks not decoded) "
            "vs nats-py publish_async",
            js.raw_publish_ceiling,
            js.py_publish_async,
            50_000,
            10_000,
        ),
        Workload(
            "js-publisher",
            "managed Publisher (max_in_flight 1000) vs publish_async 1000",
            js.js_publisher,
            P(js.py_publish_async, window=1000),
            100_000,
            10_000,
            target=3.0,
        ),
        Workload(
            "js-publisher-default",
            "managed Publisher, default settings (max_in_flight 50) vs publish_async 50",
            P(js.js_publisher, window=50),
            P(js.py_publish_async, window=50),
            100_000,
            10_000,
            target=3.0,
        ),
        Workload(
            "js-fetch-ack",
            f"fetch({js.BATCH}) + ack each (file stream)",
            js.js_fetch,
            js.py_fetch,
            200_000,
            20_000,
            target=5.0,
        ),
        Workload(
            "js-pull-subscribe-ack",
            f"legacy pull_subscribe().fetch({js.BATCH}) + ack each, vs nats-py's (file stream)",
            js.js_pull_subscribe,
            js.py_fetch,
            200_000,
            20_000,
            target=5.0,
        ),
        Workload(
            "js-consume-ack",
            f"consume() + ack vs nats-py fetch({js.BATCH}) + ack",
            js.js_consume,
            js.py_fetch,
            200_000,
            20_000,
            target=5.0,
        ),
        Workload(
            "js-messages-ack",
            f"messages() + ack vs nats-py fetch({js.BATCH}) + ack",
            js.js_messages,
            js.py_fetch,
            200_000,
            20_000,
            target=5.0,
        ),
        Workload(
            "js-fetch-noack",
            f"fetch({js.BATCH}), ack policy none",
            P(js.js_fetch, ack=False),
            P(js.py_fetch, ack=False),
            200_000,
            20_000,
        ),
        Workload(
            "js-consume-noack",
            "consume(), ack policy none vs nats-py fetch, no ack",
            P(js.js_consume, ack=False),
            P(js.py_fetch, ack=False),
            200_000,
            20_000,
        ),
        Workload(
            "js-ordered",
            "ordered consumer read vs nats-py ordered push subscription",
            js.js_ordered,
            js.py_ordered,
            100_000,
            20_000,
        ),
        Workload(
            "js-push-ack",
            "push subscribe (durable) + ack each, read by iteration (nats-py: next_msg)",
            js.js_push,
            js.py_push,
            200_000,
            20_000,
            target=5.0,
        ),
        Workload(
            "js-push-ack-callback",
            "push subscribe (durable), callback + ack (jsclient acks after it returns)",
            P(js.js_push, mode="callback"),
            P(js.py_push, mode="callback"),
            200_000,
            20_000,
            target=5.0,
        ),
        Workload(
            "js-ordered-push",
            "ordered push subscription, both clients",
            js.js_ordered_push,
            js.py_ordered,
            200_000,
            20_000,
            target=5.0,
        ),
    ]


def workloads() -> list[Workload]:
    """Every workload that exists, in report order."""
    return _core_workloads() + _js_workloads()


WORKLOADS = workloads


def run(
    url: str,
    selected: Iterable[Workload],
    *,
    quick: bool = False,
    repeat: int = 1,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[Outcome]:
    """Measure every selected workload for both clients, alternating, ``repeat`` times."""
    chosen = list(selected)
    outcomes = []
    for idx, w in enumerate(chosen):
        n = w.quick_n if quick else w.n
        js_runs: list[Result] = []
        py_runs: list[Result] = []
        error = None
        for _ in range(repeat):
            try:
                if progress:
                    progress(f"{w.name} (jsclient)", idx, len(chosen))
                js_runs.append(w.jsclient(url, n, w.size))
                if progress:
                    progress(f"{w.name} (nats-py)", idx, len(chosen))
                py_runs.append(w.nats_py(url, n, w.size))
            except Exception as exc:  # one broken workload must not end the report
                error = f"{type(exc).__name__}: {exc}"
                break
        if error is not None or not js_runs or not py_runs:
            outcomes.append(
                Outcome(w.name, w.description, n, w.size, 0.0, 0.0, 0.0, w.target, error=error)
            )
            continue
        js_rate = statistics.median(r.rate for r in js_runs)
        py_rate = statistics.median(r.rate for r in py_runs)
        o = Outcome(
            w.name,
            w.description,
            n,
            w.size,
            js_rate,
            py_rate,
            js_rate / py_rate if py_rate else float("inf"),
            w.target,
            runs={"jsclient": [r.rate for r in js_runs], "nats_py": [r.rate for r in py_runs]},
        )
        if w.latency:
            o.jsclient_p50_us = _us(statistics.median(r.p50 or 0.0 for r in js_runs))
            o.jsclient_p99_us = _us(statistics.median(r.p99 or 0.0 for r in js_runs))
            o.nats_py_p50_us = _us(statistics.median(r.p50 or 0.0 for r in py_runs))
            o.nats_py_p99_us = _us(statistics.median(r.p99 or 0.0 for r in py_runs))
        outcomes.append(o)
    if progress:
        progress("done", len(chosen), len(chosen))
    return outcomes


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 1)


def table(outcomes: list[Outcome]) -> str:
    """A plain-text table of the outcomes."""
    head = (
        f"{'workload':<26} {'jsclient msg/s':>15} {'nats-py msg/s':>14} {'ratio':>7} "
        f"{'target':>7}  {'p50/p99 µs (js | py)':<28}"
    )
    lines = [head, "-" * len(head)]
    for o in outcomes:
        lat = ""
        if o.jsclient_p50_us is not None:
            lat = (
                f"{o.jsclient_p50_us:.0f}/{o.jsclient_p99_us:.0f} | "
                f"{o.nats_py_p50_us:.0f}/{o.nats_py_p99_us:.0f}"
            )
        target = f"{o.target:.1f}x" if o.target else ""
        if o.error:
            lines.append(f"{o.name:<26} failed: {o.error}")
            continue
        lines.append(
            f"{o.name:<26} {o.jsclient_rate:>15,.0f} {o.nats_py_rate:>14,.0f} "
            f"{o.ratio:>6.2f}x {target:>7}  {lat:<28}"
        )
    return "\n".join(lines)


def to_json(outcomes: list[Outcome], meta: dict[str, Any]) -> str:
    return json.dumps({"meta": meta, "results": [o.as_dict() for o in outcomes]}, indent=2)
