"""jsclient's Object store and nats-py's (asyncio) share buckets on one server, both ways."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import os
from typing import Any

import nats
import nats.js.errors
import pytest
from nats.js.api import ObjectMeta as NatsObjectMeta

from jsclient import errors
from jsclient.api import ObjectMeta
from jsclient.client import Client
from jsclient.jetstream import JetStream
from jsclient.server import NatsServer

CHUNK = 128 * 1024


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


def _digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def _run(url: str, job: Any) -> Any:
    async def main() -> Any:
        other = await nats.connect(url)
        try:
            return await job(other.jetstream())
        finally:
            await other.close()

    return asyncio.run(main())


def test_nats_py_puts_jsclient_gets(nats_server: NatsServer, js: JetStream) -> None:
    big = os.urandom(3 * CHUNK + 12_345)  # four chunks of nats-py's default size
    small = b"hello"

    async def produce(njs: Any) -> list[Any]:
        nobs = await njs.create_object_store("np")
        a = await nobs.put("dir/big file ü.bin", big)
        b = await nobs.put(
            "small", small, meta=NatsObjectMeta(description="tiny", headers={"k": ["v"]})
        )
        await nobs.put("empty", b"")
        await nobs.put("doomed", b"x")
        await nobs.delete("doomed")
        return [a, b]

    put_big, put_small = _run(nats_server.url, produce)

    obs = js.object_store("np")
    info = obs.info("dir/big file ü.bin")
    assert (info.size, info.chunks, info.nuid) == (len(big), 4, put_big.nuid)
    assert info.digest == _digest(big) == put_big.digest
    assert obs.get_bytes("dir/big file ü.bin") == big  # digest checked on the way
    with obs.get("dir/big file ü.bin") as r:
        assert [len(c) for c in r] == [CHUNK, CHUNK, CHUNK, 12_345]
    s = obs.info("small")
    assert (s.description, s.headers) == ("tiny", {"k": ["v"]})
    assert obs.get_bytes("small") == small
    assert obs.get_bytes("empty") == b""
    with pytest.raises(errors.ObjectNotFoundError):
        obs.info("doomed")
    assert obs.info("doomed", show_deleted=True).deleted
    assert sorted(i.name for i in obs.list()) == ["dir/big file ü.bin", "empty", "small"]
    assert put_small.nuid == s.nuid


def test_jsclient_puts_nats_py_gets(nats_server: NatsServer, js: JetStream) -> None:
    big = os.urandom(2 * CHUNK + 7)
    many = os.urandom(20_000)
    obs = js.create_object_store(bucket="jc")
    obs.put("big ✓", big)
    obs.put("many", many, chunk_size=1000, meta=ObjectMeta(description="d", headers={"h": "1"}))
    obs.put("gone", b"g")
    obs.delete("gone")
    obs.add_link("link to big", obs.info("big ✓"))

    async def consume(njs: Any) -> dict[str, Any]:
        nobs = await njs.object_store("jc")
        out: dict[str, Any] = {}
        r = await nobs.get("big ✓")  # nats-py checks the digest
        out["big"] = (r.data, r.info.size, r.info.chunks, r.info.digest)
        r = await nobs.get("many")
        out["many"] = (r.data, r.info.chunks, r.info.description, r.info.headers)
        out["link"] = (await nobs.get("link to big")).data
        try:
            await nobs.get_info("gone")
        except nats.js.errors.ObjectNotFoundError:
            out["gone"] = "not found"
        out["deleted"] = (await nobs.get_info("gone", show_deleted=True)).deleted
        w = await nobs.watch()
        names = []
        async for e in w:
            if e is None:
                break
            names.append(e.name)
        await w.stop()
        out["names"] = names
        return out

    got = _run(nats_server.url, consume)
    assert got["big"] == (big, len(big), 3, _digest(big))
    assert got["many"] == (many, 20, "d", {"h": ["1"]})
    assert got["link"] == big
    assert got["gone"] == "not found"
    assert got["deleted"] is True
    assert got["names"] == ["big ✓", "many", "gone", "link to big"]


def test_changes_made_by_each_other(nats_server: NatsServer, js: JetStream) -> None:
    obs = js.create_object_store(bucket="both", storage="memory")
    data = os.urandom(CHUNK + 1)
    first = obs.put("mine", data)

    async def change(njs: Any) -> None:
        # (nats-py's update_meta cannot rename: it checks the old name for the new.)
        nobs = await njs.object_store("both")
        await nobs.update_meta("mine", NatsObjectMeta(name="mine", description="described"))
        await nobs.put("other", io.BytesIO(data))
        await nobs.put("mine", b"replaced by nats-py")

    _run(nats_server.url, change)
    assert obs.get_bytes("mine") == b"replaced by nats-py"
    assert obs.get_bytes("other") == data
    state = js.stream("OBJ_both").info()
    assert state.state.messages == 2 + 2 + 1  # other's 2 chunks and meta, mine's chunk and meta
    assert first.nuid != obs.info("mine").nuid

    obs.update_meta("other", ObjectMeta(name="renamed", description="again"))
    obs.delete("mine")

    async def check(njs: Any) -> tuple[Any, Any, bool]:
        nobs = await njs.object_store("both")
        renamed = await nobs.get("renamed")
        info = await nobs.get_info("renamed")
        try:
            await nobs.get_info("mine")
        except nats.js.errors.NotFoundError:
            return renamed.data, info.description, True
        return renamed.data, info.description, False

    got, description, mine_gone = _run(nats_server.url, check)
    assert (got, description, mine_gone) == (data, "again", True)


def test_a_meta_as_nats_go_writes_it(js: JetStream) -> None:
    """The JSON nats.go stores (zero mtime, headers as lists, metadata, options)."""
    obs = js.create_object_store(bucket="go", storage="memory")
    data = b"from go " * 1000
    nuid = "GoNuid0123456789abcdef"
    for i in range(0, len(data), 3000):
        js.publish(f"$O.go.C.{nuid}", data[i : i + 3000])
    meta = {
        "name": "go/obj",
        "description": "made in Go",
        "headers": {"Content-Type": ["text/plain"]},
        "metadata": {"team": "go"},
        "options": {"max_chunk_size": 3000},
        "bucket": "go",
        "nuid": nuid,
        "size": len(data),
        "mtime": "0001-01-01T00:00:00Z",
        "chunks": 3,
        "digest": _digest(data),
    }
    subject = "$O.go.M." + base64.urlsafe_b64encode(b"go/obj").decode()
    js.publish(subject, json.dumps(meta).encode(), headers={"Nats-Rollup": "sub"})
    info = obs.info("go/obj")
    assert (info.description, info.headers, info.metadata) == (
        "made in Go",
        {"Content-Type": ["text/plain"]},
        {"team": "go"},
    )
    assert info.mtime != "0001-01-01T00:00:00Z"  # the message's time
    assert obs.get_bytes("go/obj") == data
    # Written back by update_meta: what Go wrote survives.
    obs.update_meta("go/obj", ObjectMeta(name="go/obj", description="seen", metadata={"x": "y"}))
    stored = json.loads(js.stream("OBJ_go").get_msg(last_by_subject=subject).data)
    assert stored["options"] == {"max_chunk_size": 3000}
    assert stored["metadata"] == {"x": "y"}
    assert "headers" not in stored  # replaced by the new meta's (none)
