"""The transport through kombu's own API, in process: QoS, settling, keep-alive, DLQ, fanout.

No worker process here: a kombu ``Connection`` on a real server, so each
mapping the docs promise is checked where it is made (``prefetch_count``
bounds what is pulled, requeue is ``NAK``, reject is ``TERM``, a held message
is kept alive past ``ack_wait``, ``max_deliver`` then the dead-letter
subject, broadcast over core NATS, the real error classes, registration).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kombu
import pytest
from conftest import eventually
from kombu import Connection, Exchange, Queue

import jsclient
import jsclient.contrib.celery
from jsclient import errors
from jsclient.contrib.celery.transport import Transport
from jsclient.server import NatsServer

pytestmark = pytest.mark.timeout(60)


def _conn(server: NatsServer, **options: Any) -> Connection:
    return Connection(server.url.replace("nats://", "jetstream://"), transport_options=options)


@pytest.fixture
def conn(server: NatsServer) -> Iterator[Connection]:
    c = _conn(server, ack_wait=1.0)
    try:
        yield c
    finally:
        c.release()


def _fill(conn: Connection, queue: Queue, n: int) -> None:
    with conn.Producer() as p:
        for i in range(n):
            p.publish(
                {"i": i}, exchange=queue.exchange, routing_key=queue.routing_key, declare=[queue]
            )


def _drain(conn: Connection, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn.drain_events(timeout=0.2)
        except TimeoutError:
            pass


def test_prefetch_count_bounds_what_is_pulled_and_acks_free_it(conn: Connection) -> None:
    q = Queue("t-qos", Exchange("t-qos"), routing_key="t-qos")
    _fill(conn, q, 10)
    got: list[Any] = []
    auto_ack = []

    def on_message(body: Any, m: Any) -> None:
        got.append(m)
        if auto_ack:
            m.ack()

    ch = conn.channel()
    ch.basic_qos(0, 3, False)
    with kombu.Consumer(ch, [q], callbacks=[on_message]):
        _drain(conn, 1.0)
        assert len(got) == 3  # none acked: no more pulled
        got[0].ack()
        _drain(conn, 1.0)
        assert len(got) == 4
        auto_ack.append(True)
        for m in got[1:]:
            m.ack()
        eventually(lambda: _drain(conn, 0.3) or len(got) == 10, 10, "the rest")
    ch.close()
    assert q(conn.default_channel).queue_declare(passive=True).message_count == 0


def test_requeue_is_nak_reject_is_term_and_held_messages_stay_past_ack_wait(
    conn: Connection,
) -> None:
    q = Queue("t-settle", Exchange("t-settle"), routing_key="t-settle")
    _fill(conn, q, 2)
    seen: list[tuple[int, Any]] = []
    ch = conn.channel()
    ch.basic_qos(0, 10, False)
    with kombu.Consumer(ch, [q], callbacks=[lambda b, m: seen.append((b["i"], m))]):
        eventually(lambda: _drain(conn, 0.2) or len(seen) == 2, 10, "two messages")
        time.sleep(2.5)  # ack_wait is 1 s: held, so kept alive, not redelivered
        _drain(conn, 0.3)
        assert len(seen) == 2
        by_i = dict(seen)
        by_i[0].requeue()  # NAK: back at once
        by_i[1].reject()  # TERM: gone
        eventually(lambda: _drain(conn, 0.2) or len(seen) == 3, 10, "the requeued one")
        assert seen[2][0] == 0 and seen[2][1].delivery_info is not None
        seen[2][1].ack()
        _drain(conn, 1.5)
        assert len(seen) == 3
    ch.close()


def test_held_messages_are_nakd_when_the_connection_closes(server: NatsServer) -> None:
    q = Queue("t-close", Exchange("t-close"), routing_key="t-close")
    first = _conn(server, ack_wait=30.0)
    _fill(first, q, 3)
    got: list[Any] = []
    ch = first.channel()
    ch.basic_qos(0, 10, False)
    kombu.Consumer(ch, [q], callbacks=[lambda b, m: got.append(b)]).consume()
    eventually(lambda: _drain(first, 0.2) or len(got) == 3, 10, "three messages")
    first.release()  # held, not acked: nak'd, so another worker gets them now, not in 30 s
    second = _conn(server, ack_wait=30.0)
    again: list[Any] = []
    ch2 = second.channel()
    with kombu.Consumer(ch2, [q], callbacks=[lambda b, m: (again.append(b), m.ack())]):
        eventually(lambda: _drain(second, 0.2) or len(again) == 3, 5, "the redeliveries")
    second.release()


def test_past_max_deliver_to_the_dead_letter_subject(server: NatsServer) -> None:
    c = _conn(server, ack_wait=5.0, max_deliver=2, stream_prefix="dl")
    q = Queue("poison", Exchange("poison"), routing_key="poison")
    _fill(c, q, 1)
    deliveries: list[int] = []
    ch = c.channel()
    with kombu.Consumer(ch, [q], callbacks=[lambda b, m: (deliveries.append(1), m.requeue())]):
        _drain(c, 2.0)
    c.release()
    assert len(deliveries) == 2
    with jsclient.connect(server.url) as nc:
        js = nc.jetstream()
        msg = js.stream("dl_dlq").get_msg(last_by_subject="dl.dlq.poison")
        assert msg.headers is not None and msg.headers["Celery-Queue"] == "poison"
        assert js.stream("dl_poison").info().state.messages == 0


def test_broadcast_reaches_every_connection_over_core_nats(server: NatsServer) -> None:
    ex = Exchange("t-bcast", type="fanout", durable=False)
    conns = [_conn(server) for _ in range(2)]
    got: list[list[Any]] = [[], []]
    try:
        for k, c in enumerate(conns):
            q = Queue(f"t-bcast-{k}", ex, durable=False, auto_delete=True)
            kombu.Consumer(
                c.channel(), [q], no_ack=True, callbacks=[lambda b, m, k=k: got[k].append(b)]
            ).consume()
        with conns[0].Producer() as p:
            p.publish({"hello": 1}, exchange=ex, declare=[ex])
        for k, c in enumerate(conns):
            eventually(lambda c=c, k=k: _drain(c, 0.2) or got[k], 5, f"connection {k}")
        assert got == [[{"hello": 1}], [{"hello": 1}]]
        with jsclient.connect(server.url) as nc:  # no stream for broadcast queues
            assert not [n for n in nc.jetstream().stream_names() if "bcast" in n]
    finally:
        for c in conns:
            c.release()


def test_errors_are_jsclients_own_and_the_class_path_selects_it(server: NatsServer) -> None:
    assert errors.ConnectionClosedError in Transport.connection_errors
    assert errors.TimeoutError in Transport.connection_errors
    assert errors.APIError in Transport.channel_errors
    assert jsclient.contrib.celery.SCHEME == "jetstream"
    from kombu.transport import TRANSPORT_ALIASES

    assert TRANSPORT_ALIASES["jetstream"] == "jsclient.contrib.celery.transport:Transport"
    with Connection(server.url, transport="jsclient.contrib.celery.transport:Transport") as c:
        c.connect()
        assert isinstance(c.transport, Transport)
        with c.SimpleQueue("t-path") as sq:
            sq.put({"x": 1})
            msg = sq.get(timeout=5)
            assert msg.payload == {"x": 1}
            msg.ack()
    dead = Connection("jetstream://127.0.0.1:1", connect_timeout=0.5)
    with pytest.raises(dead.connection_errors):
        dead.connect()


def test_celery_selects_both_by_class_path(server: NatsServer) -> None:
    from celery import Celery
    from celery.contrib.testing.worker import start_worker

    app = Celery("bypath", set_as_current=False)
    app.conf.update(
        broker_url=server.url,  # nats://: no jetstream:// alias needed
        broker_transport="jsclient.contrib.celery.transport:Transport",
        result_backend="jsclient.contrib.celery.backend:Backend",
        result_backend_transport_options={"servers": server.url, "bucket": "bypath"},
    )

    @app.task(name="bypath.mul", shared=False)
    def mul(x: int, y: int) -> int:
        return x * y

    try:
        with start_worker(app, pool="threads", concurrency=1, perform_ping_check=False):
            assert mul.delay(6, 7).get(timeout=10) == 42
    finally:
        app.close()
        jsclient.contrib.celery.close_connections()
    with jsclient.connect(server.url) as nc:
        assert nc.jetstream().key_value("bypath").bucket == "bypath"
