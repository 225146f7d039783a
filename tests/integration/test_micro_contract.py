"""Services to the letter of api.md's "Details fixed" list (what a review reproduced).

A reply that cannot be sent is answered with a 500; a coroutine handler is
refused; an endpoint's statistics change together when its handler returns;
``add_endpoint`` racing ``stop()`` leaves no live endpoint; two versions of a
service may each have an endpoint of one name (Django's registry too).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from _js import wait_for

import jsclient
from jsclient import errors
from jsclient.micro import Request, ServiceError
from jsclient.testing import NatsServerFactory

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def peer(nats_server: Any) -> Any:
    with jsclient.connect(nats_server.url) as c:
        yield c


@pytest.mark.parametrize("why", ["too large", "bad header"])
def test_a_reply_that_cannot_be_sent_is_answered_500(
    nats_server_factory: NatsServerFactory, why: str
) -> None:
    srv = nats_server_factory(max_payload=4096)
    raised: list[BaseException] = []

    def handler(req: Request) -> None:
        try:
            if why == "too large":
                req.respond(b"x" * 10_000)
            else:
                req.respond(b"ok", headers={"X-Bad": "a\r\nb"})
        except errors.Error as exc:
            raised.append(exc)  # the handler learns why; the requester got a 500

    with jsclient.connect(srv.url) as nc, jsclient.connect(srv.url) as peer:
        svc = nc.add_service("big", "1.0.0")
        svc.add_endpoint("answer", handler)
        t0 = time.monotonic()
        reply = peer.request("answer", b"", timeout=5.0)
        assert time.monotonic() - t0 < 2.0  # answered, not waited out
        with pytest.raises(ServiceError) as ei:
            ServiceError.check(reply)
        assert ei.value.code == 500
        kind = "MaxPayloadError" if why == "too large" else "BadHeaderError"
        assert kind in ei.value.description
        assert wait_for(lambda: raised)  # raised to the handler after the 500 left
        assert [type(e).__name__ for e in raised] == [kind]
        assert wait_for(lambda: svc.stats().endpoints[0].num_requests == 1)
        st = svc.stats().endpoints[0]
        assert st.num_errors == 1 and st.last_error.startswith(f"500:{kind}")


def test_an_async_handler_is_refused(nc: jsclient.Client) -> None:
    svc = nc.add_service("asy", "1.0.0")

    async def handler(req: Request) -> None:
        req.respond(b"never")

    class Callable:
        async def __call__(self, req: Request) -> None:
            req.respond(b"never")

    for h in (handler, Callable()):
        with pytest.raises(TypeError, match="async def"):
            svc.add_endpoint("e", h)
    assert svc.info().endpoints == []
    svc.stop()


def test_stats_change_together_when_the_handler_returns(
    nc: jsclient.Client, peer: jsclient.Client
) -> None:
    release = threading.Event()

    def slow(req: Request) -> None:
        req.respond(b"ok")  # the reply leaves first...
        release.wait(5)  # ...the handler returns later

    svc = nc.add_service("tog", "1.0.0", threads=4)
    svc.add_endpoint("slow", slow)
    for _ in range(4):
        assert peer.request("slow", b"", timeout=5.0).data == b"ok"
    st = svc.stats().endpoints[0]
    assert (st.num_requests, st.processing_time, st.average_processing_time) == (0, 0, 0)
    svc.reset()
    release.set()
    assert wait_for(lambda: svc.stats().endpoints[0].num_requests == 4)
    st = svc.stats().endpoints[0]
    assert st.processing_time > 0 and st.average_processing_time == st.processing_time // 4
    svc.reset()
    st = svc.stats().endpoints[0]
    assert (st.num_requests, st.processing_time, st.num_errors) == (0, 0, 0)
    svc.stop()


def test_add_endpoint_racing_stop_leaves_no_live_endpoint(
    nc: jsclient.Client, peer: jsclient.Client
) -> None:
    for trial in range(30):
        svc = nc.add_service(f"race{trial}", "1.0.0")
        added: list[Any] = []
        start = threading.Barrier(2)

        def add(svc: Any = svc, trial: int = trial, start: Any = start, added: Any = added) -> None:
            start.wait(5)
            try:
                added.append(
                    svc.add_endpoint("e", lambda r: r.respond(b"up"), subject=f"r.{trial}")
                )
            except errors.Error:
                pass  # stopped first: refused

        t = threading.Thread(target=add)
        t.start()
        start.wait(5)
        time.sleep((trial % 10) * 0.0003)  # land the stop at every point of the add
        svc.stop()
        t.join(10)
        assert svc.stopped
        with pytest.raises(errors.NoRespondersError):
            peer.request(f"r.{trial}", b"", timeout=1.0)


def test_two_versions_may_share_an_endpoint_name(
    nc: jsclient.Client, peer: jsclient.Client
) -> None:
    v1 = nc.add_service("pay", "1.0.0", queue_group=None)
    v2 = nc.add_service("pay", "2.0.0", queue_group=None)
    v1.add_endpoint("charge", lambda r: r.respond(b"v1"), subject="pay.v1.charge")
    v2.add_endpoint("charge", lambda r: r.respond(b"v2"), subject="pay.v2.charge")
    assert peer.request("pay.v1.charge", b"", timeout=5).data == b"v1"
    assert peer.request("pay.v2.charge", b"", timeout=5).data == b"v2"
    v1.stop()
    v2.stop()


def test_an_endpoint_the_server_refuses_to_subscribe_raises(
    nats_server_factory: NatsServerFactory,
) -> None:
    srv = nats_server_factory(
        config='authorization { users = [ { user: "svc", password: "pw", '
        'permissions: { subscribe: { deny: ["forbidden.>"] } } } ] }'
    )
    reported: list[BaseException] = []
    url = srv.url.replace("nats://", "nats://svc:pw@")
    with jsclient.connect(url, error_cb=reported.append) as nc:
        svc = nc.add_service("perm", "1.0.0")
        with pytest.raises(errors.PermissionViolationError) as ei:
            svc.add_endpoint("nope", lambda r: r.respond(b"x"), subject="forbidden.x")
        assert ei.value.operation == "subscription" and ei.value.subject == "forbidden.x"
        assert [e.name for e in svc.info().endpoints] == []  # not listed as healthy
        ok = svc.add_endpoint("fine", lambda r: r.respond(b"ok"), subject="allowed.x")
        assert ok.subject == "allowed.x"
        assert nc.request("allowed.x", b"", timeout=5).data == b"ok"
        # with a queue group (the server's text names it too)
        with pytest.raises(errors.PermissionViolationError):
            svc.add_endpoint("q", lambda r: None, subject="forbidden.q", queue_group="grp")
        svc.stop()
