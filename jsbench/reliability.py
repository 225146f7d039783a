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

import contextlib
import fnmatch
import functools
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import jsclient
from jsbench.result import peak_rss
from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream.context import JetStream
from jsclient.jetstream.publisher import Flight, Publisher, PublisherListener, RetryConfig
from jsclient.msg import Msg
from jsclient.server import NatsCluster, NatsServer

__all__ = [
    "cluster_consume",
    "cluster_publish",
    "kill9_consume",
    "kill9_publish",
    "rss_bytes",
    "slope",
    "soak",
    "stale_detection",
    "stream_counts",
]

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
    if not _settled(cons):
        figs["problems"].append("messages left unacked at the end")


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


# -- kill -9 on a single server --------------------------------------------------------


def kill9_publish(
    mode: str, n: int = 20_000, kills: int = 2, down: float = 0.3, timeout: float = 120.0
) -> Figures:
    """Publish ``n`` messages (``mode``: ``"publish_async"`` or ``"publisher"``) while the
    server is SIGKILLed and restarted ``kills`` times; check the stream."""
    figs: Figures = {"scenario": f"kill -9 during {mode}", "n": n, "kills": 0, "problems": []}
    deadline = time.monotonic() + timeout
    with NatsServer(jetstream=True) as srv:
        nc = _connect(srv.url)
        try:
            js = nc.jetstream(publish_async_max_pending=2000)
            js.create_stream(name="REL", subjects=["rel.>"], storage="file")
            acked: set[int] = set()
            progress = [0]
            at = [n * (k + 1) // (kills + 1) for k in range(kills)]
            t = _start_killer(srv, at, lambda: progress[0], down, deadline, figs)
            if mode == "publisher":
                _publisher_run(js, n, acked, progress, deadline, figs)
            else:
                _publish_async_run(js, n, acked, progress, deadline, figs)
            t.join(max(0.1, deadline - time.monotonic()))
            counts = stream_counts(srv.url, "REL")
            # publish_async does not retry: an unacked message may be missing,
            # or (its bytes re-sent after the reconnect) stored twice.
            _check_stored(figs, acked, counts, dups_ok=mode != "publisher")
            if mode == "publisher" and len(acked) != n:
                figs["problems"].append(f"publisher acked {len(acked)} of {n}")
        finally:
            nc.close()
    return figs


def _publish_async_run(
    js: JetStream, n: int, acked: set[int], progress: list[int], deadline: float, figs: Figures
) -> None:
    futs: list[Any] = []
    failed: Counter[str] = Counter()
    i = 0
    while i < n and time.monotonic() < deadline:
        try:
            futs.append(js.publish_async(SUBJECT, b"%d" % i))
            i += 1
        except errors.Error as exc:  # stalled or buffer full while the server is down
            failed[type(exc).__name__] += 1
            time.sleep(0.01)
        progress[0] = i
    with contextlib.suppress(errors.TimeoutError):
        js.publish_async_complete(timeout=max(1.0, deadline - time.monotonic()))
    for k, f in enumerate(futs):
        if not f.done():
            failed["pending"] += 1
        elif f.exception() is None:
            acked.add(int(k))
        else:
            failed[type(f.exception()).__name__] += 1
    figs["unacked"] = dict(failed)


def _publisher_run(
    js: JetStream, n: int, acked: set[int], progress: list[int], deadline: float, figs: Figures
) -> None:
    clock = _AckClock()
    retry = RetryConfig(attempts=200, deadline=60.0)
    pub = Publisher(js, retry=retry, listener=clock, max_in_flight=200, refill_allowed_at=100)
    futs = []
    with pub:
        for i in range(n):
            futs.append(pub.publish_async(SUBJECT, b"%d" % i))
            while pub.queued > 2000 and time.monotonic() < deadline:
                time.sleep(0.001)
            progress[0] = pub.acked_count
        while pub.acked_count + pub.failed_count + pub.timed_out_count < n:
            progress[0] = pub.acked_count
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)
    for i, f in enumerate(futs):
        if f.done() and f.exception() is None and f.result().ack is not None:
            acked.add(i)
    figs.update(retries=dict(clock.retries), failed=len(clock.failures))


def kill9_consume(
    mode: str, n: int = 20_000, kills: int = 2, down: float = 0.3, timeout: float = 120.0
) -> Figures:
    """Consume ``n`` stored messages (``mode``: ``"consume"``, ``"messages"``, ``"ordered"``,
    ``"pull_subscribe"``) while the server is SIGKILLed and restarted ``kills`` times."""
    figs: Figures = {"scenario": f"kill -9 during {mode}", "n": n, "kills": 0, "problems": []}
    deadline = time.monotonic() + timeout
    with NatsServer(jetstream=True) as srv:
        nc = _connect(srv.url)
        try:
            js = nc.jetstream(publish_async_max_pending=4000, publish_async_stall_wait=30.0)
            js.create_stream(name="REL", subjects=["rel.>"], storage="file")
            for i in range(n):
                js.publish_async(SUBJECT, b"%d" % i)
            js.publish_async_complete(timeout=60)
            seen: list[int] = []
            at = [n * (k + 1) // (kills + 1) for k in range(kills)]
            t = _start_killer(srv, at, lambda: len(seen), down, deadline, figs)
            if mode == "ordered":
                _ordered_run(js, n, seen, deadline, figs)
            elif mode == "pull_subscribe":
                psub = js.pull_subscribe(
                    SUBJECT,
                    "P",
                    stream="REL",
                    config={"ack_wait": 2.0, "max_ack_pending": -1},
                )
                _fetch_loop_run(psub, n, seen, deadline, figs)
            else:
                cons = js.create_consumer("REL", durable_name="D", ack_wait=2.0, max_ack_pending=-1)
                _acking_run(cons, mode, n, seen, deadline, figs)
            t.join(max(0.1, deadline - time.monotonic()))
        finally:
            nc.close()
    return figs


def _acking_run(
    cons: Any, mode: str, n: int, seen: list[int], deadline: float, figs: Figures
) -> None:
    distinct: set[int] = set()
    lock = threading.Lock()

    def handle(msg: Msg) -> None:
        with lock:
            seen.append(int(msg.data))
            distinct.add(seen[-1])
        msg.ack()

    if mode == "consume":
        cc = cons.consume(handle, max_messages=500, expires=2.0, error_cb=lambda e: None)
        try:
            _wait(lambda: len(distinct) >= n, deadline - time.monotonic(), 0.02)
            _wait(lambda: _settled(cons), max(0.1, deadline - time.monotonic()), 0.1)
        finally:
            cc.stop()
    else:
        with cons.messages(max_messages=500, expires=2.0, error_cb=lambda e: None) as it:
            while time.monotonic() < deadline:
                if len(distinct) >= n and _settled(cons):
                    break
                try:
                    handle(it.next(timeout=0.5))
                except errors.Error:
                    continue  # a missed heartbeat or a timeout while the server is down
    _check_consumed(figs, seen, n, cons)


def _fetch_loop_run(psub: Any, n: int, seen: list[int], deadline: float, figs: Figures) -> None:
    """The legacy ADR-13 loop: ``fetch(batch, timeout)``, ack each, until all are acked."""
    distinct: set[int] = set()
    while time.monotonic() < deadline:
        if len(distinct) >= n and _settled(psub):
            break
        try:
            batch = psub.fetch(100, timeout=1.0)
        except errors.Error:
            continue  # a timeout, or the server down
        for msg in batch:
            seen.append(int(msg.data))
            distinct.add(seen[-1])
            msg.ack()
    _check_consumed(figs, seen, n, psub)


def _settled(cons: Any) -> bool:
    try:
        # a Consumer has info(), a legacy pull subscription consumer_info()
        info = cons.consumer_info() if hasattr(cons, "consumer_info") else cons.info()
    except errors.Error:
        return False
    return bool(info.num_ack_pending == 0 and info.num_pending == 0)


def _ordered_run(js: JetStream, n: int, seen: list[int], deadline: float, figs: Figures) -> None:
    seqs: list[int] = []
    oc = js.ordered_consumer("REL")
    with oc.messages(max_messages=500, expires=2.0, error_cb=lambda e: None) as it:
        while len(seqs) < n and time.monotonic() < deadline:
            try:
                msg = it.next(timeout=0.5)
            except errors.Error:
                continue
            seqs.append(msg.metadata.sequence.stream)
            seen.append(int(msg.data))
    in_order = seqs == list(range(1, n + 1))
    figs.update(consumed=len(seqs), in_order=in_order)
    if not in_order:
        bad = next((k for k, s in enumerate(seqs) if s != k + 1), len(seqs))
        figs["problems"].append(f"ordered consumer out of order / incomplete at index {bad}")


# -- the 3-node cluster ------------------------------------------------------------------


@contextlib.contextmanager
def _cluster_stream(storage: str = "file") -> Iterator[tuple[NatsCluster, Client, JetStream]]:
    with NatsCluster(3) as cluster:
        nc = _connect(cluster.urls[0], dont_randomize=True)
        try:
            js = nc.jetstream()
            js.create_stream(name="REL", subjects=["rel.>"], storage=storage, num_replicas=3)
            yield cluster, nc, js
        finally:
            nc.close()


def _victim(cluster: NatsCluster, nc: Client, js: JetStream, fault: str) -> int:
    """The member a fault hits: the one the client uses, or the stream leader
    (moved off the client's node first, so the two faults stay apart)."""
    mine = cluster.index_of(nc.connected_url)
    if fault == "kill_connected":
        return mine
    leader = _leader(cluster, js)
    for _ in range(5):
        if leader != mine:
            break
        _retry(lambda: nc.request("$JS.API.STREAM.LEADER.STEPDOWN.REL", b"", timeout=2), 10)
        _wait(lambda: _leader(cluster, js) not in (-1, mine), 5)
        leader = _leader(cluster, js)
    return leader


class _Writable:
    """Measures when the stream takes writes again: publishes from a separate
    connection to a member the fault does not hit, every 20 ms."""

    def __init__(self, cluster: NatsCluster, avoid: int) -> None:
        other = next(i for i in range(len(cluster.servers)) if i != avoid)
        self.nc = _connect(cluster.urls[other], ignore_discovered_servers=True)
        self.js = self.nc.jetstream()
        self.at: float | None = None

    def wait(self, since: float, timeout: float) -> None:
        deadline = since + timeout
        while time.monotonic() < deadline:
            try:
                self.js.publish(PROBE, b"p", timeout=0.25)
                self.at = time.monotonic()
                return
            except errors.Error:
                time.sleep(0.02)

    def close(self) -> None:
        self.nc.close()


def cluster_publish(fault: str, n: int = 30_000, timeout: float = 120.0) -> Figures:
    """Managed publisher with retries on an R3 stream; ``fault``: ``"stepdown"``,
    ``"kill_leader"`` or ``"kill_connected"`` (SIGKILL) once a third is acked."""
    figs: Figures = {"scenario": f"cluster {fault} during publish", "n": n, "problems": []}
    deadline = time.monotonic() + timeout
    with _cluster_stream() as (cluster, nc, js):
        victim = _victim(cluster, nc, js, fault)
        clock = _AckClock()
        retry = RetryConfig(attempts=500, deadline=60.0)
        pub = Publisher(js, retry=retry, listener=clock, max_in_flight=100, refill_allowed_at=50)
        probe = _Writable(cluster, victim if fault != "stepdown" else -1)
        futs = []
        try:
            pub.start()
            t_fault = 0.0
            for i in range(n):
                futs.append(pub.publish_async(SUBJECT, b"%d" % i))
                while pub.queued > 1000 and time.monotonic() < deadline:
                    time.sleep(0.001)
                if not t_fault and pub.acked_count >= n // 3:
                    t_fault = _inject(cluster, nc, fault, victim)
            if not t_fault:
                t_fault = _inject(cluster, nc, fault, victim)
            probe.wait(t_fault, 30.0)
            pub.drain(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            pub.stop()
            probe.close()
        _restore(cluster, victim, fault)
        acked = {i for i, f in enumerate(futs) if f.done() and f.exception() is None}
        counts = stream_counts(cluster.urls, "REL")
        _check_stored(figs, acked, counts, dups_ok=False)
        gap = _gap_after(clock.times, t_fault)
        figs.update(failed=len(clock.failures), retries=dict(clock.retries))
        figs.update(_resume_figures(t_fault, gap, probe.at))
        if len(acked) != n:
            figs["problems"].append(f"acked {len(acked)} of {n} ({len(clock.failures)} failed)")
    return figs


def _inject(cluster: NatsCluster, nc: Client, fault: str, victim: int) -> float:
    now = time.monotonic()
    if fault == "stepdown":
        nc.request("$JS.API.STREAM.LEADER.STEPDOWN.REL", b"", timeout=5)
    else:
        cluster.servers[victim].kill()
    return now


def _restore(cluster: NatsCluster, victim: int, fault: str) -> None:
    if fault != "stepdown":
        cluster.servers[victim].start()
    cluster.wait_healthy(60)


def _resume_figures(t_fault: float, gap: tuple[float, float], writable: float | None) -> Figures:
    out: Figures = {"outage_s": round(gap[1] - t_fault, 3) if gap[1] > t_fault else 0.0}
    if writable is not None:
        out["writable_after_s"] = round(writable - t_fault, 3)
        out["resume_after_writable_s"] = round(max(0.0, gap[1] - writable), 3)
    return out


def cluster_consume(fault: str, n: int = 20_000, timeout: float = 120.0) -> Figures:
    """``consume`` with acks on an R3 stream's durable consumer while ``fault`` hits."""
    figs: Figures = {"scenario": f"cluster {fault} during consume", "n": n, "problems": []}
    deadline = time.monotonic() + timeout
    with _cluster_stream() as (cluster, nc, js):
        js = nc.jetstream(publish_async_max_pending=4000, publish_async_stall_wait=30.0)
        for i in range(n):
            js.publish_async(SUBJECT, b"%d" % i)
        js.publish_async_complete(timeout=60)
        cons = js.create_consumer("REL", durable_name="D", ack_wait=2.0, max_ack_pending=-1)
        victim = _victim(cluster, nc, js, fault)
        seen: list[int] = []
        times: list[float] = []
        lock = threading.Lock()
        distinct: set[int] = set()

        def handle(msg: Msg) -> None:
            with lock:
                seen.append(int(msg.data))
                distinct.add(seen[-1])
                times.append(time.monotonic())
            msg.ack()

        cc = cons.consume(handle, max_messages=200, expires=2.0, error_cb=lambda e: None)
        try:
            _wait(lambda: len(seen) >= n // 3, deadline - time.monotonic(), 0.005)
            t_fault = _inject(cluster, nc, fault, victim)
            _wait(lambda: len(distinct) >= n, deadline - time.monotonic(), 0.02)
            _restore(cluster, victim, fault)
            _wait(lambda: _settled(cons), max(0.1, deadline - time.monotonic()), 0.1)
        finally:
            cc.stop()
        _check_consumed(figs, seen, n, cons)
        figs.update(_resume_figures(t_fault, _gap_after(times, t_fault), None))
    return figs


# -- network faults ------------------------------------------------------------------------


def stale_detection(mode: str, ping_interval: float = 0.3, max_pings: int = 2) -> Figures:
    """Put a :class:`~jsbench.faults.FaultProxy` in ``mode`` (``"stall"`` or
    ``"half_open"``) under a connection with traffic; measure until it is declared stale
    and reconnected; a flush meanwhile must fail with FlushTimeoutError, not hang."""
    from jsbench.faults import FaultProxy

    figs: Figures = {"scenario": f"network {mode}", "problems": []}
    limit = ping_interval * (max_pings + 1)
    figs["limit_s"] = round(limit, 3)
    with NatsServer(jetstream=False) as srv, FaultProxy(srv.host, srv.port) as px:
        down, back = threading.Event(), threading.Event()
        errs: list[BaseException] = []
        nc = _connect(
            px.url,
            ping_interval=ping_interval,
            max_pings_outstanding=max_pings,
            connect_timeout=0.5,
            disconnected_cb=down.set,
            reconnected_cb=back.set,
            error_cb=errs.append,
        )
        try:
            sub = nc.subscribe("rel.net")
            nc.flush()
            reader = nc._conn.reader.thread
            t0 = time.monotonic()
            px.set_mode(mode)
            for _ in range(500):
                nc.publish("rel.net", b"x" * 64)
            flush_error = None
            t_flush = time.monotonic()
            try:
                nc.flush(timeout=0.2)
            except errors.Error as exc:
                flush_error = exc
            figs["flush_error"] = type(flush_error).__name__ if flush_error else None
            figs["flush_s"] = round(time.monotonic() - t_flush, 3)
            if not isinstance(flush_error, errors.FlushTimeoutError):
                figs["problems"].append(f"flush during {mode} gave {flush_error!r}")
            detected = down.wait(limit + 2.0)
            t_detect = time.monotonic() - t0
            px.set_mode("pass")
            reconnected = back.wait(10.0)
            figs["detected_s"] = round(t_detect, 3)
            figs["reconnected_s"] = round(time.monotonic() - t0, 3)
            stale = [e for e in errs if isinstance(e, errors.StaleConnectionError)]
            if not detected or t_detect > limit + 0.5:
                figs["problems"].append(f"stale after {t_detect:.2f} s (limit {limit:.2f} s)")
            if not stale:
                figs["problems"].append(f"no StaleConnectionError reported: {errs}")
            if not reconnected:
                figs["problems"].append("no reconnect")
            nc.publish("rel.net", b"after")
            nc.flush(timeout=5)
            got = 0
            with contextlib.suppress(errors.TimeoutError):
                while True:
                    if sub.next_msg(timeout=1).data == b"after":
                        got = 1
                        break
            if not got:
                figs["problems"].append("no delivery after the reconnect")
            alive = reader is not None and reader.is_alive() and nc._conn.reader.thread is reader
            figs["reader_alive"] = alive
            if not alive:
                figs["problems"].append("the reader thread died")
        finally:
            nc.close()
    return figs


# -- soak ------------------------------------------------------------------------------


def soak(n: int = 1_000_000, sample_every: int = 100_000, timeout: float = 900.0) -> Figures:
    """Publish ``n`` messages (async, acked) and consume + ack them all on one
    connection; sample the RSS every ``sample_every`` consumed messages."""
    figs: Figures = {"scenario": "soak publish -> consume + ack", "n": n, "problems": []}
    deadline = time.monotonic() + timeout
    with NatsServer(jetstream=True) as srv:
        nc = _connect(srv.url)
        try:
            js = nc.jetstream(publish_async_max_pending=4000)
            js.create_stream(
                name="SOAK", subjects=["soak.>"], storage="memory", retention="workqueue"
            )
            cons = js.create_consumer("SOAK", durable_name="D", ack_wait=30.0)
            count = [0]
            samples: list[tuple[int, int]] = []
            done = threading.Event()

            def handle(msg: Msg) -> None:
                msg.ack()
                count[0] += 1
                if count[0] % sample_every == 0:
                    samples.append((count[0], rss_bytes()))
                if count[0] >= n:
                    done.set()

            cc = cons.consume(handle, max_messages=1000)
            payload = b"s" * 64
            t0 = time.monotonic()
            try:
                sent = 0
                while sent < n and time.monotonic() < deadline:
                    if sent - count[0] > 50_000:  # keep the backlog bounded
                        time.sleep(0.001)
                        continue
                    js.publish_async("soak.x", payload)
                    sent += 1
                js.publish_async_complete(timeout=max(1.0, deadline - time.monotonic()))
                done.wait(max(0.1, deadline - time.monotonic()))
            finally:
                cc.stop()
            took = time.monotonic() - t0
        finally:
            nc.close()
    warm = samples[len(samples) // 3 :] if len(samples) >= 3 else samples
    per = slope([(c / sample_every, r / 1024) for c, r in warm])
    figs.update(
        consumed=count[0],
        seconds=round(took, 1),
        rss_mib=[round(r / 2**20, 1) for _, r in samples],
        slope_kib_per_sample=round(per, 1),
        sample_every=sample_every,
    )
    if count[0] < n:
        figs["problems"].append(f"consumed {count[0]} of {n}")
    return figs


# -- thread stress ---------------------------------------------------------------------


def thread_stress(
    per_thread: int = 2_000, publishers: int = 8, ackers: int = 4, timeout: float = 120.0
) -> Figures:
    """``publishers`` threads publish (async, acked) and ``ackers`` threads fetch and
    ack, all on one connection, with ``sys.setswitchinterval(1e-6)`` so the GIL
    changes hands as often as it can. No deadlock, nothing lost or doubled, every
    thread ends."""
    import sys

    n = per_thread * publishers
    figs: Figures = {"scenario": "thread stress", "n": n, "problems": []}
    deadline = time.monotonic() + timeout
    old = sys.getswitchinterval()
    with NatsServer(jetstream=True) as srv:
        nc = _connect(srv.url)
        try:
            # A generous ack timeout: this scenario is about deadlocks and loss,
            # and a GIL handed over every microsecond makes acks slow.
            js = nc.jetstream(publish_async_max_pending=1000, publish_async_timeout=60)
            js.create_stream(name="STRESS", subjects=["stress.>"], storage="memory")
            js.create_consumer("STRESS", durable_name="D", ack_wait=60.0, max_ack_pending=-1)
            got: list[bytes] = []
            pub_errors: list[BaseException] = []
            lock = threading.Lock()

            stalls = [0]

            def publish(k: int) -> None:
                futs = []
                i = 0
                while i < per_thread:
                    if time.monotonic() > deadline:
                        return
                    try:
                        futs.append(js.publish_async("stress.x", b"%d-%d" % (k, i)))
                    except errors.TooManyStalledMsgsError:
                        # Back-pressure, as documented: the window stayed full for
                        # the stall wait (acks are slow here); publish it again.
                        with lock:
                            stalls[0] += 1
                        continue
                    i += 1
                for f in futs:
                    try:
                        f.result(max(0.1, deadline - time.monotonic()))
                    except Exception as exc:
                        with lock:
                            pub_errors.append(exc)

            def ack() -> None:
                cons = js.consumer("STRESS", "D")
                while time.monotonic() < deadline:
                    with lock:
                        if len(got) >= n:
                            return
                    for msg in cons.fetch(100, expires=0.5):
                        msg.ack()
                        with lock:
                            got.append(msg.data)

            threads = [
                threading.Thread(target=publish, args=(k,), name=f"rel-pub-{k}")
                for k in range(publishers)
            ] + [threading.Thread(target=ack, name=f"rel-ack-{k}") for k in range(ackers)]
            t0 = time.monotonic()
            sys.setswitchinterval(1e-6)
            try:
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(max(0.1, deadline - time.monotonic()))
            finally:
                sys.setswitchinterval(old)
            figs["seconds"] = round(time.monotonic() - t0, 1)
            stuck = [t.name for t in threads if t.is_alive()]
            for t in threads:
                t.join(10)  # the deadline ends every loop
            distinct = set(got)
            figs.update(consumed=len(got), distinct=len(distinct), stuck_threads=stuck)
            figs["publish_errors"] = len(pub_errors)
            figs["stalls"] = stalls[0]
            if stuck:
                figs["problems"].append(f"threads still running at the deadline: {stuck}")
            if pub_errors:
                figs["problems"].append(f"{len(pub_errors)} publishes failed: {pub_errors[:3]}")
            if len(got) != n or len(distinct) != n:
                figs["problems"].append(f"consumed {len(got)} ({len(distinct)} distinct) of {n}")
            cons = js.consumer("STRESS", "D")
            if not _wait(lambda: _settled(cons), 10, 0.05):
                figs["problems"].append(f"unacked at the end: {cons.info().num_ack_pending}")
        finally:
            nc.close()
    return figs


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
