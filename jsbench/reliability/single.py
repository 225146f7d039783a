"""Hard kills (SIGKILL) of a single server while publishing or consuming."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from typing import Any

from jsbench.reliability._common import (
    SUBJECT,
    Figures,
    _AckClock,
    _check_consumed,
    _check_stored,
    _connect,
    _settled,
    _start_killer,
    _wait,
    stream_counts,
)
from jsclient import errors
from jsclient.jetstream.context import JetStream
from jsclient.jetstream.publish.publisher import Publisher, RetryConfig
from jsclient.msg import Msg
from jsclient.server import NatsServer

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
