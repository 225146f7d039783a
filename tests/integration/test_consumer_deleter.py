"""The library deletes the consumers of its reads on one thread per connection.

``keys()``, ``history()``, watchers, object reads and ordered-consumer resets
each leave a server-side consumer behind; they hand it to the connection's
deleter (``jsclient.jetstream.consume.deleter``): one named thread, started
when the first delete is queued, ending when idle or when the connection
closes. Before, each read started a thread of its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _js import eventually, publish_stored

from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.jetstream.consume import deleter
from jsclient.jetstream.consume.deleter import THREAD_NAME


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Names of the threads started while the test runs."""
    names: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        names.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    yield names


def _deleting(names: list[str]) -> list[str]:
    """The threads that deleted consumers: the deleter, or the old per-read ones
    (``jsclient-kv-cleanup-…``, ``jsclient-ordered-delete-…``, ``…-unwatch-…``)."""
    return [n for n in names if "delete" in n or "cleanup" in n or "unwatch" in n]


def _thread_of(nc: Client) -> threading.Thread | None:
    """The deleter thread of this connection, if it runs."""
    d = deleter._deleters.get(nc)
    return None if d is None else d._thread


def _consumers(js: JetStream, stream: str) -> int:
    return int(js.stream(stream).info().state.consumer_count or 0)


def test_200_keys_calls_start_one_deleter_and_leave_no_consumer(
    nc: Client, js: JetStream, started: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deleter, "IDLE", 60.0)  # a slow machine's pauses do not end it
    kv = js.create_key_value(bucket="del", storage="memory")
    for i in range(5):
        kv.put(f"k{i}", b"v")
    threads = set()
    for _ in range(200):
        assert len(kv.keys()) == 5
        threads.add(_thread_of(nc))
    for _ in range(20):
        assert len(kv.history("k0")) == 1
        threads.add(_thread_of(nc))
    threads.discard(None)
    assert len(threads) == 1
    assert deleter._deleters[nc].started == 1
    assert len(_deleting(started)) <= 1, _deleting(started)[:5]
    eventually(lambda: _consumers(js, "KV_del") == 0, 20, "every scan's consumer deleted")
    assert all(t.name == THREAD_NAME for t in threads)


def test_the_idle_deleter_ends_and_starts_again(
    nc: Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deleter, "IDLE", 0.3)
    kv = js.create_key_value(bucket="deli", storage="memory")
    kv.put("a", b"1")
    kv.keys()
    first = _thread_of(nc)
    assert first is not None
    eventually(lambda: not first.is_alive(), 15, "the idle deleter to end")
    kv.keys()
    eventually(lambda: _consumers(js, "KV_deli") == 0, 20, "the later scan's consumer deleted")
    assert deleter._deleters[nc].started == 2


def test_watchers_object_reads_and_resets_share_the_deleter(
    nc: Client, js: JetStream, started: list[str]
) -> None:
    kv = js.create_key_value(bucket="delw", storage="memory")
    kv.put("a", b"1")
    obs = js.create_object_store(bucket="delo", storage="memory")
    obs.put("o", os.urandom(20_000), chunk_size=1000)
    for _ in range(10):
        with kv.watch() as w:
            assert w.next(timeout=5) is not None
        assert len(obs.get_bytes("o")) == 20_000
        r = obs.get("o")
        r.read(10)  # left half read
        r.close()
    js.create_stream(name="DELS", subjects=["dels.>"], storage="memory")
    publish_stored(nc, "dels.a", (b"m%d" % i for i in range(20)))
    oc: Any = js.ordered_consumer("DELS")
    names = set()
    for _ in range(5):
        batch = oc.fetch(3, expires=2.0)
        next(batch)  # the rest is left unread: the next fetch resets (a new consumer)
        names.add(oc.name)
    assert len(names) == 5
    oc.delete()
    assert len(_deleting(started)) <= 1, _deleting(started)[:5]
    eventually(lambda: _consumers(js, "KV_delw") == 0, 20, "the watchers' consumers deleted")
    eventually(lambda: _consumers(js, "OBJ_delo") == 0, 20, "the readers' consumers deleted")
    eventually(lambda: _consumers(js, "DELS") == 0, 20, "the replaced consumers deleted")


def test_the_deleter_ends_with_its_connection(
    nc: Client, js: JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deleter, "IDLE", 120.0)  # it does not end by being idle here
    kv = js.create_key_value(bucket="delc", storage="memory")
    kv.put("a", b"1")
    for _ in range(20):
        kv.keys()
    eventually(lambda: _consumers(js, "KV_delc") == 0, 20, "the scans' consumers deleted")
    thread = _thread_of(nc)
    assert thread is not None and thread.is_alive()
    nc.close()
    eventually(lambda: not thread.is_alive(), 15, "the deleter to end with the connection")
