"""One row of the benchmark: :class:`Workload`, its :class:`Target` s, and the clients' names.

:mod:`jsbench.workloads` lists the rows (and re-exports these names);
:mod:`jsbench.js_rows` holds the JetStream ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from jsbench.result import Result

WorkFn = Callable[[str, int, int], Result]
HookFn = Callable[[str, int, int], None]
CheckFn = Callable[[str, int, int], "str | None"]

JSCLIENT, NATS_PY, NATSIO, RAW = "jsclient", "nats-py", "natsio", "raw"
NATSC = "natsc"  # the C client library libnats (jsbench/natsc.py)
CLIENTS = (JSCLIENT, NATS_PY, NATSIO, RAW, NATSC)
PEERS = (NATS_PY, NATSIO, RAW, NATSC)  # what jsclient's ratios are taken against


@dataclass(frozen=True)
class Target:
    """jsclient's rate must be at least ``ratio`` times ``against``'s, measured in the same run."""

    against: str
    ratio: float

    def label(self) -> str:
        r = f"{self.ratio:.2f}".rstrip("0").rstrip(".")
        return f"≥{r}x {self.against}"


@dataclass(frozen=True)
class Workload:
    """One row: ``n`` messages of ``size`` bytes (``quick_n`` with --quick)."""

    name: str
    description: str
    fns: Mapping[str, WorkFn]
    n: int
    quick_n: int
    size: int = 16
    latency: bool = False
    targets: tuple[Target, ...] = ()
    setup: HookFn | None = None  # run by the parent before every child
    check: CheckFn | None = None  # run by the parent after every child; an error or None
    echo: bool = False  # needs the echo peer
    rss_growth_mb: float | None = None  # a memory target for jsclient, if any

    def all_targets(self) -> tuple[Target, ...]:
        """The row's own targets, plus "ahead of natsio" wherever natsio runs it."""
        own = self.targets
        if NATSIO in self.fns and not any(t.against == NATSIO for t in own):
            own = (*own, AHEAD_OF_NATSIO)
        return own


AHEAD_OF_NATSIO = Target(NATSIO, 1.0)
# jsclient against the C client library, by kind of row: messages streamed one
# way, round trips one at a time (request, JetStream publish), fetch + ack.
NATSC_THROUGHPUT = Target(NATSC, 0.8)
NATSC_ROUND_TRIP = Target(NATSC, 1.5)
NATSC_FETCH = Target(NATSC, 1.0)
