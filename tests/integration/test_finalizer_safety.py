"""Finalizers take no lock: the garbage collector runs them in whatever thread it
interrupts, perhaps one holding the write queue's lock, which is not re-entrant.

A pull engine collected with its inboxes still subscribed forgets them at
once (a dict pop, a deque append) and their UNSUBs go out with the
connection's next subscribe or unsubscribe. Before, the finalizer sent the
UNSUBs itself: a collection on the flusher thread while it held the write
queue's lock (pure-Python implementation) hung the connection for good.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest

import jsclient
from jsclient import errors
from jsclient.jetstream.consume.engine import Engine


def _write_lock(nc: jsclient.Client) -> contextlib.AbstractContextManager[object]:
    """The write queue's own lock (the pure-Python twin has one; the C twin needs none)."""
    lock = getattr(nc._conn.writer.wq, "_lock", None)
    return contextlib.nullcontext() if lock is None else lock


@pytest.fixture
def other(nats_server: jsclient.server.NatsServer) -> Iterator[jsclient.Client]:
    c = jsclient.connect(nats_server.url)
    yield c
    c.close()


def test_a_collected_engine_takes_no_lock_and_unsubscribes_later(
    nc: jsclient.Client, other: jsclient.Client
) -> None:
    engine = Engine(nc.jetstream(), "S", "C", ack_none=False)
    inbox = engine.take_inbox()
    nc.flush(5)
    subject = inbox.prefix + "x"
    # The inbox has interest: a request to it is delivered (and dropped), not refused.
    with pytest.raises(errors.TimeoutError):
        other.request(subject, b"", timeout=0.3)

    done = threading.Event()

    def collect_while_writing() -> None:
        with _write_lock(nc):  # as the flusher holds it when a collection comes
            engine._finalizer()  # what the garbage collector runs
        done.set()

    t = threading.Thread(target=collect_while_writing, name="test-gc-in-writer", daemon=True)
    t.start()
    t.join(5)
    assert done.is_set(), "the finalizer blocked on the write queue's lock"
    assert inbox.sid not in nc._subs  # forgotten at once: nothing is routed to it

    nc.subscribe("unrelated")  # the next subscribe sends the released UNSUBs
    nc.flush(5)
    with pytest.raises(errors.NoRespondersError):
        other.request(subject, b"", timeout=2)


def test_close_unsubscribes_at_once(nc: jsclient.Client, other: jsclient.Client) -> None:
    engine = Engine(nc.jetstream(), "S", "C", ack_none=False)
    inbox = engine.take_inbox()
    engine.close()
    nc.flush(5)
    with pytest.raises(errors.NoRespondersError):
        other.request(inbox.prefix + "x", b"", timeout=2)
