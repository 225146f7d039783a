"""Partitioned consumer group rows: an elastic group of two members against one consumer.

Both rows read the same work-queue stream, the group's own (``BPCG-cg``, sourced
from ``BPCG`` through the partitioning transform), filled by the parent before
every run so no run sees another's leftovers and the sourcing is not timed:

- ``pcgroup-1-consumer``: one plain consumer on that stream, ``consume()``;
- ``pcgroup-elastic-2``: two members of the elastic group, each consuming its
  partitions on its own thread (one connection).

Every message is acked, and every handler checks the order per key as it goes
(each key's payloads count up from 0): a message out of order, or fewer than
``n`` within the time allowed, fails the run.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jsbench.result import Result

STREAM, GROUP, SUBJECTS = "BPCG", "cg", "bpcg.*"
GROUP_STREAM = f"{STREAM}-{GROUP}"
KEYS = 64
PARTITIONS = 8
MAX_ACK_PENDING = 2000
_WAIT = 300.0


def setup(url: str, n: int, size: int) -> None:
    """``BPCG`` with n messages over KEYS keys, and a new group whose stream holds them all."""
    import jsclient
    from jsclient.jetstream import pcgroups

    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        js = nc.jetstream(publish_async_max_pending=4000, publish_async_stall_wait=60.0)
        _fill(js, n, size)
        try:
            pcgroups.delete_elastic(js, STREAM, GROUP)
        except pcgroups.ConsumerGroupNotFoundError:
            pass  # the first run: no bucket yet
        pcgroups.create_elastic(js, STREAM, GROUP, PARTITIONS, SUBJECTS, [1])
        deadline = time.monotonic() + _WAIT
        while js.stream(GROUP_STREAM).info().state.messages < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{GROUP_STREAM} did not source {n} messages")
            time.sleep(0.05)


def _fill(js: Any, n: int, size: int) -> None:
    """The source stream, reused when it already holds what this run needs."""
    import jsclient
    from jsbench.js import create_stream_anew

    tag = f"jsclient bench: {n} x {size} B over {KEYS} keys"
    try:
        info = js.stream(STREAM).info()
        if info.config.description == tag and info.state.messages == n:
            return
        js.delete_stream(STREAM)
    except jsclient.errors.NotFoundError:
        pass
    create_stream_anew(js, name=STREAM, subjects=[SUBJECTS], storage="file", description=tag)
    for i in range(n):
        seq, key = divmod(i, KEYS)
        js.publish_async(f"bpcg.k{key}", b"%0*d" % (size, seq))
    js.publish_async_complete(timeout=_WAIT)


class _Tally:
    """Counts what the handlers took and checks each key's order; ``done`` at n."""

    def __init__(self, n: int, members: int) -> None:
        self.n = n
        self.counts = [0] * members
        self.last: dict[str, int] = {}  # a key belongs to one member: no two writers
        self.error: str | None = None
        self.done = threading.Event()

    def handler(self, member: int) -> Any:
        counts, last, n = self.counts, self.last, self.n

        def handle(msg: Any) -> None:
            seq = int(msg.data)
            subject = msg.subject
            if seq != last.get(subject, -1) + 1 and self.error is None:
                self.error = f"{subject}: {seq} after {last.get(subject)}"
            last[subject] = seq
            msg.ack()
            counts[member] += 1
            if sum(counts) >= n:
                self.done.set()

        return handle

    def result(self, t0: float) -> Result:
        if not self.done.wait(_WAIT):
            raise RuntimeError(f"handled {sum(self.counts)} of {self.n} messages")
        dt = time.perf_counter() - t0
        if self.error is not None:
            raise RuntimeError(f"out of order per key: {self.error}")
        return Result(self.n / dt)


def js_one_consumer(url: str, n: int, size: int) -> Result:
    import jsclient
    from jsclient.api import AckPolicy, ConsumerConfig

    with jsclient.connect(url, name="jsclient-bench") as nc:
        js = nc.jetstream()
        consumer = js.stream(GROUP_STREAM).create_consumer(
            ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=MAX_ACK_PENDING)
        )
        tally = _Tally(n, 1)
        t0 = time.perf_counter()
        cc = consumer.consume(tally.handler(0))
        try:
            return tally.result(t0)
        finally:
            cc.stop()
            cc.wait(30)


def js_elastic(url: str, n: int, size: int, members: int = 2) -> Result:
    import jsclient
    from jsclient.api import ConsumerConfig
    from jsclient.jetstream import pcgroups

    names = [f"m{i}" for i in range(members)]
    with jsclient.connect(url, name="jsclient-bench") as nc:
        js = nc.jetstream()
        pcgroups.add_members(js, STREAM, GROUP, names)
        tally = _Tally(n, members)
        cfg = ConsumerConfig(ack_wait=5.0, max_ack_pending=MAX_ACK_PENDING)
        t0 = time.perf_counter()
        ctxs = [
            pcgroups.consume_elastic(js, STREAM, GROUP, name, tally.handler(i), cfg)
            for i, name in enumerate(names)
        ]
        try:
            return tally.result(t0)
        finally:
            for c in ctxs:
                c.stop()
            for c in ctxs:
                c.wait(30)
