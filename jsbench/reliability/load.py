"""Network faults (stale detection), soak, and thread stress."""

from __future__ import annotations

import contextlib
import threading
import time

from jsbench.reliability._common import (
    Figures,
    _connect,
    _settled,
    _wait,
    rss_bytes,
    slope,
)
from jsclient import errors
from jsclient.msg import Msg
from jsclient.server import NatsServer

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
            # A soak measures memory, not stalls: a loaded machine may hold the
            # window full past the default 0.2 s (TooManyStalledMsgsError).
            js = nc.jetstream(publish_async_max_pending=4000, publish_async_stall_wait=10.0)
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
