"""The rows of the benchmark: one job, done by each client in its idiomatic best way.

A :class:`Workload` maps each client that has an equivalent API to the
function that does the job (a client without one shows "n/a"), names the
parent-side set-up and check, and carries the targets, each stated as what it
is compared against. The registry is rebuilt in every child process, so the
functions are plain module functions (``functools.partial`` for options) and
every client library is imported inside them: natsio only exists on 3.13+.
"""

from __future__ import annotations

from functools import partial

from jsbench import batch, core, direct, js, js_publish, kv, natsc, obj, pcg, raw, threads
from jsbench.js_rows import js_rows
from jsbench.row import (  # the row's types, re-exported
    AHEAD_OF_NATSIO,
    CLIENTS,
    JSCLIENT,
    NATS_PY,
    NATSC,
    NATSC_ROUND_TRIP,
    NATSC_THROUGHPUT,
    NATSIO,
    PEERS,
    RAW,
    CheckFn,
    HookFn,
    Target,
    WorkFn,
    Workload,
)
from jsbench.scaling_rows import scaling_workloads
from jsbench.svc_rows import svc_rows

__all__ = [
    "AHEAD_OF_NATSIO",
    "CLIENTS",
    "CheckFn",
    "HookFn",
    "JSCLIENT",
    "NATSC",
    "NATSIO",
    "NATS_PY",
    "PEERS",
    "RAW",
    "Target",
    "WorkFn",
    "Workload",
    "by_name",
    "workloads",
]


def _core() -> list[Workload]:
    out = []
    publish = {
        JSCLIENT: core.js_publish,
        NATS_PY: core.py_publish,
        NATSIO: core.nio_publish,
        RAW: raw.publish,
        NATSC: natsc.publish,
    }
    # Full counts: at least a second of jsclient's publishing each, so that
    # rounds agree. Quick runs keep counts of a fraction of a second: fewer
    # messages would time mostly connection start-up.
    for size, n, quick in (
        (16, 8_000_000, 200_000),
        (1024, 2_500_000, 100_000),
        (4096, 900_000, 50_000),
        (65536, 30_000, 5_000),
    ):
        label = f"{size // 1024} KiB" if size >= 1024 else f"{size} B"
        out.append(
            Workload(
                f"core-publish-{label.replace(' ', '')}",
                f"core publish {label} ({n:,}; quick {quick:,}), then flush: "
                "time until the server has them",
                publish,
                n,
                quick,
                size,
                targets=(Target(RAW, 0.70), NATSC_THROUGHPUT),
            )
        )
    out.append(
        Workload(
            "core-publish-4KiB-100k",
            "core publish 4 KiB (100,000), then flush: peak RSS growth (target < 64 MB)",
            publish,
            100_000,
            100_000,
            4096,
            targets=(Target(RAW, 0.70), NATSC_THROUGHPUT),
            rss_growth_mb=64.0,
        )
    )
    for mode, target, py_mode, how in (
        ("next_msg", 10.0, "next_msg", "next_msg"),
        ("iter", 10.0, "next_msg", "iteration (nats-py: next_msg; natsio: async for)"),
        ("callback", 3.0, "callback", "callback"),
    ):
        fns: dict[str, WorkFn] = {
            JSCLIENT: partial(core.js_receive, mode=mode),
            NATS_PY: partial(core.py_receive, mode=py_mode),
            NATSIO: partial(core.nio_receive, mode=mode),
        }
        targets: tuple[Target, ...] = (Target(NATS_PY, target),)
        if mode != "iter":  # libnats has no iterator
            fns[NATSC] = partial(natsc.receive, mode=mode)
            targets = (*targets, NATSC_THROUGHPUT)
        out.append(
            Workload(
                f"core-receive-{mode}",
                f"core receive 16 B via {how}, external publisher with a credit window",
                fns,
                1_500_000,
                20_000,
                16,
                targets=targets,
            )
        )
    out.append(
        Workload(
            "core-request",
            "request, sequential, 16 B, against the echo peer process (raw-socket responder)",
            {
                JSCLIENT: core.js_request,
                NATS_PY: core.py_request,
                NATSIO: core.nio_request,
                RAW: raw.request,
                NATSC: natsc.request,
            },
            10_000,
            2_000,
            16,
            latency=True,
            targets=(Target(RAW, 0.85), NATSC_ROUND_TRIP),
            echo=True,
        )
    )
    return out


def _kv() -> list[Workload]:
    P = partial
    return [
        Workload(
            "kv-get",
            f"Key-Value get, one at a time, over {kv.KEYS:,} keys (direct get); "
            "raw: the direct-get round trip, reply headers parsed",
            {
                JSCLIENT: kv.js_get,
                NATS_PY: kv.py_get,
                NATSIO: kv.nio_get,
                RAW: P(raw.kv_get, bucket=kv.GET_BUCKET.encode(), keys=kv.KEYS),
            },
            10_000,
            2_000,
            latency=True,
            targets=(Target(RAW, 0.85), Target(NATS_PY, 1.0)),
            setup=kv.setup_get,
        ),
        Workload(
            "kv-put",
            f"Key-Value put, one at a time, over {kv.KEYS:,} keys (history 1, file); "
            "raw: a JetStream publish to $KV.<bucket>.<key>, PubAck decoded",
            {
                JSCLIENT: kv.js_put,
                NATS_PY: kv.py_put,
                NATSIO: kv.nio_put,
                RAW: P(raw.kv_put, bucket=kv.PUT_BUCKET.encode(), keys=kv.KEYS),
            },
            10_000,
            2_000,
            latency=True,
            targets=(Target(RAW, 0.85), Target(NATS_PY, 1.0)),
            setup=kv.setup_put,
            check=kv.check_put,
        ),
        Workload(
            "kv-watch-initial",
            "watch('>') until the None after the initial values, a bucket of n keys "
            "(nats-py: watchall(), async for); peak RSS should not grow with n",
            {
                JSCLIENT: kv.js_watch_initial,
                NATS_PY: kv.py_watch_initial,
                NATSIO: kv.nio_watch_initial,
            },
            100_000,
            10_000,
            targets=(Target(NATS_PY, 5.0), Target(NATSIO, 2.0)),
            setup=kv.setup_scan,
        ),
        Workload(
            "kv-keys",
            "keys() as a list, the kv-watch-initial bucket of n keys",
            {JSCLIENT: kv.js_keys, NATS_PY: kv.py_keys, NATSIO: kv.nio_keys},
            100_000,
            10_000,
            targets=(Target(NATS_PY, 5.0),),
            setup=kv.setup_scan,
        ),
    ]


def _obj() -> list[Workload]:
    chunk = 128 * 1024
    return [
        Workload(
            "obj-put",
            "Object store put of a 64 MiB object from memory (n chunks of 128 KiB, file); "
            "raw: core publish of the same bytes",
            {JSCLIENT: obj.js_put, NATS_PY: obj.py_put, NATSIO: obj.nio_put, RAW: obj.raw_put},
            512,
            64,
            chunk,
            targets=(Target(NATS_PY, 5.0), Target(RAW, 0.5)),
            setup=obj.setup_put,
        ),
        Workload(
            "obj-get",
            "Object store get of a 64 MiB object into memory, digest checked "
            "(nats-py: get(writeinto=BytesIO)); raw: core receive of the same bytes",
            {JSCLIENT: obj.js_get, NATS_PY: obj.py_get, NATSIO: obj.nio_get, RAW: obj.raw_get},
            512,
            64,
            chunk,
            targets=(Target(NATS_PY, 5.0), Target(RAW, 0.5)),
            setup=obj.setup_get,
        ),
        Workload(
            "obj-file-1GiB",
            "Object store put_file then get_file of a 1 GiB file: peak RSS growth (target < 32 MB)",
            {JSCLIENT: obj.js_file},
            8192,
            512,
            chunk,
            setup=obj.setup_file,
            check=obj.check_file,
            rss_growth_mb=32.0,
        ),
    ]


def _batch() -> list[Workload]:
    setup, check = batch.setup_batch_publish, js.check_published
    return [
        Workload(
            "js-atomic-batch",
            f"atomic batches of {batch.BATCH}, the last message commits, each batch's "
            "PubAck awaited; nats-py: publish_async of the same bytes "
            "(no batch API); compare js-publish-async",
            {JSCLIENT: batch.js_atomic_batch, NATS_PY: js_publish.py_publish_async},
            50_000,
            10_000,
            setup=setup,
            check=check,
        ),
        Workload(
            "js-fast-ingest",
            "one fast-ingest batch (server-paced flow control, no ack per message) "
            "until its PubAck; nats-py: publish_async of the same bytes (no batch API); "
            "compare js-publish-async",
            {JSCLIENT: batch.js_fast_ingest, NATS_PY: js_publish.py_publish_async},
            50_000,
            10_000,
            setup=setup,
            check=check,
        ),
    ]


def _direct() -> list[Workload]:
    return [
        Workload(
            "direct-get-batch",
            "read a range of n messages (file stream) by batched direct get, pages of "
            f"{direct.PAGE:,}: jsclient get_batch; nats-py: orbit.py's jetstreamext.get_batch; "
            "the same range read by a consumer fetch is js-fetch-noack (both clients)",
            {JSCLIENT: direct.js_get_batch, NATS_PY: direct.py_get_batch},
            200_000,
            20_000,
            targets=(Target(NATS_PY, 2.0),),
            setup=direct.setup_direct,
        ),
    ]


def _threads() -> list[Workload]:
    """User code in threads: the rows to compare GIL on and off in a free-threaded build."""
    P = partial
    out = []
    for k in (2, 4):
        out.append(
            Workload(
                f"js-consume-threads-{k}",
                f"consume + {k} handler threads, each message ~50 µs of pure-Python work "
                f"then ack: jsclient's consume() callback feeds the threads through a queue "
                f"of {k}; nats-py fetch({js.BATCH}) and natsio consume() feed {k} tasks "
                f"that run the work with run_in_executor on a ThreadPoolExecutor({k})",
                {
                    JSCLIENT: P(threads.js_consume_threads, threads=k),
                    NATS_PY: P(threads.py_consume_threads, threads=k),
                    NATSIO: P(threads.nio_consume_threads, threads=k),
                },
                200_000,
                20_000,
                setup=js.setup_consume,
            )
        )
    for k in (2, 4):
        out.append(
            Workload(
                f"js-publish-threads-{k}",
                f"{k} threads publish_async on one connection (one context, window "
                f"{js.WINDOW}) until the last ack; nats-py, natsio: {k} tasks on one event "
                "loop and connection (an asyncio connection belongs to its loop's thread); "
                "raw: one thread, the same window",
                {
                    JSCLIENT: P(threads.js_publish_threads, threads=k),
                    NATS_PY: P(threads.py_publish_threads, threads=k),
                    NATSIO: P(threads.nio_publish_threads, threads=k),
                    RAW: P(raw.js_publish_pipelined, window=js.WINDOW),
                },
                50_000,
                10_000,
                setup=js.setup_publish,
                check=js.check_published,
            )
        )
    return out


def _pcgroups() -> list[Workload]:
    """An elastic partitioned consumer group of two members against one consumer (jsclient)."""
    what = (
        f"messages of {pcg.KEYS} keys from the group's work-queue stream ({pcg.PARTITIONS} "
        "partitions), acked, each key's order checked"
    )
    return [
        Workload(
            "pcgroup-1-consumer",
            f"one consumer, consume(): {what}",
            {JSCLIENT: pcg.js_one_consumer},
            100_000,
            10_000,
            setup=pcg.setup,
        ),
        Workload(
            "pcgroup-elastic-2",
            f"an elastic group of 2 members, each on its own thread, one connection: {what}",
            {JSCLIENT: partial(pcg.js_elastic, members=2)},
            100_000,
            10_000,
            setup=pcg.setup,
        ),
    ]


def workloads() -> list[Workload]:
    """Every workload, in report order."""
    return (
        _core()
        + svc_rows()
        + js_rows()
        + _kv()
        + _obj()
        + _batch()
        + _direct()
        + _threads()
        + _pcgroups()
    )


def by_name(name: str) -> Workload:
    for w in workloads() + scaling_workloads():
        if w.name == name:
            return w
    raise KeyError(f"no workload named {name!r}")
