"""The service (ADR-32) and request-many (ADR-47) rows of the benchmark.

Split from :mod:`jsbench.workloads`, which lists every row in report order;
the functions are in :mod:`jsbench.svc`.
"""

from __future__ import annotations

from functools import partial

from jsbench import svc
from jsbench.row import JSCLIENT, NATS_PY, NATSIO, Target, Workload


def svc_rows() -> list[Workload]:
    P = partial
    k, ms = svc.REQUESTERS, svc.IO_WAIT * 1000

    def io_row(name: str, py_mode: str, how: str, targets: tuple[Target, ...]) -> Workload:
        return Workload(
            name,
            f"service endpoint whose handler blocks {ms:g} ms (a database call), {k} "
            f"concurrent requesters on the service's connection: jsclient threads={k} "
            f"(requester threads); nats-py nats.micro, natsio micro: {k} tasks, {how}",
            {
                JSCLIENT: P(svc.js_service, io=True, requesters=k, threads=k),
                NATS_PY: P(svc.py_service, io=True, requesters=k, mode=py_mode),
                NATSIO: P(svc.nio_service, io=True, requesters=k, mode=py_mode),
            },
            10_000,
            2_000,
            targets=targets,
        )

    return [
        Workload(
            "svc-echo",
            "service echo endpoint, one requester, sequential requests, 16 B; the service "
            "runs in a process of its own, hosted by the requester's client library "
            "(jsclient: add_service, one handler thread; nats-py nats.micro, natsio micro: "
            "that process's event loop) and the measured process only sends requests, as "
            "a web process calls a worker's endpoints (CPU '+N peer': the service process)",
            {
                JSCLIENT: svc.js_remote_echo,
                NATS_PY: svc.py_remote_echo,
                NATSIO: svc.nio_remote_echo,
            },
            10_000,
            2_000,
            latency=True,
            targets=(Target(NATS_PY, 1.5),),
        ),
        Workload(
            "svc-echo-local",
            "service echo endpoint, one requester, sequential requests, 16 B, service and "
            "requester on one connection, as a worker that calls its own endpoints "
            "(jsclient: handler thread; nats-py nats.micro, natsio micro: the connection's "
            "event loop)",
            {JSCLIENT: svc.js_service, NATS_PY: svc.py_service, NATSIO: svc.nio_service},
            10_000,
            2_000,
            latency=True,
        ),
        io_row(
            "svc-io-8",
            "task",
            "the handler starts a task per request that awaits run_in_executor (default "
            f"executor: {k} threads), then replies: their best",
            (Target(NATS_PY, 1.0),),
        ),
        io_row(
            "svc-io-8-default",
            "blocking",
            "the handler blocks the event loop (their default: one handler at a time)",
            (Target(NATS_PY, 5.0),),
        ),
        io_row(
            "svc-io-8-executor",
            "executor",
            "the handler awaits run_in_executor (the loop stays free, but an endpoint "
            "runs one handler at a time)",
            (),
        ),
        Workload(
            "request-many-100",
            f"one request, {svc.RESPONDERS} replies (16 B) from the echo peer process, "
            f"msgs/s counts replies: jsclient request_many(max_count={svc.RESPONDERS}); "
            "natsio request_many(max_msgs); nats-py (none): new inbox subscription, "
            f"publish, next_msg {svc.RESPONDERS} times, unsubscribe",
            {
                JSCLIENT: svc.js_request_many,
                NATS_PY: svc.py_request_many,
                NATSIO: svc.nio_request_many,
            },
            200_000,
            20_000,
            targets=(Target(NATS_PY, 3.0),),
        ),
    ]
