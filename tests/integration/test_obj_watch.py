"""Listing and watching an object store: ObjectInfo items, one None marker, live changes."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

import jsclient
from jsclient import errors
from jsclient.api import ObjectInfo, ObjectMeta
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.server import NatsServer

if TYPE_CHECKING:
    from jsclient.jetstream.obj import ObjectStore, ObjectWatcher


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


@pytest.fixture
def obs(js: JetStream) -> ObjectStore:
    return js.create_object_store(bucket="files", storage="memory")


def _initial(w: ObjectWatcher) -> list[ObjectInfo]:
    out: list[ObjectInfo] = []
    while (info := w.next(timeout=5.0)) is not None:
        out.append(info)
    return out


def test_list(obs: ObjectStore) -> None:
    assert obs.list() == []
    obs.put("a", b"1")
    obs.put("b", b"22", meta=ObjectMeta(description="bee"))
    obs.put("c", b"333")
    obs.put("a", b"4444")  # replaced: listed once, last written
    obs.delete("c")
    listed = obs.list()
    assert [(i.name, i.size) for i in listed] == [("b", 2), ("a", 4)]
    assert listed[1].description is None and listed[0].description == "bee"
    assert all(i.mtime and i.mtime.endswith("Z") for i in listed)
    with_deleted = obs.list(ignore_deletes=False)
    assert [(i.name, i.deleted) for i in with_deleted] == [
        ("b", False),
        ("a", False),
        ("c", True),
    ]


def test_watch_initial_then_updates(obs: ObjectStore) -> None:
    obs.put("a", b"1")
    obs.put("b", b"2")
    with obs.watch() as w:
        assert [i.name for i in _initial(w)] == ["a", "b"]
        obs.put("c", b"3")
        got = w.next(timeout=5.0)
        assert got is not None and (got.name, got.size) == ("c", 1)
        obs.delete("a")
        gone = w.next(timeout=5.0)
        assert gone is not None and (gone.name, gone.deleted) == ("a", True)
        obs.update_meta("b", ObjectMeta(name="b", description="changed"))
        changed = w.next(timeout=5.0)
        assert changed is not None and changed.description == "changed"
        with pytest.raises(errors.TimeoutError):
            w.next(timeout=0.3)


def test_watch_empty_bucket_gives_the_marker_first(obs: ObjectStore) -> None:
    with obs.watch() as w:
        assert w.next(timeout=5.0) is None
        obs.put("x", b"1")
        got = w.next(timeout=5.0)
        assert got is not None and got.name == "x"


def test_watch_options(obs: ObjectStore) -> None:
    obs.put("a", b"1")
    obs.put("gone", b"2")
    obs.delete("gone")
    with obs.watch(ignore_deletes=True) as w:
        assert [i.name for i in _initial(w)] == ["a"]
        obs.put("b", b"2")
        # Seen before its delete: the delete's meta rolls up what was not sent yet.
        got = w.next(timeout=5.0)
        assert got is not None and got.name == "b" and not got.deleted
        obs.delete("b")
        obs.put("c", b"3")
        got = w.next(timeout=5.0)
        assert got is not None and got.name == "c"  # the delete of b left out
    with obs.watch(updates_only=True) as w:
        with pytest.raises(errors.TimeoutError):
            w.next(timeout=0.3)  # no marker, nothing old
        obs.put("d", b"4")
        got = w.next(timeout=5.0)
        assert got is not None and got.name == "d"
    everything = [(i.name, i.deleted) for i in obs.list(ignore_deletes=False)]
    assert everything == [("a", False), ("gone", True), ("b", True), ("c", False), ("d", False)]
    with obs.watch(include_history=True) as w:  # metas are rolled up: one per object
        assert [(i.name, i.deleted) for i in _initial(w)] == everything
    with pytest.raises(ValueError):
        obs.watch(include_history=True, updates_only=True)


def test_watch_with_a_callback(obs: ObjectStore) -> None:
    obs.put("a", b"1")
    seen: list[Any] = []
    threads: set[str] = set()
    done = threading.Event()

    def cb(info: ObjectInfo | None) -> None:
        threads.add(threading.current_thread().name)
        seen.append(None if info is None else info.name)
        if len(seen) == 3:
            done.set()

    w = obs.watch(cb=cb)
    try:
        obs.put("b", b"2")
        assert done.wait(5.0)
    finally:
        w.stop()
    assert seen == ["a", None, "b"]
    assert threads == {"jsclient-obj-watch-files"}
    with pytest.raises(TypeError):
        w.next(timeout=0.1)


def test_stop_ends_iteration(obs: ObjectStore) -> None:
    obs.put("a", b"1")
    w = obs.watch()
    got = [next(w), next(w)]
    assert got[0] is not None and got[1] is None
    threading.Timer(0.3, w.stop).start()
    assert list(w) == []
    assert w.stopped
    with pytest.raises(errors.MsgIteratorClosedError):
        w.next(timeout=0.1)


def test_watch_reports_bad_meta_and_goes_on(nats_server: NatsServer) -> None:
    reported: list[BaseException] = []
    with jsclient.connect(nats_server.url, error_cb=reported.append) as nc:
        js = nc.jetstream()
        obs = js.create_object_store(bucket="files", storage="memory")
        js.publish("$O.files.M.YmFk", b"not an object's meta")
        obs.put("good", b"1")
        with obs.watch() as w:
            assert [i.name for i in _initial(w)] == ["good"]
        nc.flush()
        deadline = time.monotonic() + 5.0
        while not reported and time.monotonic() < deadline:
            time.sleep(0.02)
    assert any(isinstance(e, errors.BadObjectMetaError) for e in reported)
