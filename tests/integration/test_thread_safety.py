"""Many threads on one connection, with the GIL handed over as often as it can be.

``sys.setswitchinterval(1e-6)`` makes CPython switch threads at nearly every
point it may, so any check-then-act on shared state that only the GIL's
timing kept atomic shows up as a lost, doubled or mixed-up message. Each
test runs publishers, consumers that ack, requesters and callbacks side by
side, and checks what a user sees: every message stored and consumed exactly
once, every reply the answer to its own request, every sid and reply token
unique, every thread done.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jsclient
from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream.context import JetStream

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def busy_gil() -> Iterator[None]:
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def _run(targets: list[tuple[str, Callable[[], None]]], timeout: float) -> list[BaseException]:
    """Run each target on its own named thread; the errors they raised (none left running)."""
    failures: list[BaseException] = []
    lock = threading.Lock()

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported to the test, not lost on the thread
                with lock:
                    failures.append(exc)

        return run

    threads = [threading.Thread(target=wrap(fn), name=name) for name, fn in targets]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    assert not stuck, f"threads still running after {timeout} s: {stuck}"
    return failures


def test_publish_consume_request_callbacks_on_one_connection(nc: Client, busy_gil: None) -> None:
    js: JetStream = nc.jetstream(publish_async_max_pending=500, publish_async_timeout=60.0)
    js.create_stream(name="TS", subjects=["ts.>"], storage="memory")
    js.create_consumer("TS", durable_name="work", ack_policy="explicit", ack_wait=60.0)
    publishers, per_publisher = 4, 400
    total = publishers * per_publisher

    # A responder (a callback on the library's dispatcher) and requesters.
    nc.subscribe("svc.echo", cb=lambda m: m.respond(b"re:" + m.data))
    # A core subscription whose callback counts what a core publisher sends.
    core_seen: list[bytes] = []
    core_lock = threading.Lock()

    def on_core(m: jsclient.Msg) -> None:
        with core_lock:
            core_seen.append(m.data)

    nc.subscribe("core.x", cb=on_core)
    nc.flush(timeout=5.0)

    acks: list[Any] = []
    acks_lock = threading.Lock()
    consumed: list[int] = []
    consumed_lock = threading.Lock()
    replies_ok = [0]
    sids: list[int] = []
    sids_lock = threading.Lock()

    def publisher(k: int) -> Callable[[], None]:
        def run() -> None:
            futs = []
            i = 0
            while i < per_publisher:
                try:
                    futs.append(js.publish_async("ts.job", b"%d-%d" % (k, i)))
                except errors.TooManyStalledMsgsError:
                    continue  # back-pressure, as documented: publish it again
                i += 1
            got = [f.result(60.0) for f in futs]
            with acks_lock:
                acks.extend(got)

        return run

    def consumer() -> None:
        c = js.consumer("TS", "work")
        with c.messages(max_messages=100, expires=5.0) as it:
            while True:
                with consumed_lock:
                    if len(consumed) >= total:
                        return
                try:
                    msg = it.next(timeout=2.0)
                except errors.TimeoutError:
                    continue
                msg.ack()
                with consumed_lock:
                    consumed.append(msg.metadata.sequence.stream)

    def requester(k: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(150):
                body = b"%d:%d" % (k, i)
                reply = nc.request("svc.echo", body, timeout=20.0)
                assert reply.data == b"re:" + body, (reply.data, body)
                with acks_lock:
                    replies_ok[0] += 1

        return run

    def core_publisher() -> None:
        for i in range(2000):
            nc.publish("core.x", b"%d" % i)

    def churn() -> None:
        # Subscriptions made and dropped while everything else runs: sids stay unique.
        for i in range(200):
            sub = nc.subscribe(f"churn.{i}")
            with sids_lock:
                sids.append(sub.sid)
            sub.unsubscribe()

    targets: list[tuple[str, Callable[[], None]]] = [
        (f"ts-pub-{k}", publisher(k)) for k in range(publishers)
    ]
    targets += [(f"ts-consume-{k}", consumer) for k in range(2)]
    targets += [(f"ts-request-{k}", requester(k)) for k in range(3)]
    targets += [("ts-core-pub", core_publisher), ("ts-churn", churn)]
    failures = _run(targets, timeout=150.0)
    assert not failures, failures[:3]

    # Every publish acked once, with a stream sequence of its own, all stored.
    seqs = sorted(a.seq for a in acks)
    assert seqs == list(range(1, total + 1))
    assert js.stream("TS").info().state.messages == total
    # Every stored message consumed once, and acked (nothing left to redeliver).
    assert sorted(consumed) == list(range(1, total + 1))
    info = js.consumer("TS", "work").info()
    assert info.num_ack_pending == 0 and info.num_pending == 0
    # Every request answered with its own reply; every core message seen once.
    assert replies_ok[0] == 3 * 150
    nc.flush(timeout=5.0)
    deadline = time.monotonic() + 10
    while len(core_seen) < 2000 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(int(d) for d in core_seen) == list(range(2000))
    assert len(set(sids)) == len(sids) == 200


def test_managed_publisher_and_consume_callbacks(nc: Client, busy_gil: None) -> None:
    """The managed publisher fed by several threads, its runners on threads of its
    own; a consume() callback acks. Flight ids (Nats-Msg-Id) never repeat."""
    js: JetStream = nc.jetstream()
    js.create_stream(name="TP", subjects=["tp.>"], storage="memory")
    c = js.create_consumer("TP", durable_name="cb", ack_policy="explicit", ack_wait=60.0)
    feeders, per_feeder = 4, 300
    total = feeders * per_feeder
    got: list[bytes] = []
    got_lock = threading.Lock()
    done = threading.Event()

    def on_msg(m: jsclient.Msg) -> None:
        m.ack()
        with got_lock:
            got.append(m.data)
            if len(got) >= total:
                done.set()

    cc = c.consume(on_msg, max_messages=200)
    flights: list[Any] = []
    flights_lock = threading.Lock()
    with jsclient.Publisher(js, max_in_flight=200, wait_timeout=60.0) as pub:

        def feeder(k: int) -> Callable[[], None]:
            def run() -> None:
                mine = [pub.publish_async("tp.x", b"%d-%d" % (k, i)) for i in range(per_feeder)]
                with flights_lock:
                    flights.extend(mine)

            return run

        failures = _run([(f"tp-feed-{k}", feeder(k)) for k in range(feeders)], timeout=120.0)
        assert not failures, failures[:3]
        pub.drain(timeout=120.0)
    assert done.wait(60.0), f"consumed {len(got)} of {total}"
    cc.stop()
    assert cc.wait(10.0)
    ids = [f.result(0).id for f in flights]
    assert len(set(ids)) == len(ids) == total
    assert sorted(got) == sorted(
        b"%d-%d" % (k, i) for k in range(feeders) for i in range(per_feeder)
    )
    assert js.stream("TP").info().state.messages == total


def test_threads_taking_from_one_subscription_leave_nothing_counted_pending(
    nc: Client, busy_gil: None
) -> None:
    # Four threads take from one core subscription: each message goes to one of
    # them, and the pending counts (what the reader counted in, less what was
    # handed out) come back to zero, so the slow-consumer limits stay exact.
    sub = nc.subscribe("take.x")
    total = 4000
    got: list[bytes] = []
    got_lock = threading.Lock()

    def taker() -> None:
        while True:
            with got_lock:
                if len(got) >= total:
                    return
            try:
                msg = sub.next_msg(timeout=0.2)
            except errors.TimeoutError:
                continue
            with got_lock:
                got.append(msg.data)

    def publisher() -> None:
        for i in range(total):
            nc.publish("take.x", b"%d" % i)

    failures = _run([("take-pub", publisher)] + [(f"take-{k}", taker) for k in range(4)], 120.0)
    assert not failures, failures[:3]
    assert sorted(int(d) for d in got) == list(range(total))
    assert sub.pending_msgs == 0
    assert sub.pending_bytes == 0
