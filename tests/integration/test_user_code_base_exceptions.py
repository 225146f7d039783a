"""Library threads outlive user code that raises a BaseException (issue 32).

A ``SystemExit`` or ``KeyboardInterrupt`` raised by a user's callback used to
end the library thread that ran it, silently: the ``jsclient-callbacks``
thread (done callbacks, error_cb), a subscription's dispatcher, a consume()
dispatcher, a watcher's. Every later callback then waited forever. Each such
thread now logs the exception (and reports it to the error callback) and goes
on with the next callback.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from _js import eventually, publish_stored

import jsclient
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.server import NatsServer

RAISED = [SystemExit, KeyboardInterrupt]


@pytest.fixture
def js(nc: Client) -> JetStream:
    j = nc.jetstream()
    j.create_stream(name="S", subjects=["s.>"], storage="memory")
    return j


def _raise_first(exc: type[BaseException], got: list[Any]) -> Any:
    """A callback that records its argument and raises ``exc`` the first time."""

    def cb(arg: Any) -> None:
        got.append(arg)
        if len(got) == 1:
            raise exc("from user code")

    return cb


@pytest.mark.parametrize("exc", RAISED)
def test_done_callback_raising_does_not_stop_later_callbacks(nc: Client, exc: type) -> None:
    requests = nc.subscribe("hold.>")  # acks are sent by hand below
    nc.flush()
    js = nc.jetstream()
    first = js.publish_async("hold.a", b"1")
    second = js.publish_async("hold.b", b"2")
    got: list[Any] = []
    # Added before the acks: they run on the client's callback thread.
    first.add_done_callback(_raise_first(exc, got))
    second.add_done_callback(got.append)
    for _ in range(2):
        requests.next_msg(timeout=5).respond(b'{"stream": "HOLD", "seq": 1}')
    eventually(lambda: len(got) == 2, 5.0, "the second done callback")
    assert got == [first, second]
    # And any later callback still runs there.
    ran = threading.Event()
    nc._run_callback(ran.set)
    assert ran.wait(5.0)


def test_error_cb_raising_system_exit(nats_server: NatsServer) -> None:
    errors_seen: list[BaseException] = []
    nc = jsclient.connect(nats_server.url, error_cb=_raise_first(SystemExit, errors_seen))
    try:

        def bad(msg: jsclient.Msg) -> None:
            raise ValueError(msg.data.decode())

        nc.subscribe("e", cb=bad)  # each message: one error for error_cb
        nc.publish("e", b"one")
        nc.flush()
        eventually(lambda: len(errors_seen) == 1, 5.0, "the first error")
        nc.publish("e", b"two")
        nc.flush()
        eventually(lambda: len(errors_seen) == 2, 5.0, "the second error after SystemExit")
        assert [str(e) for e in errors_seen] == ["one", "two"]
    finally:
        nc.close()


@pytest.mark.parametrize("exc", RAISED)
def test_subscription_callback_raising(nc: Client, exc: type) -> None:
    got: list[jsclient.Msg] = []
    nc.subscribe("c", cb=_raise_first(exc, got))
    for i in range(3):
        nc.publish("c", b"%d" % i)
    nc.flush()
    eventually(lambda: len(got) == 3, 5.0, "the messages after the raising callback")
    assert [m.data for m in got] == [b"0", b"1", b"2"]


@pytest.mark.parametrize("exc", RAISED)
def test_consume_callback_raising(nc: Client, js: JetStream, exc: type) -> None:
    publish_stored(nc, "s.a", [b"%d" % i for i in range(5)])
    c = js.create_consumer("S", durable_name="d", ack_policy="none")
    got: list[jsclient.Msg] = []
    reported: list[BaseException] = []
    cc = c.consume(_raise_first(exc, got), max_messages=10, error_cb=reported.append)
    try:
        eventually(lambda: len(got) == 5, 5.0, "consumption to go on after the callback raised")
        assert [m.data for m in got] == [b"%d" % i for i in range(5)]
        assert not cc.closed
        eventually(lambda: reported, 5.0, "the callback's exception at error_cb")
        assert isinstance(reported[0], exc)
        publish_stored(nc, "s.a", [b"5"])
        eventually(lambda: len(got) == 6, 5.0, "a message published afterwards")
    finally:
        cc.stop()


@pytest.mark.parametrize("exc", RAISED)
def test_push_subscription_callback_raising(nc: Client, js: JetStream, exc: type) -> None:
    got: list[jsclient.Msg] = []
    sub = js.subscribe("s.a", cb=_raise_first(exc, got))
    try:
        publish_stored(nc, "s.a", [b"%d" % i for i in range(3)])
        eventually(lambda: len(got) >= 3, 5.0, "the messages after the raising callback")
        assert {m.data for m in got} == {b"0", b"1", b"2"}
    finally:
        sub.unsubscribe()


@pytest.mark.parametrize("exc", RAISED)
def test_kv_watch_callback_raising(js: JetStream, exc: type) -> None:
    kv = js.create_key_value(bucket="w", storage="memory")
    got: list[Any] = []
    w = kv.watch_all(cb=_raise_first(exc, got))  # first: the None marker of an empty bucket
    try:
        eventually(lambda: got == [None], 5.0, "the initial marker")
        kv.put("a", b"1")
        eventually(lambda: len(got) == 2, 5.0, "an update after the callback raised")
        assert got[1].value == b"1"
    finally:
        w.stop()
