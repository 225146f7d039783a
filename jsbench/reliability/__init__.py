"""Reliability scenarios: hard kills, cluster failover, network faults, soak; each returns figures.

Every scenario runs against real ``nats-server`` processes on loopback (the
embedded launcher, :mod:`jsclient.server`), injects its fault, and then checks
what a user is promised, returning a dict of figures with a ``problems`` list
(empty when every check held):

- publishing (``kill9_publish``, ``cluster_publish``): every publish that got
  a PubAck is in the stream exactly once; with the managed publisher and
  retries (Nats-Msg-Id) nothing is lost and nothing is stored twice;
- consuming (``kill9_consume``, ``cluster_consume``): every message is
  consumed at least once and in the end acked; an ordered consumer sees every
  stream sequence once, in order;
- ``stale_detection``: a stalled or half-open connection is declared stale by
  the ping timer and the client reconnects, its reader thread alive;
- ``soak``: publish -> consume + ack with the RSS sampled along the way; the
  slope after warm-up is reported.

The tests run them small (``tests/reliability``); ``python -m jsclient bench
--reliability`` runs them at full size and prints the figures. Every loop is
bounded in count and in time.
"""

from __future__ import annotations

import fnmatch
import functools
import time
from collections.abc import Callable

from jsbench.reliability._common import Figures, rss_bytes, slope, stream_counts
from jsbench.reliability.cluster import cluster_consume, cluster_publish
from jsbench.reliability.load import soak, stale_detection, thread_stress
from jsbench.reliability.single import kill9_consume, kill9_publish

__all__ = [
    "Figures",
    "cluster_consume",
    "cluster_publish",
    "kill9_consume",
    "kill9_publish",
    "rss_bytes",
    "run",
    "scenarios",
    "slope",
    "soak",
    "stale_detection",
    "stream_counts",
    "thread_stress",
]


# -- the long form -------------------------------------------------------------------------


def scenarios(quick: bool = False) -> list[tuple[str, Callable[[], Figures]]]:
    """The long form's scenarios at full size (``quick``: about a tenth)."""
    from jsbench.fuzz import fuzz

    k = 10 if quick else 1
    out: list[tuple[str, Callable[[], Figures]]] = []
    for mode in ("publish_async", "publisher"):
        out.append((f"kill9-{mode}", functools.partial(kill9_publish, mode, 100_000 // k, 3)))
    for mode in ("consume", "messages", "ordered", "pull_subscribe"):
        out.append((f"kill9-{mode}", functools.partial(kill9_consume, mode, 50_000 // k, 3)))
    for fault in ("stepdown", "kill_leader", "kill_connected"):
        fn = functools.partial(cluster_publish, fault, 100_000 // k)
        out.append((f"cluster-publish-{fault}", fn))
    for fault in ("stepdown", "kill_leader", "kill_connected"):
        fn = functools.partial(cluster_consume, fault, 50_000 // k)
        out.append((f"cluster-consume-{fault}", fn))
    for mode in ("stall", "half_open"):
        out.append((f"network-{mode}", functools.partial(stale_detection, mode)))
    out.append(("thread-stress", lambda: thread_stress(10_000 // k)))
    out.append(("soak", lambda: soak(1_000_000 // k, 100_000 // k)))

    def fuzzing() -> Figures:
        t0 = time.monotonic()
        figs: Figures = {"scenario": "fuzz parsers and decoders (both twins)", "problems": []}
        try:
            figs.update(fuzz(frames=1_000_000 // k, seconds=900.0))
        except AssertionError as exc:
            figs["problems"].append(str(exc))
        figs["seconds"] = round(time.monotonic() - t0, 1)
        return figs

    out.append(("fuzz", fuzzing))
    return out


def run(
    quick: bool = False, only: list[str] | None = None, out: Callable[[str], None] = print
) -> list[Figures]:
    """Run the scenarios one after another and print one line of figures each."""
    results: list[Figures] = []
    for name, fn in scenarios(quick):
        if only and not any(fnmatch.fnmatchcase(name, pat) for pat in only):
            continue
        t0 = time.monotonic()
        try:
            figs = fn()
        except Exception as exc:  # a scenario that could not run is a problem too
            figs = {"scenario": name, "problems": [f"{type(exc).__name__}: {exc}"]}
        figs["name"] = name
        figs["wall_s"] = round(time.monotonic() - t0, 1)
        results.append(figs)
        shown = ", ".join(
            f"{k}={v}" for k, v in figs.items() if k not in ("scenario", "name", "problems")
        )
        verdict = "ok" if not figs["problems"] else "PROBLEMS: " + "; ".join(figs["problems"])
        out(f"{name:<26} {verdict}\n    {figs['scenario']}: {shown}")
    bad = sum(1 for f in results if f["problems"])
    out(f"{len(results)} scenarios, {bad} with problems")
    return results
