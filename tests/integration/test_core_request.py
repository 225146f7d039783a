"""Request/reply against a real nats-server."""

from __future__ import annotations

import builtins
import threading
import time
from typing import TYPE_CHECKING

import nats.errors
import pytest

from jsclient import errors
from jsclient.client import Client
from jsclient.msg import Msg
from jsclient.server import NatsServer

if TYPE_CHECKING:
    from conftest import CoreConnect, CoreWaitFor

pytestmark = pytest.mark.timeout(30)


def _echo_responder(nc: Client, subject: str, queue: str | None = None) -> None:
    def cb(msg: Msg) -> None:
        msg.respond(b"re:" + msg.data)

    nc.subscribe(subject, queue, cb=cb)
    nc.flush()


def test_request_reply_same_connection(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    _echo_responder(nc, "svc.echo")
    reply = nc.request("svc.echo", b"ping", timeout=2)
    assert reply.data == b"re:ping"
    assert reply.subject.startswith("_INBOX.")
    # A second request reuses the shared response subscription.
    assert nc.request("svc.echo", b"again", timeout=2).data == b"re:again"


def test_request_reply_across_connections(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    server_side = core_connect(nats_server.url)
    client_side = core_connect(nats_server.url, inbox_prefix="_CUSTOM")
    _echo_responder(server_side, "svc.remote")
    reply = client_side.request("svc.remote", b"x", timeout=2)
    assert reply.data == b"re:x"
    assert reply.subject.startswith("_CUSTOM.")


def test_request_with_headers_both_ways(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)

    def cb(msg: Msg) -> None:
        assert msg.headers is not None
        msg.respond(msg.data, headers={"Echo": msg.headers["Ask"], "Multi": "1"})

    nc.subscribe("svc.hdr", cb=cb)
    reply = nc.request("svc.hdr", b"body", headers={"Ask": "question"}, timeout=2)
    assert reply.data == b"body"
    assert reply.headers == {"Echo": "question", "Multi": "1"}


def test_respond_via_publish_to_reply(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("svc.manual")
    result: list[Msg] = []
    t = threading.Thread(
        target=lambda: result.append(nc.request("svc.manual", b"q", timeout=5)), daemon=True
    )
    t.start()
    req = sub.next_msg(timeout=5)
    assert req.data == b"q" and req.reply
    nc.publish(req.reply, b"manual answer")
    t.join(5)
    assert result[0].data == b"manual answer"


def test_respond_without_reply_subject(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    sub = nc.subscribe("svc.noreply")
    nc.publish("svc.noreply", b"x")
    msg = sub.next_msg(timeout=2)
    with pytest.raises(errors.Error):
        msg.respond(b"nowhere")


def test_no_responders(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    start = time.monotonic()
    with pytest.raises(errors.NoRespondersError) as info:
        nc.request("nobody.listens", b"hello", timeout=5)
    assert time.monotonic() - start < 2, "no-responders must not wait for the timeout"
    assert isinstance(info.value, nats.errors.NoRespondersError)
    # The connection and the response subscription remain usable.
    _echo_responder(nc, "somebody.listens")
    assert nc.request("somebody.listens", b"y", timeout=2).data == b"re:y"


def test_request_timeout_when_responder_is_silent(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    nc = core_connect(nats_server.url)
    silent = nc.subscribe("svc.silent")  # receives but never answers
    nc.flush()
    start = time.monotonic()
    with pytest.raises(errors.TimeoutError) as info:
        nc.request("svc.silent", b"q", timeout=0.3)
    elapsed = time.monotonic() - start
    assert 0.25 <= elapsed < 2
    assert isinstance(info.value, builtins.TimeoutError)
    assert isinstance(info.value, nats.errors.TimeoutError)
    # A late answer to the timed-out request is ignored and does not confuse the next one.
    late = silent.next_msg(timeout=1)
    nc.publish(late.reply, b"too late")
    _echo_responder(nc, "svc.fine")
    assert nc.request("svc.fine", b"z", timeout=2).data == b"re:z"
    assert len(nc._mux) == 0


def test_slow_responder_within_timeout(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)

    def cb(msg: Msg) -> None:
        time.sleep(0.2)
        msg.respond(b"slow but fine")

    nc.subscribe("svc.slow", cb=cb)
    assert nc.request("svc.slow", timeout=3).data == b"slow but fine"


def test_concurrent_requests_from_many_threads(
    nats_server: NatsServer, core_connect: CoreConnect
) -> None:
    responder = core_connect(nats_server.url)
    # Several responders in a queue group, so replies come back out of order.
    for _ in range(3):
        _echo_responder(responder, "svc.conc", queue="echoers")
    nc = core_connect(nats_server.url)
    subs_before = len(nc._subs)
    n_threads, per_thread = 8, 60
    failures: list[str] = []
    barrier = threading.Barrier(n_threads)

    def worker(tid: int) -> None:
        barrier.wait(5)
        for i in range(per_thread):
            payload = f"{tid}-{i}".encode()
            try:
                reply = nc.request("svc.conc", payload, timeout=5)
            except Exception as exc:
                failures.append(f"{tid}-{i}: {exc!r}")
                continue
            if reply.data != b"re:" + payload:
                failures.append(f"{tid}-{i}: got {reply.data!r}")

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not failures, failures[:5]
    # One muxed response subscription serves every request.
    assert len(nc._subs) == subs_before + 1
    assert len(nc._mux) == 0


def test_pending_request_released_on_close(
    nats_server: NatsServer, core_connect: CoreConnect, core_wait_for: CoreWaitFor
) -> None:
    nc = core_connect(nats_server.url)
    nc.subscribe("svc.never")
    nc.flush()
    outcome: list[BaseException] = []

    def ask() -> None:
        try:
            nc.request("svc.never", b"q", timeout=10)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    core_wait_for(lambda: len(nc._mux))
    start = time.monotonic()
    nc.close()
    t.join(5)
    assert time.monotonic() - start < 3
    assert len(outcome) == 1 and isinstance(outcome[0], errors.ConnectionClosedError)


def test_request_after_close(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    nc.close()
    with pytest.raises(errors.ConnectionClosedError):
        nc.request("svc.any", b"x", timeout=1)


def test_request_from_inside_a_callback(nats_server: NatsServer, core_connect: CoreConnect) -> None:
    nc = core_connect(nats_server.url)
    _echo_responder(nc, "svc.inner")

    def outer(msg: Msg) -> None:
        inner = nc.request("svc.inner", msg.data, timeout=2)
        msg.respond(b"outer+" + inner.data)

    nc.subscribe("svc.outer", cb=outer)
    assert nc.request("svc.outer", b"x", timeout=3).data == b"outer+re:x"
