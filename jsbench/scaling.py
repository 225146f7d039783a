"""Thread scaling with the GIL on and off: ``python -m jsbench --gil-scaling``.

On a free-threaded build (``Py_GIL_DISABLED``) the same binary runs with the
GIL (``PYTHON_GIL=1``) or without it (``PYTHON_GIL=0``). Each row here is run
by jsclient alone, with 1, 2 and 4 threads, once per GIL setting, every run in
a fresh process against one server, the two settings alternating round by
round; the table puts the two side by side, each rate also as a multiple of
the same setting's 1-thread rate. With the GIL, threads that run Python code
take turns, so the multiple stays near 1; without it, they run side by side,
up to one thread per core.

The rows (the user code in each is :func:`jsbench.threads.work`, ~50 µs of
pure Python per message or request, except in the publish row):

- ``gil-consume-K``: one ``consume()`` feeding K handler threads that each do
  the work and ack (:func:`jsbench.threads.js_consume_threads`);
- ``gil-publish-K``: K threads ``publish_async`` on one connection until the
  last ack (:func:`jsbench.threads.js_publish_threads`); no extra work: it
  shows whether the client's own publish path runs in parallel;
- ``gil-svc-K``: a service endpoint with K handler threads doing the work,
  2K requester threads on the same connection (:func:`jsbench.scaling_rows.js_service_cpu`);
- ``gil-django-K``: the Django worker (``jetstream_worker --threads K``) on a
  registered consumer whose handler does the work (:func:`jsbench.scaling_rows.django_worker`).
"""

from __future__ import annotations

import statistics
import sys
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jsbench.row import JSCLIENT, Workload
from jsbench.scaling_rows import scaling_workloads

__all__ = ["GIL_SETTINGS", "ScalingRow", "run", "scaling_workloads", "table", "unavailable"]

GIL_SETTINGS = ("1", "0")  # PYTHON_GIL: on, off


def free_threaded() -> bool:
    """Whether this interpreter is a free-threaded build (it can run with the GIL off)."""
    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


@dataclass
class ScalingRow:
    """The rates of one row: a list per GIL setting (one per round)."""

    workload: Workload
    rates: dict[str, list[float]]

    def median(self, gil: str) -> float | None:
        got = self.rates.get(gil) or []
        return statistics.median(got) if got else None


def run(
    url: str,
    rows: Sequence[Workload],
    *,
    quick: bool,
    repeat: int,
    timeout: float,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[ScalingRow]:
    """Every row with each GIL setting, ``repeat`` rounds, the settings alternating."""
    from jsbench.runner import run_child

    out = [ScalingRow(w, {g: [] for g in GIL_SETTINGS}) for w in rows]
    total = len(rows) * repeat * len(GIL_SETTINGS)
    done = 0
    for r in range(repeat):
        order = GIL_SETTINGS if r % 2 == 0 else GIL_SETTINGS[::-1]
        for row in out:
            w = row.workload
            n = w.quick_n if quick else w.n
            for gil in order:
                if progress:
                    progress(f"{w.name} PYTHON_GIL={gil} (round {r + 1})", done, total)
                if w.setup:
                    w.setup(url, n, w.size)
                res, data = run_child(
                    w.name, JSCLIENT, url, n, timeout=timeout, env={"PYTHON_GIL": gil}
                )
                want = gil == "1"
                if data.get("gil_enabled") is not want:
                    raise RuntimeError(
                        f"{w.name}: PYTHON_GIL={gil} ran with the GIL "
                        f"{'on' if data.get('gil_enabled') else 'off'}"
                    )
                if w.check:
                    problem = w.check(url, n, w.size)
                    if problem:
                        raise RuntimeError(f"{w.name}: {problem}")
                row.rates[gil].append(res.rate)
                done += 1
    return out


def _family(name: str) -> str:
    return name.rsplit("-", 1)[0]


def table(rows: Sequence[ScalingRow]) -> str:
    """The side-by-side table: each setting's rate and its multiple of the 1-thread rate."""
    base: dict[tuple[str, str], float] = {}
    for row in rows:
        if row.workload.name.endswith("-1"):
            for gil in GIL_SETTINGS:
                m = row.median(gil)
                if m:
                    base[(_family(row.workload.name), gil)] = m
    head = f"{'row':<16} {'GIL on msg/s':>13} {'x 1 thread':>10} {'GIL off msg/s':>14} "
    head += f"{'x 1 thread':>10} {'off/on':>7}"
    lines = [head, "-" * len(head)]
    for row in rows:
        cells = [f"{row.workload.name:<16}"]
        meds = {}
        for gil, width in (("1", 13), ("0", 14)):
            m = meds[gil] = row.median(gil)
            b = base.get((_family(row.workload.name), gil))
            cells.append(f"{m:>{width},.0f}" if m else f"{'-':>{width}}")
            cells.append(f"{m / b:>9.2f}x" if m and b else f"{'-':>10}")
        on, off = meds["1"], meds["0"]
        cells.append(f"{off / on:>6.2f}x" if on and off else f"{'-':>7}")
        lines.append(" ".join(cells))
    return "\n".join(lines)


def to_json(rows: Sequence[ScalingRow], meta: dict[str, Any]) -> str:
    import json

    return json.dumps(
        {
            "meta": meta,
            "rows": [
                {
                    "name": r.workload.name,
                    "description": r.workload.description,
                    "rates": r.rates,
                    "median": {g: r.median(g) for g in GIL_SETTINGS},
                }
                for r in rows
            ],
        },
        indent=1,
    )


def unavailable() -> str | None:
    """Why this interpreter cannot run the scaling table, or None."""
    if not free_threaded():
        return (
            f"--gil-scaling needs a free-threaded build (python3.13t or later); "
            f"{sys.executable} has a GIL that cannot be turned off"
        )
    return None
