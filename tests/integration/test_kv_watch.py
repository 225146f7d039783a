"""Key-Value watchers against a real nats-server: initial values, the None marker, options,
callbacks, stopping, and surviving a server restart."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
from _js import wait_for

import jsclient
from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.server import NatsServer

if TYPE_CHECKING:
    from jsclient.jetstream.kv import KeyValue, KeyWatcher


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


@pytest.fixture
def kv(js: JetStream) -> KeyValue:
    """A memory bucket ``w`` keeping 5 revisions per key."""
    return js.create_key_value(bucket="w", history=5, storage="memory")


def _initial(w: KeyWatcher, timeout: float = 5.0) -> list[Any]:
    """The entries a watcher delivers before its None marker (the marker is consumed)."""
    out: list[Any] = []
    while True:
        entry = w.next(timeout=timeout)
        if entry is None:
            return out
        out.append(entry)


def _brief(entries: list[Any]) -> list[tuple[str, bytes, int, str]]:
    return [(e.key, e.value, e.revision, e.operation) for e in entries]


def _put_values(nc: Client, bucket: str, items: list[tuple[str, bytes]]) -> None:
    """Put (key, value) pairs in order through acked async publishes."""
    js = nc.jetstream(publish_async_stall_wait=30.0)
    futures = [js.publish_async(f"$KV.{bucket}.{k}", v) for k, v in items]
    js.publish_async_complete(timeout=60)
    for f in futures:
        f.result(timeout=0)


def _assert_quiet(w: KeyWatcher, timeout: float = 0.3) -> None:
    """Nothing more is delivered within ``timeout``."""
    with pytest.raises(errors.TimeoutError):
        w.next(timeout=timeout)


def _put_many(nc: Client, bucket: str, n: int) -> None:
    """Put keys k0..k<n-1> (value b"v<i>") through acked async publishes."""
    js = nc.jetstream(publish_async_stall_wait=30.0)
    futures = [js.publish_async(f"$KV.{bucket}.k{i}", b"v%d" % i) for i in range(n)]
    js.publish_async_complete(timeout=60)
    for f in futures:
        f.result(timeout=0)


def test_initial_values_then_none_then_updates(kv: KeyValue) -> None:
    kv.put("a.1", b"1")  # rev 1, replaced by rev 4
    kv.put("a.2", b"2")  # rev 2
    kv.put("b.1", b"3")  # rev 3, not watched
    kv.put("a.1", b"4")  # rev 4
    got: list[Any] = []
    with kv.watch("a.>") as w:
        for entry in w:
            got.append(entry)
            if entry is None:
                kv.put("b.1", b"no")  # rev 5, not watched
                kv.put("a.3", b"5")  # rev 6
                kv.delete("a.2")  # rev 7
                kv.purge("a.1")  # rev 8
            if len(got) == 6:
                break
        _assert_quiet(w)
    assert got[2] is None
    assert _brief(got[:2]) == [("a.2", b"2", 2, "PUT"), ("a.1", b"4", 4, "PUT")]
    assert _brief(got[3:]) == [
        ("a.3", b"5", 6, "PUT"),
        ("a.2", b"", 7, "DEL"),
        ("a.1", b"", 8, "PURGE"),
    ]
    for e in got[:2] + got[3:]:
        assert e.bucket == "w"
        assert e.created.utcoffset() is not None and e.created.utcoffset().total_seconds() == 0
    assert got[1].delta == 0  # the last initial value: nothing pending after it
    # A stopped watcher ends a for loop.
    assert list(w) == []


def test_empty_bucket_gives_none_first(kv: KeyValue) -> None:
    with kv.watch_all() as w:
        assert w.next(timeout=5.0) is None
        _assert_quiet(w)
        kv.put("k", b"v")
        e = w.next(timeout=5.0)
        assert _brief([e]) == [("k", b"v", 1, "PUT")]
        _assert_quiet(w)


def test_updates_only(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.put("b", b"2")
    with kv.watch_all(updates_only=True) as w:
        _assert_quiet(w)  # neither the old values nor a None marker
        kv.put("c", b"3")
        kv.put("a", b"4")
        assert _brief([w.next(timeout=5.0), w.next(timeout=5.0)]) == [
            ("c", b"3", 3, "PUT"),
            ("a", b"4", 4, "PUT"),
        ]
        _assert_quiet(w)


def test_updates_only_on_an_empty_bucket_has_no_marker(kv: KeyValue) -> None:
    with kv.watch("x.*", updates_only=True) as w:
        _assert_quiet(w)
        kv.put("x.1", b"1")
        assert _brief([w.next(timeout=5.0)]) == [("x.1", b"1", 1, "PUT")]


def test_include_history(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.put("a", b"2")
    kv.put("b", b"1")
    kv.put("a", b"3")
    kv.delete("b")
    with kv.watch_all(include_history=True) as w:
        assert _brief(_initial(w)) == [
            ("a", b"1", 1, "PUT"),
            ("a", b"2", 2, "PUT"),
            ("b", b"1", 3, "PUT"),
            ("a", b"3", 4, "PUT"),
            ("b", b"", 5, "DEL"),
        ]
        kv.put("b", b"2")
        assert _brief([w.next(timeout=5.0)]) == [("b", b"2", 6, "PUT")]
    with kv.watch_all() as w:  # latest per key only
        assert _brief(_initial(w)) == [("a", b"3", 4, "PUT"), ("b", b"2", 6, "PUT")]


def test_ignore_deletes(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.put("b", b"1")
    kv.put("c", b"1")
    kv.delete("b")
    kv.purge("c")
    with kv.watch_all(ignore_deletes=True) as w:
        assert _brief(_initial(w)) == [("a", b"1", 1, "PUT")]
        kv.delete("a")  # 6
        kv.put("d", b"1")  # 7
        # Seen before its purge: a purge rolls up what the server has not sent yet.
        assert _brief([w.next(timeout=5.0)]) == [("d", b"1", 7, "PUT")]
        kv.purge("d")  # 8
        kv.put("e", b"1")  # 9
        assert _brief([w.next(timeout=5.0)]) == [("e", b"1", 9, "PUT")]
        _assert_quiet(w)


def test_ignore_deletes_when_only_markers_exist(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.delete("a")
    with kv.watch_all(ignore_deletes=True) as w:
        assert w.next(timeout=5.0) is None
        _assert_quiet(w)


def test_meta_only(kv: KeyValue) -> None:
    kv.put("a", b"hello")
    kv.put("b", b"world")
    kv.delete("b")
    with kv.watch_all(meta_only=True) as w:
        assert _brief(_initial(w)) == [("a", b"", 1, "PUT"), ("b", b"", 3, "DEL")]
        kv.put("c", b"payload")
        assert _brief([w.next(timeout=5.0)]) == [("c", b"", 4, "PUT")]
    assert kv.get("c").value == b"payload"


def test_several_filters(kv: KeyValue) -> None:
    for key in ("a.1", "a.1.2", "b.1", "c.x.y", "c", "a.2"):
        kv.put(key, b"v")
    with kv.watch(["a.*", "c.>"]) as w:
        assert [e.key for e in _initial(w)] == ["a.1", "c.x.y", "a.2"]
        kv.put("b.2", b"v")
        kv.put("c.z", b"v")
        kv.put("a.3.4", b"v")
        kv.put("a.3", b"v")
        assert [w.next(timeout=5.0).key for _ in range(2)] == ["c.z", "a.3"]
        _assert_quiet(w)


def test_watch_all_and_an_exact_key(kv: KeyValue) -> None:
    kv.put("x", b"1")
    kv.put("y.z", b"2")
    with kv.watch_all() as w:
        assert [e.key for e in _initial(w)] == ["x", "y.z"]
    with kv.watch(">") as w:
        assert [e.key for e in _initial(w)] == ["x", "y.z"]
    with kv.watch("x") as w:
        assert [e.key for e in _initial(w)] == ["x"]
        kv.put("y.z", b"3")
        kv.put("x", b"4")
        assert _brief([w.next(timeout=5.0)]) == [("x", b"4", 4, "PUT")]


def test_resume_from_revision(kv: KeyValue) -> None:
    for i, key in enumerate("abcabc"):
        kv.put(key, b"%d" % (i + 1))  # revisions 1..6
    with kv.watch_all(resume_from_revision=3) as w:
        assert _brief(_initial(w)) == [
            ("c", b"3", 3, "PUT"),
            ("a", b"4", 4, "PUT"),
            ("b", b"5", 5, "PUT"),
            ("c", b"6", 6, "PUT"),
        ]
        kv.put("a", b"7")
        assert _brief([w.next(timeout=5.0)]) == [("a", b"7", 7, "PUT")]
    with kv.watch("a", resume_from_revision=2) as w:
        assert _brief(_initial(w)) == [("a", b"4", 4, "PUT"), ("a", b"7", 7, "PUT")]


def test_callback_form(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.put("b", b"2")
    got: list[Any] = []
    threads: set[str] = set()
    lock = threading.Lock()

    def cb(entry: Any) -> None:
        with lock:
            got.append(entry)
            threads.add(threading.current_thread().name)

    w = kv.watch_all(cb=cb)
    try:
        assert wait_for(lambda: len(got) == 3)
        kv.put("a", b"3")
        kv.delete("b")
        assert wait_for(lambda: len(got) == 5)
        time.sleep(0.2)
        with lock:
            snapshot = list(got)
        assert snapshot[2] is None
        assert _brief(snapshot[:2] + snapshot[3:]) == [
            ("a", b"1", 1, "PUT"),
            ("b", b"2", 2, "PUT"),
            ("a", b"3", 3, "PUT"),
            ("b", b"", 4, "DEL"),
        ]
        assert threading.current_thread().name not in threads
    finally:
        w.stop()
    kv.put("a", b"after stop")
    time.sleep(0.2)
    assert len(got) == 5


def test_callback_on_empty_bucket_gets_none(kv: KeyValue) -> None:
    got: list[Any] = []
    w = kv.watch("k.>", cb=got.append)
    try:
        assert wait_for(lambda: got == [None])
        kv.put("k.1", b"v")
        assert wait_for(lambda: len(got) == 2)
        assert _brief(got[1:]) == [("k.1", b"v", 1, "PUT")]
    finally:
        w.stop()


def test_stop_from_another_thread_ends_a_blocked_for_loop(kv: KeyValue) -> None:
    kv.put("a", b"1")
    w = kv.watch_all()
    got: list[Any] = []
    marker = threading.Event()
    stopper = threading.Timer(0.5, w.stop)

    def later() -> None:
        marker.wait(5.0)
        stopper.start()

    threading.Thread(target=later, daemon=True).start()
    t0 = time.monotonic()
    try:
        for entry in w:  # blocks after the marker until stop()
            got.append(entry)
            if entry is None:
                marker.set()
        elapsed = time.monotonic() - t0
    finally:
        stopper.cancel()
        w.stop()
    assert _brief(got[:1]) == [("a", b"1", 1, "PUT")] and got[1:] == [None]
    assert elapsed < 3.0


def test_stop_ends_a_loop_in_another_thread(kv: KeyValue) -> None:
    w = kv.watch_all()
    got: list[Any] = []
    done = threading.Event()

    def loop() -> None:
        for entry in w:
            got.append(entry)
        done.set()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    assert wait_for(lambda: got == [None])
    t0 = time.monotonic()
    w.stop()
    assert time.monotonic() - t0 < 1.0
    assert done.wait(2.0), "the for loop did not end after stop()"
    t.join(2.0)
    w.stop()  # stopping twice is harmless


def test_next_timeout(kv: KeyValue) -> None:
    with kv.watch_all() as w:
        assert w.next(timeout=5.0) is None
        t0 = time.monotonic()
        with pytest.raises(errors.TimeoutError) as ei:
            w.next(timeout=0.3)
        elapsed = time.monotonic() - t0
        assert isinstance(ei.value, TimeoutError)
        assert 0.25 <= elapsed < 2.0
        kv.put("k", b"v")  # still usable after a timeout
        assert w.next(timeout=5.0).key == "k"


def test_stop_with_a_large_backlog_is_prompt(nc: Client, js: JetStream) -> None:
    kv = js.create_key_value(bucket="big", storage="memory")
    _put_many(nc, "big", 20_000)
    w = kv.watch_all()
    time.sleep(0.5)  # let the watcher's backlog build up, unread
    t0 = time.monotonic()
    w.stop()
    assert time.monotonic() - t0 < 2.0
    t0 = time.monotonic()
    n = sum(1 for _ in w)
    assert time.monotonic() - t0 < 2.0
    assert n <= 20_001
    # The connection is still healthy.
    assert kv.put("after", b"x") == 20_001
    assert kv.get("after").value == b"x"


def test_many_keys_then_exactly_one_marker(nc: Client, js: JetStream) -> None:
    kv = js.create_key_value(bucket="many", storage="memory")
    n = 2500
    _put_many(nc, "many", n)
    with kv.watch_all() as w:
        before: list[Any] = []
        for entry in w:
            if entry is None:
                break
            before.append(entry)
        assert len(before) == n
        assert [e.revision for e in before] == list(range(1, n + 1))
        assert [e.key for e in before] == [f"k{i}" for i in range(n)]
        assert before[-1].value == b"v%d" % (n - 1)
        assert before[-1].delta == 0
        kv.put("k0", b"new")
        e = w.next(timeout=5.0)
        assert _brief([e]) == [("k0", b"new", n + 1, "PUT")]
        _assert_quiet(w)


def test_many_keys_callback_marker_after_all(nc: Client, js: JetStream) -> None:
    kv = js.create_key_value(bucket="manycb", storage="memory")
    n = 2000
    _put_many(nc, "manycb", n)
    got: list[Any] = []
    w = kv.watch_all(cb=got.append)
    try:
        assert wait_for(lambda: None in got, 10.0)
        assert got.index(None) == n
        assert [e.revision for e in got[:n]] == list(range(1, n + 1))
    finally:
        w.stop()


@pytest.mark.parametrize(("down_time", "kill"), [(0.0, False), (0.5, True)])
def test_watcher_survives_a_server_restart(
    nats_server: NatsServer, down_time: float, kill: bool
) -> None:
    reconnected = threading.Event()
    client = jsclient.connect(
        nats_server.url,
        reconnect_wait=0.1,
        max_reconnect_attempts=-1,
        reconnected_cb=reconnected.set,
    )
    try:
        js = client.jetstream()
        kv = js.create_key_value(bucket="dur", storage="file", history=5)
        for i in range(5):
            kv.put(f"k{i}", b"before%d" % i)
        with kv.watch_all() as w:
            first = _initial(w)
            assert [e.revision for e in first] == [1, 2, 3, 4, 5]
            kv.put("k0", b"unread")  # rev 6, perhaps not yet handed over
            nats_server.restart(down_time, kill=kill)
            assert reconnected.wait(10.0)

            def ready() -> bool:
                try:
                    kv.status()
                except errors.Error:
                    return False
                return True

            assert wait_for(ready, 10.0)
            revs = [kv.put(f"k{i}", b"after%d" % i) for i in range(5)]
            last = revs[-1]
            got: list[Any] = []
            deadline = time.monotonic() + 15.0
            while (not got or got[-1].revision < last) and time.monotonic() < deadline:
                try:
                    entry = w.next(timeout=1.0)
                except errors.TimeoutError:
                    continue
                assert entry is not None, "a second None marker"
                got.append(entry)
            assert [e.revision for e in got] == list(range(6, last + 1))
            assert [e.value for e in got] == [b"unread"] + [b"after%d" % i for i in range(5)]
            _assert_quiet(w, 0.5)
    finally:
        client.close()


def test_restart_during_the_initial_values(nats_server: NatsServer) -> None:
    reconnected = threading.Event()
    client = jsclient.connect(
        nats_server.url,
        reconnect_wait=0.1,
        max_reconnect_attempts=-1,
        reconnected_cb=reconnected.set,
    )
    try:
        js = client.jetstream()
        kv = js.create_key_value(bucket="mid", storage="file")
        n = 3000
        _put_many(client, "mid", n)
        with kv.watch_all() as w:
            got = [w.next(timeout=5.0) for _ in range(100)]
            nats_server.restart()
            assert reconnected.wait(10.0)
            deadline = time.monotonic() + 20.0
            while time.monotonic() < deadline:
                try:
                    entry = w.next(timeout=1.0)
                except errors.TimeoutError:
                    continue
                got.append(entry)
                if entry is None:
                    break
            assert got[-1] is None and None not in got[:-1]
            assert [e.revision for e in got[:-1]] == list(range(1, n + 1))
            assert [e.key for e in got[:-1]] == [f"k{i}" for i in range(n)]
            kv.put("k1", b"later")
            assert _brief([w.next(timeout=5.0)]) == [("k1", b"later", n + 1, "PUT")]
            _assert_quiet(w, 0.5)
    finally:
        client.close()


def test_stop_from_inside_the_callback(kv: KeyValue) -> None:
    kv.put("a", b"1")
    kv.put("b", b"2")
    got: list[Any] = []
    stopped = threading.Event()
    holder: list[KeyWatcher] = []

    def cb(entry: Any) -> None:
        got.append(entry)
        if entry is not None and entry.key == "a" and not stopped.is_set():
            wait_for(lambda: bool(holder), 5.0)
            holder[0].stop()  # must not deadlock on the library thread
            stopped.set()

    holder.append(kv.watch_all(cb=cb))
    try:
        assert stopped.wait(5.0), "stop() inside the callback did not return"
        kv.put("c", b"3")
        time.sleep(0.3)
        assert [e.key for e in got[:1]] == ["a"]
        assert all(e is None or e.key != "c" for e in got)
    finally:
        holder[0].stop()


def test_restart_during_initial_values_keeps_latest_only(nats_server: NatsServer) -> None:
    # Keys k4000.. are updated later, so their old revisions sit after the latest
    # ones of k0..k3999. A watcher that resumes after a restart early in its
    # initial values must still give each key once, with its latest value.
    reconnected = threading.Event()
    client = jsclient.connect(
        nats_server.url,
        reconnect_wait=0.1,
        max_reconnect_attempts=-1,
        reconnected_cb=reconnected.set,
    )
    try:
        js = client.jetstream()
        kv = js.create_key_value(bucket="lat", storage="file", history=2)
        n = 8000
        _put_values(client, "lat", [(f"k{i}", b"old%d" % i) for i in range(n)])
        _put_values(client, "lat", [(f"k{i}", b"new%d" % i) for i in range(n // 2, n)])
        latest = {f"k{i}": (b"old%d" if i < n // 2 else b"new%d") % i for i in range(n)}
        with kv.watch_all() as w:
            got = [w.next(timeout=5.0) for _ in range(100)]
            nats_server.restart()
            assert reconnected.wait(10.0)
            deadline = time.monotonic() + 30.0
            while time.monotonic() < deadline:
                try:
                    entry = w.next(timeout=1.0)
                except errors.TimeoutError:
                    continue
                got.append(entry)
                if entry is None:
                    break
            assert got[-1] is None and None not in got[:-1]
            entries = got[:-1]
            revs = [e.revision for e in entries]
            assert revs == sorted(set(revs))
            stale = [(e.key, e.value) for e in entries if e.value != latest[e.key]]
            assert stale == [], f"{len(stale)} stale revisions, e.g. {stale[:3]}"
            assert len(entries) == n
            assert {e.key: e.value for e in entries} == latest
            _assert_quiet(w, 0.5)
    finally:
        client.close()


def test_updates_only_watcher_survives_a_restart(nats_server: NatsServer) -> None:
    reconnected = threading.Event()
    client = jsclient.connect(
        nats_server.url,
        reconnect_wait=0.1,
        max_reconnect_attempts=-1,
        reconnected_cb=reconnected.set,
    )
    try:
        js = client.jetstream()
        kv = js.create_key_value(bucket="uo", storage="file")
        kv.put("before", b"0")
        with kv.watch_all(updates_only=True) as w:
            nats_server.restart()
            assert reconnected.wait(10.0)
            deadline = time.monotonic() + 10.0
            revs: list[int] = []
            while not revs and time.monotonic() < deadline:
                try:
                    revs = [kv.put(f"k{i}", b"x") for i in range(3)]
                except errors.Error:
                    time.sleep(0.05)
            assert revs == [2, 3, 4]
            got = [w.next(timeout=10.0) for _ in range(3)]
            assert [(e.key, e.revision) for e in got] == [("k0", 2), ("k1", 3), ("k2", 4)]
            _assert_quiet(w, 0.5)
    finally:
        client.close()


def test_stop_a_busy_callback_watcher(nc: Client, js: JetStream) -> None:
    kv = js.create_key_value(bucket="busy", storage="memory")
    _put_many(nc, "busy", 5000)
    count = [0]

    def slow(entry: Any) -> None:
        count[0] += 1
        time.sleep(0.001)

    w = kv.watch_all(cb=slow)
    assert wait_for(lambda: count[0] > 10)
    t0 = time.monotonic()
    w.stop()
    assert time.monotonic() - t0 < 0.5
    time.sleep(0.1)  # a callback running when stop() was called may finish
    settled = count[0]
    time.sleep(0.3)
    assert count[0] == settled < 5001
