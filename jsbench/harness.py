"""The parent side of a benchmark run: rounds, fresh processes, the shared peers.

One server (started by the caller) and, when a request row is chosen, one echo
peer process serve every run. Each round measures every chosen workload for
every client that can run it, each in a new process; the order of the clients
flips every round so none always goes first. The parent prepares the streams
before a run and checks what a publish run stored after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

from jsbench import otel as bench_otel
from jsbench.peer import EchoPeer
from jsbench.report import Outcome, outcome
from jsbench.result import Result, process_cpu
from jsbench.runner import ChildError, run_child
from jsbench.workloads import CLIENTS, JSCLIENT, NATSC, NATSIO, Workload

Progress = Callable[[str, int, int], None]


def unavailable_clients(clients: Iterable[str]) -> dict[str, str]:
    """Clients that cannot run on this interpreter (or were left out), with why."""
    from jsbench.interp import natsio_status

    wanted = set(clients)
    out = {c: "not selected" for c in CLIENTS if c not in wanted}
    if NATSIO in wanted:
        usable, why = natsio_status()
        if not usable:
            out[NATSIO] = why
    if NATSC in wanted:
        from jsbench import natsc

        built, why = natsc.available()  # builds the program once (cached)
        if not built:
            out[NATSC] = why
    return out


def client_order(w: Workload, runnable: Sequence[str], round_no: int) -> list[str]:
    """The clients that run ``w`` this round, in order (reversed every other round)."""
    order = [c for c in CLIENTS if c in w.fns and c in runnable]
    return order[::-1] if round_no % 2 else order


def run(
    url: str,
    selected: Iterable[Workload],
    *,
    quick: bool = False,
    n: int | None = None,
    repeat: int = 1,
    clients: Iterable[str] = CLIENTS,
    impl: str | None = None,
    timeout: float | None = None,
    progress: Progress | None = None,
    server_pid: int | None = None,
    otel: Sequence[str] = (bench_otel.NONE,),
) -> list[Outcome]:
    """Measure every selected workload, ``repeat`` alternating rounds, and aggregate.

    Each workload runs its full count, its quick count with ``quick``, or ``n``
    messages when given (smoke runs and tests). With ``server_pid`` (a server
    on this machine) each run also records the server's CPU time during it.
    ``otel``: the modes of jsbench/otel.py; each row runs once per mode, in
    order; a mode but ``none`` is jsclient's alone, instrumented (``{row}+otel-{mode}``).
    """
    chosen = [v for w in selected for m in otel if (v := _otel_variant(w, m)) is not None]
    unavailable = unavailable_clients(clients)
    runnable = [c for c in CLIENTS if c not in unavailable]
    runs: dict[tuple[str, str], list[Result]] = {}
    errors: dict[tuple[str, str], str] = {}
    child_timeout = timeout if timeout is not None else (180.0 if quick else 600.0)
    total = repeat * sum(len(client_order(w, runnable, 0)) for w in chosen)
    done = 0
    peer: Any = EchoPeer(url) if any(w.echo for w in chosen) else nullcontext()
    with peer:
        for r in range(repeat):
            for w in chosen:
                count = _count(w, quick, n)
                for c in client_order(w, runnable, r):
                    if progress:
                        progress(f"round {r + 1}/{repeat} {w.name} [{c}]", done, total)
                    try:
                        res = _measure_once(
                            w, c, url, count, child_timeout, impl, server_pid, _OTEL.get(w.name)
                        )
                        runs.setdefault((w.name, c), []).append(res)
                    except Exception as exc:  # one broken run must not end the report
                        errors[(w.name, c)] = f"{type(exc).__name__}: {exc}"
                    done += 1
    if progress:
        progress("done", total, total)
    return [
        outcome(
            w,
            _count(w, quick, n),
            {c: runs.get((w.name, c), []) for c in CLIENTS},
            {c: errors[(w.name, c)] for c in CLIENTS if (w.name, c) in errors},
            unavailable,
        )
        for w in chosen
    ]


def _measure_once(
    w: Workload,
    client: str,
    url: str,
    count: int,
    timeout: float,
    impl: str | None,
    server_pid: int | None,
    otel: tuple[str, str] | None = None,
) -> Result:
    """One run: set up, measure in a child (with the server's CPU time), check.

    ``otel``: (the row's own name, the mode) for an instrumented variant.
    """
    if w.setup is not None:
        w.setup(url, count, w.size)
    s0 = process_cpu(server_pid) if server_pid else None
    name, mode = otel if otel is not None else (w.name, bench_otel.NONE)
    res, _raw = run_child(name, client, url, count, timeout=timeout, impl=impl, otel=mode)
    if server_pid and s0 is not None:
        s1 = process_cpu(server_pid)
        if s1 is not None:
            res = replace(res, server_cpu=s1 - s0)
    if w.check is not None:
        problem = w.check(url, count, w.size)
        if problem:
            raise ChildError(problem)
    return res


#: An instrumented variant's name -> (its row's name, the mode).
_OTEL: dict[str, tuple[str, str]] = {}


def _otel_variant(w: Workload, mode: str) -> Workload | None:
    """``w`` itself for ``none``; else ``w`` run by jsclient alone, in ``mode`` (None if
    jsclient has no such row)."""
    if mode == bench_otel.NONE:
        return w
    fn = w.fns.get(JSCLIENT)
    if fn is None:
        return None
    name = bench_otel.row_name(w.name, mode)
    _OTEL[name] = (w.name, mode)
    return replace(
        w,
        name=name,
        description=f"{w.description} (jsclient.contrib.otel: {mode})",
        fns={JSCLIENT: fn},
        targets=(),
        rss_growth_mb=None,
    )


def _count(w: Workload, quick: bool, n: int | None) -> int:
    if n is not None:
        return n
    return w.quick_n if quick else w.n
