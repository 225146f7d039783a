"""``@endpoint`` handlers hosted by ``manage.py jetstream_worker``, real Django and server.

- as a subprocess (``--endpoint billing``, endpoints only): a request gets the
  handler's reply, written with the ORM on the handler thread; discovery sees
  the service; SIGTERM answers the requests in hand and queued, exit 0;
- in process: stale database connections are closed around each request; a
  handler that raises answers 500 and is logged, the thread goes on;
  consumers and endpoints in one worker; the command's selection errors.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _js import eventually
from django.core.management import CommandError, call_command
from django.db import connection
from jsclient_testapp.models import Handled, Order
from test_django_worker import WorkerProcess, _run_worker

import jsclient
from jsclient.contrib.django import consumer, endpoint, get_connection, get_jetstream, registered
from jsclient.contrib.django.consumers import unregister as unregister_consumer
from jsclient.contrib.django.endpoints import registered_endpoints, select, unregister
from jsclient.contrib.django.worker import Worker, WorkerError
from jsclient.micro import Request, ServiceClient, ServiceError
from jsclient.msg import Msg
from jsclient.server import NatsServer


def test_worker_hosts_endpoint_request_discovery_and_graceful_stop(
    django_nats: NatsServer, spawn: Callable[..., WorkerProcess]
) -> None:
    Order.objects.all().delete()
    w = spawn("--endpoint", "billing", sleep=1.0)  # each request takes a second
    w.wait_running()
    nc = jsclient.connect(django_nats.url)
    try:
        # A request gets the handler's reply; the handler saved a row with the ORM.
        reply = ServiceError.check(nc.request("charge", b"book", timeout=15))
        pk = int(reply.data.split()[1])
        order = Order.objects.get(pk=pk)
        assert (order.item, order.status) == ("book", "charged")

        # Discovery sees it, as any ADR-32 client would.
        (info,) = ServiceClient(nc).info("billing", timeout=5, max_count=1)
        assert (info.name, info.version, info.description) == ("billing", "1.0.0", "test billing")
        (ep,) = info.endpoints
        assert (ep.name, ep.subject, ep.queue_group, ep.metadata) == (
            "charge",
            "charge",
            "q",
            {"unit": "cents"},
        )

        # Six requests for four threads: four in hand, two queued, then SIGTERM.
        replies: dict[str, bytes] = {}
        lock = threading.Lock()

        def on_reply(msg: Msg) -> None:
            with lock:
                replies[msg.subject] = msg.data

        nc.subscribe("test.replies.>", cb=on_reply)
        for i in range(6):
            nc.publish("charge", b"item-%d" % i, reply=f"test.replies.{i}")
        nc.flush()  # the server has routed them to the worker before it unsubscribes
        time.sleep(0.3)  # let the handler threads take four of them
        w.proc.send_signal(signal.SIGTERM)
        assert w.wait(30) == 0, w.log()
        eventually(lambda: len(replies) == 6, 10, "every request answered")
        assert all(data.startswith(b"charged ") for data in replies.values()), replies
        assert Order.objects.filter(item__startswith="item-").count() == 6
        log = w.log()
        assert "SIGTERM: stopping gracefully" in log and "jetstream worker stopped" in log
        assert "endpoint billing.charge: 7 request(s), 0 error(s)" in log
        assert "consumer jobs" not in log  # --endpoint selects endpoints only
    finally:
        nc.close()


@pytest.fixture
def local_endpoint() -> Iterator[Callable[..., Any]]:
    keys: list[str] = []

    def register(**kwargs: Any) -> Callable[[Callable[[Request], Any]], Any]:
        keys.append(f"{kwargs['service']}.{kwargs['name']}")
        return endpoint(**kwargs)

    try:
        yield register
    finally:
        for k in keys:
            unregister(k)


def test_stale_database_connections_are_closed_around_requests(
    django_nats: NatsServer, local_endpoint: Callable[..., Any]
) -> None:
    seen: list[tuple[Any, str]] = []

    @local_endpoint(service="dbsvc", version="0.1.0", name="count")
    def count(req: Request) -> None:
        n = Handled.objects.count()
        seen.append((connection.connection, threading.current_thread().name))
        # Make this thread's connection unusable, as a dropped database link
        # would: Django must not hand it to the next request.
        connection.errors_occurred = True
        connection.connection.close()
        req.respond(b"%d" % n)

    worker = Worker(endpoints=[select(["dbsvc.count"])[0][0]])
    t, status = _run_worker(worker)
    try:
        nc = get_connection()
        assert ServiceError.check(nc.request("count", timeout=10)).data.isdigit()
        assert ServiceError.check(nc.request("count", timeout=10)).data.isdigit()
    finally:
        worker.request_stop()
        t.join(30)
    assert status == [0]
    (a, name_a), (b, name_b) = seen
    assert a is not b  # a fresh connection for the second request
    assert name_a == name_b and name_a.startswith("jsclient-svc-dbsvc-count")


def test_handler_that_raises_answers_500_and_is_logged(
    django_nats: NatsServer,
    local_endpoint: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    @local_endpoint(service="flaky", version="1.0.0", name="maybe", subject="flaky.maybe")
    def maybe(req: Request) -> None:
        if req.data == b"boom":
            raise ValueError("no such account")
        req.respond(b"fine")

    caplog.set_level(logging.INFO, logger="jsclient")
    worker = Worker(endpoints=[select(["flaky.maybe"])[0][0]])
    t, status = _run_worker(worker)
    try:
        nc = get_connection()
        with pytest.raises(ServiceError) as err:
            ServiceError.check(nc.request("flaky.maybe", b"boom", timeout=10))
        assert err.value.code == 500 and "no such account" in err.value.description
        # The handler thread goes on.
        assert ServiceError.check(nc.request("flaky.maybe", b"x", timeout=10)).data == b"fine"
        (stats,) = ServiceClient(nc).stats("flaky", timeout=5, max_count=1)
        assert (stats.endpoints[0].num_requests, stats.endpoints[0].num_errors) == (2, 1)
    finally:
        worker.request_stop()
        t.join(30)
    assert status == [0]
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(failures) == 1 and failures[0].exc_info is not None
    assert "endpoint flaky.maybe: 2 request(s), 1 error(s)" in caplog.text


def test_consumers_and_endpoints_in_one_worker(
    django_nats: NatsServer, local_endpoint: Callable[..., Any]
) -> None:
    js = get_jetstream()
    js.create_stream(name="MIX", subjects=["mix.>"])
    handled: list[bytes] = []

    @consumer(stream="MIX", durable="mix")
    def on_msg(msg: Msg) -> None:
        handled.append(msg.data)

    @local_endpoint(service="mix", version="1.0.0", name="echo", queue_group=None)
    def echo(req: Request) -> None:
        req.respond(req.data)

    @local_endpoint(service="mix", version="1.0.0", name="upper", threads=2)
    def upper(req: Request) -> None:
        req.respond(req.data.upper())

    eps = {spec.key: spec for spec in select(["mix"])[0]}
    worker = Worker([registered()["mix"]], endpoints=[eps["mix.echo"], eps["mix.upper"]])
    t, status = _run_worker(worker)
    try:
        nc = get_connection()
        js.publish("mix.a", b"m")
        assert nc.request("echo", b"hi", timeout=10).data == b"hi"
        assert nc.request("upper", b"hi", timeout=10).data == b"HI"
        eventually(lambda: handled == [b"m"], 10, "the message")
        # Two endpoints of one name and version: one service.
        (info,) = ServiceClient(nc).info("mix", timeout=5, max_count=1)
        assert sorted((e.name, e.queue_group) for e in info.endpoints) == [
            ("echo", None),
            ("upper", "q"),
        ]
    finally:
        worker.request_stop()
        t.join(30)
        unregister_consumer("mix")
    assert status == [0]


def test_command_selection_and_errors(django_nats: NatsServer) -> None:
    with pytest.raises(CommandError, match="unknown endpoint"):
        call_command("jetstream_worker", endpoints=["nope"])
    # found in jsclient_testapp/endpoints.py
    assert "billing@1.0.0.charge" in registered_endpoints()
    with pytest.raises(CommandError, match="unknown endpoint"):
        call_command("jetstream_worker", endpoints=["billing.nope"])
    with pytest.raises(WorkerError, match="no consumers or endpoints"):
        Worker()
