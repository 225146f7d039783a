"""What holding inbound messages keeps alive: a message refers to its client
weakly, so messages kept after a client closed never keep the client (its
buffers, subscriptions and queues) from being freed, and, in the speedups
build, the cycle collector does not walk them."""

from __future__ import annotations

import gc
import time
import weakref

import pytest

import jsclient
from jsclient import _impl, errors
from jsclient.server import NatsServer

pytestmark = pytest.mark.timeout(30)


def _wait(cond: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def test_closed_client_is_freed_while_its_messages_are_held(nats_server: NatsServer) -> None:
    nc = jsclient.connect(nats_server.url)
    got: list[jsclient.Msg] = []
    # A cycle a user makes without thinking: the client holds the callback,
    # the callback's list holds the messages, the messages name the client.
    nc.subscribe("life.cb", cb=got.append)
    queued = nc.subscribe("life.q")  # messages left unread in its queue
    for i in range(3):
        nc.publish("life.cb", b"m%d" % i, reply=f"life.reply.{i}")
        nc.publish("life.q", b"q%d" % i)
    nc.flush()
    _wait(lambda g=got, q=queued: len(g) == 3 and q.pending_msgs == 3)
    held = list(got)
    ref = weakref.ref(nc)
    nc.close()
    del nc, queued, got
    gc.collect()
    _wait(lambda: (gc.collect(), ref() is None)[1])
    assert [m.data for m in held] == [b"m0", b"m1", b"m2"]  # still readable
    with pytest.raises(errors.ConnectionClosedError):
        held[0].respond(b"late")


def test_client_in_a_cycle_with_its_messages_is_collected(nats_server: NatsServer) -> None:
    # Nothing outside holds the messages: client -> subscription -> callback ->
    # list -> messages. The collector frees it all once the client closed.
    nc = jsclient.connect(nats_server.url)
    got: list[jsclient.Msg] = []
    nc.subscribe("life.cycle", cb=got.append)
    for i in range(50):
        nc.publish("life.cycle", b"c%d" % i)
    nc.flush()
    _wait(lambda g=got: len(g) == 50)
    ref = weakref.ref(nc)
    nc.close()
    del nc, got
    _wait(lambda: (gc.collect(), ref() is None)[1])


def test_respond_after_close_is_a_typed_error(nc: jsclient.Client) -> None:
    sub = nc.subscribe("life.r")
    nc.publish("life.r", b"x", reply="life.back")
    msg = sub.next_msg(timeout=5)
    assert msg._client.is_connected  # the client, through its weak proxy
    nc.close()
    with pytest.raises(errors.ConnectionClosedError):
        msg.respond(b"after close")


@pytest.mark.skipif(
    "_speedups" not in _impl.delivery.__name__, reason="the speedups build's property"
)
def test_inbound_messages_are_not_walked_by_the_collector(nc: jsclient.Client) -> None:
    sub = nc.subscribe("life.gc")
    nc.publish("life.gc", b"x")
    msg = sub.next_msg(timeout=5)
    assert not gc.is_tracked(msg)
