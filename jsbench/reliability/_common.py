"""What every reliability scenario shares: connecting, waiting, the oracle, the checks."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import jsclient
from jsbench.result import peak_rss
from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream.context import JetStream
from jsclient.jetstream.publish.publisher import Flight, PublisherListener
from jsclient.server import NatsCluster, NatsServer

Figures = dict[str, Any]
SUBJECT = "rel.x"
PROBE = "rel.probe"


# -- helpers -----------------------------------------------------------------------


def rss_bytes() -> int:
    """This process's current resident set size (Linux ``/proc``; elsewhere the
    peak, :func:`jsbench.result.peak_rss`, or 0 where even that is unknown)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss() or 0


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(x, y)`` points (0.0 for fewer than two)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def _connect(urls: str | list[str], **kw: Any) -> Client:
    opts: dict[str, Any] = {
        "reconnect_wait": 0.1,
        "max_reconnect_attempts": -1,
        "connect_timeout": 1.0,
    }
    opts.update(kw)
    return jsclient.connect(urls, **opts)


def _wait(cond: Callable[[], Any], timeout: float, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def _retry(call: Callable[[], Any], timeout: float) -> Any:
    """Call until it does not raise a jsclient error (a server coming back)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except errors.Error:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def stream_counts(servers: str | list[str], stream: str, timeout: float = 60.0) -> Counter[int]:
    """How often each integer payload is stored in ``stream`` (probe payloads skipped).

    The oracle of every scenario, so it shares no code with jsclient: nats-py
    (another client, on its own connection) gets every sequence from the first
    to the last one by one, pipelined; a missing sequence is a gap the stream
    has, not an error. A bug in jsclient's consumers can neither fake nor hide
    a loss here.
    """
    import asyncio

    import nats
    from nats.js.errors import NotFoundError

    urls = [servers] if isinstance(servers, str) else list(servers)
    counts: Counter[int] = Counter()

    async def read() -> None:
        nc = await nats.connect(urls, connect_timeout=5, max_reconnect_attempts=-1)
        try:
            js = nc.jetstream(timeout=10)
            end = time.monotonic() + timeout
            while True:  # the stream may have no leader yet after a fault
                try:
                    state = (await js.stream_info(stream)).state
                    break
                except Exception:
                    if time.monotonic() > end:
                        raise
                    await asyncio.sleep(0.1)

            async def get(seq: int) -> None:
                while True:
                    try:
                        msg = await js.get_msg(stream, seq)
                    except NotFoundError:
                        return  # deleted or never stored
                    except Exception:
                        if time.monotonic() > end:
                            raise
                        await asyncio.sleep(0.1)
                        continue
                    if msg.subject == SUBJECT and msg.data is not None:
                        counts[int(msg.data)] += 1
                    return

            if not state.last_seq:
                return
            for lo in range(state.first_seq, state.last_seq + 1, 256):
                hi = min(state.last_seq, lo + 255)
                await asyncio.gather(*(get(seq) for seq in range(lo, hi + 1)))
        finally:
            await nc.close()

    asyncio.run(read())
    return counts


def _leader(cluster: NatsCluster, js: JetStream) -> int:
    """The index of the stream REL's leader (-1 while there is none)."""
    info = js.stream("REL").info().cluster
    return cluster.index_of(info.leader if info is not None else None)


def _start_killer(
    srv: NatsServer,
    marks: list[int],
    done: Callable[[], int],
    down: float,
    deadline: float,
    figs: Figures,
) -> threading.Thread:
    """A thread that SIGKILLs ``srv`` each time ``done()`` reaches the next of
    ``marks``, restarting it ``down`` seconds later (``figs["kills"]`` counts)."""

    def killer() -> None:
        for mark in marks:  # each lambda is waited on within its own iteration
            if not _wait(lambda: done() >= mark, deadline - time.monotonic()):  # noqa: B023
                return
            srv.kill()
            figs["kills"] += 1
            time.sleep(down)
            srv.start()

    t = threading.Thread(target=killer, name="rel-killer", daemon=True)
    t.start()
    return t


def _check_consumed(figs: Figures, seen: list[int], n: int, cons: Any) -> None:
    """Record consumed / distinct / redelivered; every one of ``n`` seen, all acked."""
    distinct = len(set(seen))
    figs.update(consumed=len(seen), distinct=distinct, redelivered=len(seen) - distinct)
    if distinct != n:
        figs["problems"].append(f"consumed {distinct} of {n} distinct messages")
    # Settled is checked again, for a while: one consumer info may fail on a
    # loaded machine (a timeout) right after the loop saw everything settled.
    last: list[str] = []
    if not _wait(lambda: _settled(cons, last), 10.0, 0.2):
        figs["problems"].append(f"messages left unacked at the end ({last[-1]})")


def _check_stored(figs: Figures, acked: set[int], counts: Counter[int], dups_ok: bool) -> None:
    lost = [i for i in acked if counts[i] == 0]
    twice_acked = [i for i in acked if counts[i] > 1]
    dups = sum(c - 1 for c in counts.values() if c > 1)
    figs.update(acked=len(acked), acked_lost=len(lost), stored=sum(counts.values()))
    figs.update(duplicates=dups, acked_stored_twice=len(twice_acked))
    if lost:
        figs["problems"].append(f"{len(lost)} acked messages missing, e.g. {sorted(lost)[:5]}")
    if twice_acked:
        figs["problems"].append(f"{len(twice_acked)} acked messages stored more than once")
    if dups and not dups_ok:
        figs["problems"].append(f"{dups} duplicates in the stream")


class _AckClock(PublisherListener):
    """Records when acks came, and the retries."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.retries: Counter[str] = Counter()
        self.failures: list[BaseException | None] = []

    def acked(self, flight: Flight) -> None:
        self.times.append(time.monotonic())

    def retrying(self, flight: Flight) -> None:
        self.retries[type(flight.error).__name__] += 1

    def completed_exceptionally(self, flight: Flight) -> None:
        self.failures.append(flight.error)

    def timeout(self, flight: Flight) -> None:
        self.failures.append(flight.error)


def _gap_after(times: list[float], t_fault: float) -> tuple[float, float]:
    """(start, end) of the longest pause between events that ends after ``t_fault``."""
    pts = sorted(times)
    best = (t_fault, t_fault)
    prev = None
    for t in pts:
        if prev is not None and t > t_fault and t - prev > best[1] - best[0]:
            best = (prev, t)
        prev = t
    return best


def _settled(cons: Any, why: list[str] | None = None) -> bool:
    """Nothing pending or unacked on ``cons``; else what was found goes to ``why``."""
    try:
        # a Consumer has info(), a legacy pull subscription consumer_info()
        info = cons.consumer_info() if hasattr(cons, "consumer_info") else cons.info()
    except errors.Error as exc:
        if why is not None:
            why.append(f"consumer info: {type(exc).__name__}: {exc}")
        return False
    if info.num_ack_pending == 0 and info.num_pending == 0:
        return True
    if why is not None:
        why.append(f"{info.num_ack_pending} unacked, {info.num_pending} pending")
    return False
