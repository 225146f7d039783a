"""The rows of the thread-scaling table (``python -m jsbench --gil-scaling``): jsclient
alone, with 1, 2 and 4 threads; :mod:`jsbench.scaling` runs them with the GIL on and off.
"""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any

from jsbench import js, svc, threads
from jsbench.result import Result
from jsbench.row import JSCLIENT, Workload
from jsbench.threads import work

THREADS = (1, 2, 4)
_WAIT = 300.0


def js_service_cpu(url: str, n: int, size: int, threads: int = 1) -> Result:
    """A service whose ``threads`` handler threads each do the work per request; twice as
    many requester threads on the same connection keep every handler busy."""
    return svc.js_service(url, n, size, requesters=2 * threads, threads=threads, cpu=True)


def django_worker(url: str, n: int, size: int, threads: int = 1) -> Result:
    """``jetstream_worker --threads K`` in this process: a registered consumer on the bench's
    stream whose handler does the work; the rate is from start to the n-th handled message."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            INSTALLED_APPS=["jsclient.contrib.django"],
            DATABASES={},
            JSCLIENT={"servers": [url]},
            USE_TZ=True,
        )
        django.setup()
    from jsclient.contrib.django.connection import close_connection
    from jsclient.contrib.django.consumers import ConsumerSpec
    from jsclient.contrib.django.worker import Worker

    done = threading.Event()
    count = 0
    lock = threading.Lock()

    def handle(msg: Any) -> None:
        nonlocal count
        work(msg.data)
        with lock:
            count += 1
            if count == n:
                done.set()

    spec = ConsumerSpec(
        name="bench",
        handler=handle,
        stream=js.CON_STREAM,
        durable=f"d{time.monotonic_ns()}",
        max_messages=js.BATCH,
        threads=threads,
        config={"max_ack_pending": 20_000},
    )
    worker = Worker([spec], threads=threads)
    t0 = time.perf_counter()
    worker.start()

    def stop_when_done() -> None:
        done.wait(_WAIT)
        worker.request_stop()

    waiter = threading.Thread(target=stop_when_done, name="bench-stopper")
    waiter.start()
    try:
        status = worker.serve()
    finally:
        worker.request_stop()
        waiter.join(_WAIT)
        close_connection()
    dt = time.perf_counter() - t0
    if not done.is_set():
        raise RuntimeError(f"the worker handled {count} of {n} messages (exit status {status})")
    return Result(n / dt)


def scaling_workloads() -> list[Workload]:
    """The rows of the scaling table, jsclient only, in report order."""
    # (family, thread counts, function, n, quick n, set-up, check, description of k)
    families: list[tuple[str, tuple[int, ...], Any, int, int, Any, Any, Any]] = [
        (
            "consume",
            THREADS,
            threads.js_consume_threads,
            40_000,
            4_000,
            js.setup_consume,
            None,
            lambda k: f"consume() + {k} handler threads, ~50 µs of Python per message, then ack",
        ),
        (
            "publish",
            THREADS,
            threads.js_publish_threads,
            100_000,
            10_000,
            js.setup_publish,
            js.check_published,
            lambda k: f"{k} threads publish_async on one connection until the last ack",
        ),
        (
            "svc",
            THREADS,
            js_service_cpu,
            20_000,
            2_000,
            None,
            None,
            lambda k: (
                f"a service with {k} handler threads, ~50 µs of Python per request; "
                f"{2 * k} requester threads"
            ),
        ),
        (
            "django",
            (1, 2),
            django_worker,
            40_000,
            4_000,
            js.setup_consume,
            None,
            lambda k: f"the Django worker with --threads {k}, ~50 µs of Python per message",
        ),
    ]
    return [
        Workload(
            f"gil-{family}-{k}",
            describe(k),
            {JSCLIENT: partial(fn, threads=k)},
            n,
            quick_n,
            setup=setup,
            check=check,
        )
        for family, counts, fn, n, quick_n, setup, check, describe in families
        for k in counts
    ]
