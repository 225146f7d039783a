"""jsclient's Key-Value store and nats-py's (asyncio) share buckets on one server."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import nats.js.errors
import pytest
from nats.js.api import KeyValueConfig as NatsKeyValueConfig

from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.server import NatsServer


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


def _brief(entries: list[Any]) -> list[tuple[str, bytes, int, str]]:
    return [(e.key, e.value, e.revision, e.operation) for e in entries]


async def _np_watch_all(nkv: Any, tries: int = 4) -> tuple[Any, list[Any]]:
    """A nats-py ``watchall()`` watcher and its initial entries, read up to its
    None marker; the caller stops the watcher.

    nats-py's watcher puts its None first when the server delivered every
    entry before its consumer-info check (it counts only what its callback
    already processed), and its entries come after it. Such a watcher is
    stopped and a new one made, as ``_np_retry`` does for keys and history."""
    while True:
        w = await nkv.watchall()
        seen = []
        while (entry := await w.updates(timeout=5.0)) is not None:
            seen.append(entry)
        if seen or tries == 0:
            return w, seen
        tries -= 1
        await w.stop()


async def _np_retry(read: Any) -> Any:
    """``await read()``, tried again when nats-py's watcher gave its None marker
    before the entries (it then raises NoKeysError on a bucket that has keys)."""
    for _ in range(4):
        try:
            return await read()
        except nats.js.errors.NoKeysError:
            await asyncio.sleep(0.05)
    return await read()


@pytest.mark.parametrize("direct", [None, True])
def test_nats_py_writes_jsclient_reads(
    nats_server: NatsServer, js: JetStream, direct: bool | None
) -> None:
    async def produce() -> None:
        other = await nats.connect(nats_server.url)
        try:
            nkv = await other.jetstream().create_key_value(
                NatsKeyValueConfig(bucket="np", history=5, storage="memory", direct=direct)
            )
            await nkv.put("a", b"1")  # 1
            await nkv.put("b", b"2")  # 2
            await nkv.put("c", b"3")  # 3
            await nkv.put("a", b"4")  # 4
            await nkv.delete("b")  # 5
            await nkv.purge("c")  # 6 (rev 3 is rolled up)
            await nkv.put("cfg.x", b"5")  # 7
        finally:
            await other.close()

    asyncio.run(produce())

    kv = js.key_value("np")
    assert kv.bucket == "np"
    e = kv.get("a")
    assert (e.key, e.value, e.revision, e.operation) == ("a", b"4", 4, "PUT")
    assert kv.get("a", revision=1).value == b"1"
    with pytest.raises(errors.KeyDeletedError):
        kv.get("b")
    with pytest.raises(errors.KeyDeletedError):
        kv.get("c")
    assert sorted(kv.keys()) == ["a", "cfg.x"]
    assert kv.keys("cfg.*") == ["cfg.x"]
    assert _brief(kv.history("a")) == [("a", b"1", 1, "PUT"), ("a", b"4", 4, "PUT")]
    assert [h.operation for h in kv.history("b")] == ["PUT", "DEL"]
    assert _brief(kv.history("c")) == [("c", b"", 6, "PURGE")]
    with kv.watch_all() as w:
        initial = []
        while (entry := w.next(timeout=5.0)) is not None:
            initial.append(entry)
        assert _brief(initial) == [
            ("a", b"4", 4, "PUT"),
            ("b", b"", 5, "DEL"),
            ("c", b"", 6, "PURGE"),
            ("cfg.x", b"5", 7, "PUT"),
        ]
    assert kv.status().history == 5


def test_jsclient_writes_nats_py_reads(nats_server: NatsServer, js: JetStream) -> None:
    kv = js.create_key_value(bucket="jc", history=3, storage="memory")
    kv.put("a", b"1")  # 1
    kv.put("b", "zwei")  # 2
    kv.put("a", b"3")  # 3
    kv.delete("b")  # 4
    kv.create("c", b"5")  # 5

    async def consume() -> dict[str, Any]:
        other = await nats.connect(nats_server.url)
        try:
            njs = other.jetstream()
            nkv = await njs.key_value("jc")
            out: dict[str, Any] = {}
            a = await nkv.get("a")
            out["a"] = (a.value, a.revision)
            out["a1"] = (await nkv.get("a", revision=1)).value
            try:
                await nkv.get("b")
                out["b"] = "found"
            except nats.js.errors.KeyNotFoundError:
                out["b"] = "missing"
            out["keys"] = sorted(await _np_retry(nkv.keys))
            out["hist_a"] = [
                (h.value, h.revision) for h in await _np_retry(lambda: nkv.history("a"))
            ]
            out["hist_b"] = [h.operation for h in await _np_retry(lambda: nkv.history("b"))]
            # nats-py's watcher sees the current values, its None, then live jsclient puts.
            w, initial = await _np_watch_all(nkv)
            try:
                out["initial"] = [(e.key, e.revision, e.operation) for e in initial]
                # A blocking jsclient call is fine here: nats-py buffers meanwhile.
                await asyncio.to_thread(kv.put, "d", b"6")  # 6
                await asyncio.to_thread(kv.purge, "a")  # 7
                live = [await w.updates(timeout=5.0) for _ in range(2)]
                out["live"] = [(e.key, e.value, e.revision, e.operation) for e in live]
            finally:
                await w.stop()
            return out
        finally:
            await other.close()

    out = asyncio.run(consume())
    assert out["a"] == (b"3", 3)
    assert out["a1"] == b"1"
    assert out["b"] == "missing"
    assert out["keys"] == ["a", "c"]
    assert out["hist_a"] == [(b"1", 1), (b"3", 3)]
    assert out["hist_b"] == [None, "DEL"]  # nats-py gives a PUT no operation
    assert out["initial"] == [("a", 3, None), ("b", 4, "DEL"), ("c", 5, None)]
    assert out["live"] == [("d", b"6", 6, None), ("a", b"", 7, "PURGE")]


def test_jsclient_watches_nats_py_writes(nats_server: NatsServer, js: JetStream) -> None:
    kv = js.create_key_value(bucket="lw", history=2, storage="memory")
    kv.put("x", b"0")

    async def produce() -> None:
        other = await nats.connect(nats_server.url)
        try:
            nkv = await other.jetstream().key_value("lw")
            await nkv.put("x", b"1")
            await nkv.create("y", b"2")
            await nkv.delete("x")
        finally:
            await other.close()

    with kv.watch_all() as w:
        first = w.next(timeout=5.0)
        assert first is not None and first.value == b"0"
        assert w.next(timeout=5.0) is None
        asyncio.run(produce())
        got = [w.next(timeout=5.0) for _ in range(3)]
        assert _brief(got) == [
            ("x", b"1", 2, "PUT"),
            ("y", b"2", 3, "PUT"),
            ("x", b"", 4, "DEL"),
        ]


def test_compare_and_set_across_clients(nats_server: NatsServer, js: JetStream) -> None:
    kv = js.create_key_value(bucket="cas", history=5, storage="memory")

    async def nats_put(key: str, value: bytes) -> int:
        other = await nats.connect(nats_server.url)
        try:
            nkv = await other.jetstream().key_value("cas")
            return int(await nkv.put(key, value))
        finally:
            await other.close()

    async def nats_update(key: str, value: bytes, last: int) -> str:
        other = await nats.connect(nats_server.url)
        try:
            nkv = await other.jetstream().key_value("cas")
            try:
                return str(await nkv.update(key, value, last=last))
            except nats.js.errors.KeyWrongLastSequenceError:
                return "wrong"
        finally:
            await other.close()

    rev = asyncio.run(nats_put("k", b"from nats-py"))
    assert kv.get("k").revision == rev
    new = kv.update("k", b"from jsclient", rev)
    assert new == rev + 1
    with pytest.raises(errors.KeyWrongLastSequenceError):
        kv.update("k", b"stale", rev)
    # And the other way round: nats-py updates on a jsclient revision.
    assert asyncio.run(nats_update("k", b"again", rev)) == "wrong"
    assert asyncio.run(nats_update("k", b"again", new)) == str(new + 1)
    assert kv.get("k").value == b"again"
    # A key nats-py deleted can be created again from jsclient.
    asyncio.run(nats_put("gone", b"x"))
    kv.delete("gone")
    with pytest.raises(errors.KeyExistsError):
        kv.create("k", b"exists")
    assert kv.create("gone", b"back") == new + 4


def test_status_matches_nats_py(nats_server: NatsServer, js: JetStream) -> None:
    kv = js.create_key_value(bucket="stat", history=4, ttl=90, storage="memory")
    kv.put("a", b"1")
    kv.put("a", b"2")
    kv.put("b", b"3")
    mine = kv.status()

    async def theirs() -> tuple[str, int, int, float | None, int]:
        other = await nats.connect(nats_server.url)
        try:
            s = await (await other.jetstream().key_value("stat")).status()
            return (s.bucket, s.values, s.history, s.ttl, s.stream_info.state.bytes)
        finally:
            await other.close()

    assert asyncio.run(theirs()) == (mine.bucket, mine.values, mine.history, mine.ttl, mine.bytes)
    assert (mine.bucket, mine.values, mine.history, mine.ttl) == ("stat", 3, 4, 90.0)
