"""Forked children (multiprocessing, fork context), as gunicorn and celery prefork make them.

A child calling ``get_jetstream()`` gets a connection of its own; a child
using the parent's ``Client`` gets ForkedConnectionError; the parent goes on
publishing on its connection throughout.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

import pytest

from jsclient import Client, errors
from jsclient.contrib.django import get_connection, get_jetstream
from jsclient.server import NatsServer

# Forking a process that has threads (the client's, the server launcher's) is
# what these tests are about; Python 3.12+ warns about it.
pytestmark = pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)


def _child_get_jetstream(inherited: Client, q: Any) -> None:  # pragma: no cover - child
    try:
        nc = get_connection()
        ack = get_jetstream().publish("forks.child", b"child %d" % os.getpid())
        q.put(("own", nc is not inherited and nc.is_connected, ack.seq > 0))
    except BaseException as exc:
        q.put(("own", False, repr(exc)))


def _child_uses_parent_client(inherited: Client, q: Any) -> None:  # pragma: no cover - child
    try:
        inherited.jetstream().publish("forks.child", b"from the parent's client")
    except errors.ForkedConnectionError as exc:
        q.put(("inherited", True, str(exc)))
    except BaseException as exc:
        q.put(("inherited", False, repr(exc)))
    else:
        q.put(("inherited", False, "no error"))


def test_forked_children(django_nats: NatsServer) -> None:
    js = get_jetstream()
    js.create_stream(name="FORKS", subjects=["forks.>"])
    parent = get_connection()
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [
        ctx.Process(target=_child_get_jetstream, args=(parent, q), name="child-own"),
        ctx.Process(target=_child_uses_parent_client, args=(parent, q), name="child-inherited"),
    ]
    for p in procs:
        p.start()
    published = 0
    for i in range(100):  # the parent publishes while the children run
        js.publish("forks.parent", b"parent %d" % i)
        published += 1
    results = {r[0]: r[1:] for r in (q.get(timeout=30), q.get(timeout=30))}
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert results["own"] == (True, True)
    ok, message = results["inherited"]
    assert ok, message
    assert "connect" in message and "in the child" in message
    # The parent's connection is the same one, never disturbed.
    assert get_connection() is parent and parent.is_connected
    assert parent.stats["reconnects"] == 0
    js.publish("forks.parent", b"after")
    state = js.stream("FORKS").info().state
    assert state.messages == published + 2  # the parent's, one from the child, "after"
