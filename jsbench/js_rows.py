"""The JetStream rows of the benchmark: publish (sync, async, the managed
publisher) and consume (fetch, consume, messages, ordered, push, legacy pull).

Split from :mod:`jsbench.workloads`, which lists every row in report order.
"""

from __future__ import annotations

from functools import partial

from jsbench import js, js_publish, natsc, raw
from jsbench.row import (
    JSCLIENT,
    NATS_PY,
    NATSC,
    NATSC_FETCH,
    NATSC_ROUND_TRIP,
    NATSC_THROUGHPUT,
    NATSIO,
    RAW,
    Target,
    Workload,
)


def js_rows() -> list[Workload]:
    P = partial
    pub_setup, pub_check, con_setup = js.setup_publish, js.check_published, js.setup_consume
    return [
        Workload(
            "js-publish-sync",
            "JetStream publish, one at a time, wait for each PubAck (memory stream)",
            {
                JSCLIENT: js_publish.js_publish_sync,
                NATS_PY: js_publish.py_publish_sync,
                NATSIO: js_publish.nio_publish_sync,
                RAW: raw.js_publish_sync,
                NATSC: natsc.js_publish_sync,
            },
            15_000,
            2_000,
            latency=True,
            targets=(Target(RAW, 0.85), NATSC_ROUND_TRIP),
            setup=pub_setup,
            check=pub_check,
        ),
        Workload(
            "js-publish-async",
            f"publish_async, window {js.WINDOW} for every client, until the last ack",
            {
                JSCLIENT: js_publish.js_publish_async,
                NATS_PY: js_publish.py_publish_async,
                NATSIO: js_publish.nio_publish_async,
                RAW: P(raw.js_publish_pipelined, window=js.WINDOW),
                NATSC: natsc.js_publish_async,
            },
            300_000,
            10_000,
            targets=(Target(NATS_PY, 3.0), NATSC_THROUGHPUT),
            setup=pub_setup,
            check=pub_check,
        ),
        Workload(
            "js-publish-ceiling",
            "server ceiling: core publishes with replies, window 1000, acks counted not "
            "decoded (jsclient core API; raw socket) vs the asyncio clients' publish_async",
            {
                JSCLIENT: js_publish.js_publish_ceiling,
                NATS_PY: js_publish.py_publish_async,
                NATSIO: js_publish.nio_publish_async,
                RAW: P(raw.js_publish_pipelined, window=1000, decode=False),
            },
            50_000,
            10_000,
            setup=pub_setup,
            check=pub_check,
        ),
        Workload(
            "js-publisher",
            "managed Publisher(max_in_flight=1000) vs publish_async with window 1000",
            {
                JSCLIENT: js_publish.js_publisher,
                NATS_PY: P(js_publish.py_publish_async, window=1000),
                NATSIO: P(js_publish.nio_publish_async, window=1000),
                RAW: P(raw.js_publish_pipelined, window=1000),
            },
            100_000,
            10_000,
            targets=(Target(NATS_PY, 3.0),),
            setup=pub_setup,
            check=pub_check,
        ),
        Workload(
            "js-publisher-default",
            "managed Publisher, default settings (max_in_flight 50) vs publish_async window 50",
            {
                JSCLIENT: P(js_publish.js_publisher, window=50),
                NATS_PY: P(js_publish.py_publish_async, window=50),
                NATSIO: P(js_publish.nio_publish_async, window=50),
                RAW: P(raw.js_publish_pipelined, window=50),
            },
            100_000,
            10_000,
            targets=(Target(NATS_PY, 3.0),),
            setup=pub_setup,
            check=pub_check,
        ),
        Workload(
            "js-fetch-ack",
            f"fetch({js.BATCH}) + ack each (file stream)",
            {
                JSCLIENT: js.js_fetch,
                NATS_PY: js.py_fetch,
                NATSIO: js.nio_fetch,
                NATSC: natsc.js_fetch,
            },
            300_000,
            20_000,
            targets=(Target(NATS_PY, 5.0), Target(NATSIO, 2.5), NATSC_FETCH),
            setup=con_setup,
        ),
        Workload(
            "js-pull-subscribe-ack",
            f"legacy pull_subscribe().fetch({js.BATCH}) + ack each (file stream)",
            {JSCLIENT: js.js_pull_subscribe, NATS_PY: js.py_fetch},
            200_000,
            20_000,
            targets=(Target(NATS_PY, 5.0),),
            setup=con_setup,
        ),
        Workload(
            "js-consume-ack",
            f"consume() + ack (max_messages {js.BATCH}); nats-py: fetch({js.BATCH}) + ack",
            {JSCLIENT: js.js_consume, NATS_PY: js.py_fetch, NATSIO: js.nio_consume},
            200_000,
            20_000,
            targets=(Target(NATS_PY, 5.0), Target(NATSIO, 2.5)),
            setup=con_setup,
        ),
        Workload(
            "js-messages-ack",
            f"messages() + ack (max_messages {js.BATCH}); nats-py: fetch + ack; "
            "natsio: consume() iterator",
            {JSCLIENT: js.js_messages, NATS_PY: js.py_fetch, NATSIO: js.nio_consume},
            200_000,
            20_000,
            targets=(Target(NATS_PY, 5.0),),
            setup=con_setup,
        ),
        Workload(
            "js-fetch-noack",
            f"fetch({js.BATCH}), ack policy none",
            {
                JSCLIENT: P(js.js_fetch, ack=False),
                NATS_PY: P(js.py_fetch, ack=False),
                NATSIO: P(js.nio_fetch, ack=False),
            },
            200_000,
            20_000,
            setup=con_setup,
        ),
        Workload(
            "js-consume-noack",
            "consume(), ack policy none; nats-py: fetch, no ack",
            {
                JSCLIENT: P(js.js_consume, ack=False),
                NATS_PY: P(js.py_fetch, ack=False),
                NATSIO: P(js.nio_consume, ack=False),
            },
            200_000,
            20_000,
            setup=con_setup,
        ),
        Workload(
            "js-ordered",
            "ordered consumer; nats-py: ordered push subscription",
            {JSCLIENT: js.js_ordered, NATS_PY: js.py_ordered, NATSIO: js.nio_ordered},
            100_000,
            20_000,
            setup=con_setup,
        ),
        Workload(
            "js-push-ack",
            "push subscribe (durable) + ack each, read by iteration (nats-py: next_msg)",
            {JSCLIENT: js.js_push, NATS_PY: js.py_push},
            200_000,
            20_000,
            targets=(Target(NATS_PY, 5.0),),
            setup=con_setup,
        ),
        Workload(
            "js-push-ack-callback",
            "push subscribe (durable), callback + ack (jsclient acks after it returns)",
            {JSCLIENT: P(js.js_push, mode="callback"), NATS_PY: P(js.py_push, mode="callback")},
            200_000,
            20_000,
            targets=(Target(NATS_PY, 5.0),),
            setup=con_setup,
        ),
        Workload(
            "js-ordered-push",
            "ordered push subscription",
            {JSCLIENT: js.js_ordered_push, NATS_PY: js.py_ordered},
            200_000,
            20_000,
            targets=(Target(NATS_PY, 5.0),),
            setup=con_setup,
        ),
    ]
