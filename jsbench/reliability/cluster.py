"""Leader step-down and member kills in a 3-node cluster while publishing or consuming."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from jsbench.reliability._common import (
    PROBE,
    SUBJECT,
    Figures,
    _AckClock,
    _check_consumed,
    _check_stored,
    _connect,
    _gap_after,
    _leader,
    _retry,
    _settled,
    _wait,
    stream_counts,
)
from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream.context import JetStream
from jsclient.jetstream.publish.publisher import Publisher, RetryConfig
from jsclient.msg import Msg
from jsclient.server import NatsCluster

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
