"""From runs to a report: medians, ratios, targets, the printed tables and the JSON.

Everything here is pure (no I/O, no clients), so it is unit-tested directly.
Each row's number for a client is the median over its rounds; ratios are
jsclient's median over the other client's, both from the same run.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from jsbench.natsc import NOT_AVAILABLE
from jsbench.result import Result
from jsbench.workloads import CLIENTS, JSCLIENT, NATS_PY, NATSC, NATSIO, PEERS, RAW, Target

OK, NA, ERROR = "ok", "n/a", "error"
MB = 1024 * 1024


@dataclass
class ClientStats:
    """One client's numbers for one row: medians over its rounds."""

    status: str  # "ok", "n/a" (no equivalent API, or it cannot run here), "error"
    rate: float | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    rss_start_mb: float | None = None
    rss_peak_mb: float | None = None
    #: CPU µs per message: the client process's during the workload, and the
    #: server's during the run (medians over rounds; None where not measured);
    #: ``peer_cpu_us``: a peer process the row started (a service host)'s.
    cpu_us: float | None = None
    server_cpu_us: float | None = None
    peer_cpu_us: float | None = None
    runs: list[float] = field(default_factory=list)
    error: str | None = None  # the last failure, also when other rounds succeeded
    reason: str | None = None  # why "n/a"; "not available: ..." where it cannot run here

    @property
    def rss_growth_mb(self) -> float | None:
        if self.rss_peak_mb is None or self.rss_start_mb is None:
            return None
        return self.rss_peak_mb - self.rss_start_mb


@dataclass
class Outcome:
    """A measured row."""

    name: str
    description: str
    n: int
    size: int
    latency: bool
    clients: dict[str, ClientStats]
    targets: list[Target] = field(default_factory=list)
    rss_growth_target_mb: float | None = None

    def rate(self, client: str) -> float | None:
        st = self.clients.get(client)
        return st.rate if st is not None and st.status == OK else None

    def ratio(self, peer: str) -> float | None:
        """jsclient's rate over ``peer``'s, or None where either is missing."""
        ours, theirs = self.rate(JSCLIENT), self.rate(peer)
        if ours is None or not theirs:
            return None
        return ours / theirs

    def ceiling(self, peer: str) -> float | None:
        """The raw socket's rate over ``peer``'s: how far any client can be ahead of it."""
        raw, theirs = self.rate(RAW), self.rate(peer)
        if peer == RAW or raw is None or not theirs:
            return None
        return raw / theirs

    def target_results(self) -> list[tuple[Target, float | None, bool | None]]:
        """Each target with the measured ratio and whether it is met (None: not measured)."""
        out: list[tuple[Target, float | None, bool | None]] = []
        for t in self.targets:
            r = self.ratio(t.against)
            out.append((t, r, None if r is None else r >= t.ratio))
        return out

    def memory_target_met(self) -> bool | None:
        if self.rss_growth_target_mb is None:
            return None
        st = self.clients.get(JSCLIENT)
        growth = st.rss_growth_mb if st is not None and st.status == OK else None
        return None if growth is None else growth < self.rss_growth_target_mb

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratios"] = {peer: self.ratio(peer) for peer in PEERS}
        d["targets_met"] = [
            {"target": t.label(), "ratio": r, "met": met, "raw_ratio": self.ceiling(t.against)}
            for t, r, met in self.target_results()
        ]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Outcome:
        return cls(
            name=d["name"],
            description=d["description"],
            n=int(d["n"]),
            size=int(d["size"]),
            latency=bool(d["latency"]),
            clients={k: ClientStats(**v) for k, v in d["clients"].items()},
            targets=[Target(**t) for t in d.get("targets", [])],
            rss_growth_target_mb=d.get("rss_growth_target_mb"),
        )


def _median(values: Iterable[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return statistics.median(vs) if vs else None


def client_stats(
    runs: Sequence[Result], error: str | None = None, n: int | None = None
) -> ClientStats:
    """Medians of one client's rounds (status "error" when none succeeded).

    ``n``, the messages per run, turns CPU seconds into µs per message.
    """
    if not runs:
        return ClientStats(ERROR, error=error or "no run")

    def us(v: float | None) -> float | None:
        return None if v is None else round(v * 1e6, 1)

    def mb(v: float | None) -> float | None:
        return None if v is None else round(v / MB, 1)

    def per_msg(v: float | None) -> float | None:
        return None if v is None or not n else round(v * 1e6 / n, 2)

    return ClientStats(
        OK,
        rate=_median(r.rate for r in runs),
        p50_us=us(_median(r.p50 for r in runs)),
        p99_us=us(_median(r.p99 for r in runs)),
        rss_start_mb=mb(_median(r.rss_start for r in runs)),
        rss_peak_mb=mb(_median(r.rss_peak for r in runs)),
        cpu_us=per_msg(_median(r.cpu for r in runs)),
        server_cpu_us=per_msg(_median(r.server_cpu for r in runs)),
        peer_cpu_us=per_msg(_median(r.peer_cpu for r in runs)),
        runs=[r.rate for r in runs],
        error=error,
    )


def outcome(
    w: Any,
    n: int,
    runs: Mapping[str, Sequence[Result]],
    errors: Mapping[str, str],
    unavailable: Mapping[str, str],
) -> Outcome:
    """A row from a workload's runs: ``unavailable`` maps a client to why it cannot run here."""
    clients: dict[str, ClientStats] = {}
    for c in CLIENTS:
        if c not in w.fns:
            clients[c] = ClientStats(NA, reason="no equivalent API")
        elif c in unavailable:
            clients[c] = ClientStats(NA, reason=unavailable[c])
        else:
            clients[c] = client_stats(runs.get(c, ()), errors.get(c), n)
    return Outcome(
        w.name,
        w.description,
        n,
        w.size,
        w.latency,
        clients,
        list(w.all_targets()),
        w.rss_growth_mb,
    )


def mark_unavailable(
    outcomes: Sequence[Outcome], client: str, why: str, rows: Iterable[str]
) -> list[Outcome]:
    """``client`` was left out of the run because it cannot run here: its cells in
    ``rows`` (those it has an implementation for) say why instead of "not selected"."""
    names = set(rows)
    for o in outcomes:
        if o.name in names:
            o.clients[client] = ClientStats(NA, reason=why)
    return list(outcomes)


# -- formatting ------------------------------------------------------------------------


def fmt_rate(v: float | None) -> str:
    """Three significant digits with a k/M suffix: 2.37M, 661k, 5.10k, 486."""
    if v is None:
        return ""
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if v >= div * 0.9995:
            x = v / div
            return f"{x:.3g}{suffix}" if x < 1000 else f"{x:.0f}{suffix}"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return ""
    return f"{r:.1f}x" if r >= 10 else f"{r:.2f}x"


def _na(st: ClientStats) -> str:
    """What a cell of a client that did not run says."""
    return NOT_AVAILABLE if (st.reason or "").startswith(NOT_AVAILABLE) else "n/a"


def _cell(o: Outcome, client: str) -> str:
    st = o.clients[client]
    if st.status == NA:
        return _na(st)
    if st.status == ERROR:
        return "error"
    return fmt_rate(st.rate) + ("!" if st.error else "")


def _ratio_cell(o: Outcome, peer: str) -> str:
    st = o.clients[peer]
    if st.status == NA:
        return "" if peer in _FEW_ROWS else "n/a"
    return fmt_ratio(o.ratio(peer))


# Peers with the rows of a few kinds only: a blank ratio where they have none.
_FEW_ROWS = (RAW, NATSC)


def targets_cell(o: Outcome) -> str:
    parts = []
    for t, _r, met in o.target_results():
        mark = "" if met is None else (" ✓" if met else " ✗")
        ceiling = o.ceiling(t.against) if met is False else None
        if ceiling is not None:
            # A target missed: is it within reach of a raw socket at all?
            mark += f" (raw {ceiling:.2f}x)"
        parts.append(t.label() + mark)
    if o.rss_growth_target_mb is not None:
        met = o.memory_target_met()
        mark = "" if met is None else (" ✓" if met else " ✗")
        parts.append(f"RSS +<{o.rss_growth_target_mb:.0f} MB{mark}")
    return ", ".join(parts)


def _grid(head: list[str], rows: list[list[str]], left: Iterable[int] = (0,)) -> list[str]:
    """Columns sized to fit: those in ``left`` left-aligned, the rest right-aligned."""
    lefts = set(left)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        cells = [c.ljust(widths[i]) if i in lefts else c.rjust(widths[i]) for i, c in enumerate(r)]
        return "  ".join(cells).rstrip()

    body = [line(r) for r in rows]
    return [line(head), "-" * max(len(x) for x in [line(head), *body]), *body]


def rates_table(outcomes: Sequence[Outcome]) -> str:
    """msgs/s per client, jsclient's ratios, and the targets."""
    head = ["workload", *CLIENTS, *(f"js/{p}" for p in PEERS), "targets"]
    rows = [
        [
            o.name,
            *(_cell(o, c) for c in CLIENTS),
            *(_ratio_cell(o, p) for p in PEERS),
            targets_cell(o),
        ]
        for o in outcomes
    ]
    return "\n".join(_grid(head, rows, left=(0, len(head) - 1)))


def _per_client_table(
    outcomes: Sequence[Outcome], title: str, cell: Callable[[ClientStats], str | None]
) -> str:
    """A row per workload, a column per client: ``cell`` of each measured client.

    ``cell`` returns None where the client's run has no such figure.
    """
    rows = []
    for o in outcomes:
        cells = []
        for c in CLIENTS:
            st = o.clients[c]
            text = cell(st) if st.status == OK else None
            cells.append((_na(st) if st.status == NA else "") if text is None else text)
        rows.append([o.name, *cells])
    return "\n".join(_grid([title, *CLIENTS], rows))


def _memory_cell(st: ClientStats) -> str | None:
    if st.rss_peak_mb is None:
        return None
    g = st.rss_growth_mb
    return f"{st.rss_peak_mb:.0f} (+{g:.0f})" if g is not None else ""


def _cpu_cell(st: ClientStats) -> str | None:
    if st.cpu_us is None:
        return None
    peer = f" +{st.peer_cpu_us:.2f} peer" if st.peer_cpu_us is not None else ""
    srv = f" ({st.server_cpu_us:.2f})" if st.server_cpu_us is not None else ""
    return f"{st.cpu_us:.2f}{peer}{srv}"


def memory_table(outcomes: Sequence[Outcome]) -> str:
    """Peak RSS per client, with what the run added to the RSS it started with."""
    return _per_client_table(outcomes, "peak RSS MB (+growth)", _memory_cell)


def cpu_table(outcomes: Sequence[Outcome]) -> str:
    """CPU µs per message of each client, with the server's during its run in brackets.

    The server and the clients share the machine's cores: a row whose server
    CPU time per message is close to its wall time per message (1 / rate) is
    bound by the server, whatever the client does. A row whose peer process
    (``svc-echo``'s service host) ran the client library too shows that
    process's CPU after the client's: ``12.30 +20.10 peer (8.40)``.
    """
    return _per_client_table(outcomes, "CPU µs/msg (server)", _cpu_cell)


def _latency_cell(st: ClientStats) -> str | None:
    if st.p50_us is None or st.p99_us is None:
        return None
    return f"{st.p50_us:.0f}/{st.p99_us:.0f}"


def latency_table(outcomes: Sequence[Outcome]) -> str:
    """p50/p99 round-trip latency for the latency rows."""
    rows = [o for o in outcomes if o.latency]
    return _per_client_table(rows, "latency µs p50/p99", _latency_cell) if rows else ""


def errors_section(outcomes: Sequence[Outcome]) -> str:
    lines = []
    for o in outcomes:
        for c in CLIENTS:
            st = o.clients[c]
            if st.error:
                lines.append(f"  {o.name} [{c}]: {st.error}")
    return ("errors (a rate marked ! had a failed round):\n" + "\n".join(lines)) if lines else ""


def unavailable_section(outcomes: Sequence[Outcome]) -> str:
    """Why a column says "not available": each such client's reason, once."""
    why: dict[str, str] = {}
    for o in outcomes:
        for c in CLIENTS:
            st = o.clients[c]
            if st.status == NA and _na(st) == NOT_AVAILABLE:
                why.setdefault(c, st.reason or "")
    return "\n".join(f"{c}: {reason}" for c, reason in why.items())


def table(outcomes: Sequence[Outcome]) -> str:
    """Every table of the report, separated by blank lines."""
    parts = [
        rates_table(outcomes),
        memory_table(outcomes),
        cpu_table(outcomes),
        latency_table(outcomes),
    ]
    parts.append(errors_section(outcomes))
    parts.append(unavailable_section(outcomes))
    return "\n\n".join(p for p in parts if p)


def to_json(outcomes: Sequence[Outcome], meta: Mapping[str, Any]) -> str:
    return json.dumps({"meta": dict(meta), "results": [o.as_dict() for o in outcomes]}, indent=2)


def from_json(text: str) -> tuple[list[Outcome], dict[str, Any]]:
    data = json.loads(text)
    return [Outcome.from_dict(d) for d in data["results"]], dict(data["meta"])


__all__ = [
    "ERROR",
    "NA",
    "NATSIO",
    "NATS_PY",
    "OK",
    "ClientStats",
    "Outcome",
    "client_stats",
    "cpu_table",
    "fmt_rate",
    "fmt_ratio",
    "from_json",
    "mark_unavailable",
    "memory_table",
    "outcome",
    "rates_table",
    "table",
    "targets_cell",
    "to_json",
]
