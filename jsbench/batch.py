"""Batch publish workloads (ADR-50): atomic batches of 100 and one fast-ingest batch.

Both move the same messages as the ``js-publish-async`` row (``n`` messages of
``size`` bytes to ``bpub.x``), into the same fresh memory stream, made with
``allow_atomic`` and ``allow_batched``; nats-py has neither API, so its column
is its ``publish_async`` of the same bytes (:func:`jsbench.js_publish.py_publish_async`),
the way a nats-py user does the job. The stream's count is checked after every
run by :func:`jsbench.js.check_published`. nats.js has both APIs:
``benchmarks/natsjs`` runs these two rows with it (node, by hand).
"""

from __future__ import annotations

import time

from jsbench.js import PUB_STREAM, PUB_SUBJECT
from jsbench.result import Result

BATCH = 100  # messages per atomic batch


def setup_batch_publish(url: str, n: int, size: int) -> None:
    """A fresh, empty memory stream that takes both kinds of batch."""
    import jsclient

    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        js = nc.jetstream()
        try:
            js.delete_stream(PUB_STREAM)
        except jsclient.errors.NotFoundError:
            pass
        js.create_stream(
            name=PUB_STREAM,
            subjects=["bpub.>"],
            storage="memory",
            allow_atomic=True,
            allow_batched=True,
        )


def js_atomic_batch(url: str, n: int, size: int, batch: int = BATCH) -> Result:
    import jsclient

    payload = b"x" * size
    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        js.publish(PUB_SUBJECT, payload)
        t0 = time.perf_counter()
        left = n
        while left:
            k = min(batch, left)
            b = js.atomic_batch()
            for _ in range(k - 1):
                b.add(PUB_SUBJECT, payload)
            ack = b.commit(PUB_SUBJECT, payload)  # the k-th message commits
            if ack.batch_size != k:
                raise RuntimeError(f"batch of {k} stored as {ack.batch_size}")
            left -= k
        dt = time.perf_counter() - t0
    return Result(n / dt)


def js_fast_ingest(url: str, n: int, size: int) -> Result:
    import jsclient

    payload = b"x" * size
    with jsclient.connect(url) as nc:
        js = nc.jetstream()
        js.publish(PUB_SUBJECT, payload)
        t0 = time.perf_counter()
        with js.fast_publisher() as fp:
            add = fp.add
            for _ in range(n):
                add(PUB_SUBJECT, payload)
            ack = fp.commit()
        dt = time.perf_counter() - t0
    if ack.batch_size != n:
        raise RuntimeError(f"fast batch of {n} stored as {ack.batch_size}")
    return Result(n / dt)
