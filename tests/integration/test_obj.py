"""The Object store against a real nats-server: buckets, put and get, meta, delete, links, seal."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nats.js.api
import nats.js.errors
import pytest

from jsclient import errors
from jsclient.api import (
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    ObjectStoreConfig,
    StreamInfo,
)
from jsclient.client import Client
from jsclient.jetstream import JetStream

if TYPE_CHECKING:
    from jsclient.jetstream.obj import ObjectStore

CHUNK = 128 * 1024
NAMES = [
    "a b",
    "dir/sub/file.txt",
    "dots.in.the.name",
    "ünïcødé 名前",
    "emoji 🎉",
    "*",
    ">",
    "a\tb\nc",
    "=padding=",
    "x" * 300,
]
BAD_BUCKETS = ["", "a.b", "a b", "a*", "a>", "a/b"]


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


@pytest.fixture
def obs(js: JetStream) -> ObjectStore:
    """A memory bucket ``files``."""
    return js.create_object_store(bucket="files", storage="memory")


def _val(x: Any) -> str:
    return str(getattr(x, "value", x))


def _digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def _msgs_on(js: JetStream, stream: str, subject: str) -> int:
    """How many messages the stream holds on ``subject``."""
    resp = js._api_request(f"STREAM.INFO.{stream}", {"subjects_filter": subject})
    info = StreamInfo.from_response(resp)
    return sum((info.state.subjects or {}).values())


def _chunk_sizes(js: JetStream, bucket: str, nuid: str) -> list[int]:
    oc = js.ordered_consumer(f"OBJ_{bucket}", filter_subjects=f"$O.{bucket}.C.{nuid}")
    try:
        total = oc.cached_info.num_pending
        return [len(m.data) for m in oc.fetch(total, expires=5.0)] if total else []
    finally:
        oc.delete()


# -- buckets -----------------------------------------------------------------------


def test_create_maps_to_the_backing_stream(js: JetStream) -> None:
    obs = js.create_object_store(
        bucket="media",
        description="pictures",
        ttl=3600,
        max_bytes=1 << 30,
        storage="memory",
        metadata={"owner": "infra"},
    )
    assert obs.bucket == "media"
    c = js.stream("OBJ_media").info().config
    assert c.subjects == ["$O.media.C.>", "$O.media.M.>"]
    assert _val(c.discard) == "new"
    assert c.allow_rollup_hdrs is True
    assert c.allow_direct is True
    assert c.max_age == 3600.0
    assert c.max_bytes == 1 << 30
    assert _val(c.storage) == "memory"
    assert c.description == "pictures"
    assert c.num_replicas == 1
    assert (c.metadata or {}).get("owner") == "infra"

    js.create_object_store(ObjectStoreConfig(bucket="plain"))
    p = js.stream("OBJ_plain").info().config
    assert p.max_bytes == -1
    assert not p.max_age
    assert _val(p.storage) == "file"
    js.create_object_store({"bucket": "z", "storage": "memory"}, compression=True)
    assert _val(js.stream("OBJ_z").info().config.compression) == "s2"
    # nats-py's own config class, and keyword fields that win over it.
    nats_cfg = nats.js.api.ObjectStoreConfig(bucket="np", storage=nats.js.api.StorageType.MEMORY)
    assert js.create_object_store(nats_cfg, description="from nats-py").bucket == "np"
    np_cfg = js.stream("OBJ_np").info().config
    assert (_val(np_cfg.storage), np_cfg.description) == ("memory", "from nats-py")


def test_bucket_handles_and_lifecycle(js: JetStream) -> None:
    with pytest.raises(errors.BucketNotFoundError) as ei:
        js.object_store("missing")
    assert isinstance(ei.value, nats.js.errors.BucketNotFoundError)
    created = js.create_object_store(bucket="life", storage="memory")
    created.put("o", b"v")
    # The same config again gives the bucket as it is; another one is refused.
    again = js.create_object_store(bucket="life", storage="memory")
    assert again.get_bytes("o") == b"v"
    with pytest.raises(errors.StreamNameAlreadyInUseError):
        js.create_object_store(bucket="life", storage="memory", description="other")
    assert js.object_store("life").get_bytes("o") == b"v"
    js.delete_object_store("life")
    with pytest.raises(errors.BucketNotFoundError):
        js.object_store("life")
    with pytest.raises(errors.BucketNotFoundError):
        js.delete_object_store("life")


@pytest.mark.parametrize("bucket", BAD_BUCKETS)
def test_bad_bucket_names(js: JetStream, bucket: str) -> None:
    with pytest.raises(errors.InvalidBucketNameError):
        js.create_object_store(bucket=bucket)
    with pytest.raises(errors.InvalidBucketNameError):
        js.object_store(bucket)
    with pytest.raises(errors.InvalidBucketNameError):
        js.delete_object_store(bucket)
    assert list(js.stream_names()) == []


def test_names_and_statuses(js: JetStream) -> None:
    assert list(js.object_store_names()) == []
    assert list(js.object_stores()) == []
    js.create_stream(name="PLAIN", subjects=["plain"], storage="memory")
    js.create_key_value(bucket="kv", storage="memory")
    js.create_object_store(bucket="one", storage="memory")
    two = js.create_object_store(bucket="two", storage="memory", description="second")
    two.put("x", b"12345")
    assert sorted(js.object_store_names()) == ["one", "two"]
    statuses = sorted(js.object_stores(), key=lambda s: s.bucket)
    assert [s.bucket for s in statuses] == ["one", "two"]
    assert statuses[0].size == 0
    assert statuses[1].size > 5
    assert statuses[1].description == "second"


def test_status(js: JetStream) -> None:
    obs = js.create_object_store(
        bucket="st", ttl=120, storage="memory", description="d", metadata={"team": "a"}
    )
    obs.put("a", b"x" * 1000)
    st = obs.status()
    assert st.bucket == "st"
    assert st.description == "d"
    assert st.ttl == 120.0
    assert st.storage == "memory"
    assert st.replicas == 1
    assert st.sealed is False
    assert st.size > 1000
    assert st.backing_store == "JetStream"
    assert st.metadata == {"team": "a"}  # what the server adds of its own is left out
    assert st.is_compressed is False
    assert st.stream_info.config.name == "OBJ_st"


# -- put and get -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "chunks"),
    [(0, 0), (1, 1), (CHUNK - 1, 1), (CHUNK, 1), (CHUNK + 1, 2), (3 * CHUNK + 5, 4)],
)
def test_put_get_sizes(js: JetStream, obs: ObjectStore, size: int, chunks: int) -> None:
    data = os.urandom(size)
    info = obs.put("obj", data)
    assert (info.name, info.bucket, info.size, info.chunks) == ("obj", "files", size, chunks)
    assert info.digest == _digest(data)
    assert info.options is not None and info.options.max_chunk_size == CHUNK
    assert info.nuid and info.mtime and not info.deleted
    assert obs.get_bytes("obj") == data
    stored = obs.info("obj")
    assert (stored.size, stored.chunks, stored.digest, stored.nuid) == (
        size,
        chunks,
        info.digest,
        info.nuid,
    )
    assert stored.mtime is not None and stored.mtime.endswith("Z")
    sizes = _chunk_sizes(js, "files", info.nuid)
    assert len(sizes) == chunks
    assert all(s == CHUNK for s in sizes[:-1])


def test_small_chunks_and_wire_format(js: JetStream, obs: ObjectStore) -> None:
    data = os.urandom(10_500)
    info = obs.put("dir/report 1.pdf", data, chunk_size=1000)
    assert info.chunks == 11
    assert info.options is not None and info.options.max_chunk_size == 1000
    assert _chunk_sizes(js, "files", info.nuid) == [1000] * 10 + [500]
    assert obs.get_bytes("dir/report 1.pdf") == data
    # The meta: base64url with padding as the subject's last token, rolled up, as JSON.
    token = base64.urlsafe_b64encode(b"dir/report 1.pdf").decode()
    assert token.endswith("=")
    m = js.stream("OBJ_files").get_msg(last_by_subject=f"$O.files.M.{token}")
    assert (m.headers or {}).get("Nats-Rollup") == "sub"
    meta = json.loads(m.data)
    assert list(meta) == [
        "name",
        "options",
        "bucket",
        "nuid",
        "size",
        "mtime",
        "chunks",
        "digest",
    ]
    assert meta["name"] == "dir/report 1.pdf"
    assert meta["options"] == {"max_chunk_size": 1000}
    assert (meta["bucket"], meta["nuid"], meta["size"], meta["chunks"]) == (
        "files",
        info.nuid,
        10_500,
        11,
    )
    assert meta["mtime"] == "0001-01-01T00:00:00Z"  # never stored: the message time is
    assert meta["digest"] == _digest(data)


def test_put_str_and_bytes_likes(obs: ObjectStore) -> None:
    assert obs.put("s", "grüße").size == len("grüße".encode())
    assert obs.get_bytes("s") == "grüße".encode()
    obs.put("ba", bytearray(b"abc"))
    obs.put("mv", memoryview(b"0123456789")[2:5])
    assert obs.get_bytes("ba") == b"abc"
    assert obs.get_bytes("mv") == b"234"


class _Trickle(io.RawIOBase):
    """A raw binary stream that hands out at most 7 bytes per read."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0
        self.reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        self.reads += 1
        n = min(7, len(b), len(self._data) - self._pos)
        b[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


def test_put_from_file_objects(js: JetStream, obs: ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 + 11)
    info = obs.put("bio", io.BytesIO(data), chunk_size=1024)
    assert (info.size, info.chunks, info.digest) == (len(data), 4, _digest(data))
    assert obs.get_bytes("bio") == data

    # Short reads are gathered into full chunks: only the last is shorter.
    src = _Trickle(data)
    info = obs.put("trickle", src, chunk_size=1024)
    assert src.reads > 4
    assert _chunk_sizes(js, "files", info.nuid) == [1024, 1024, 1024, 11]
    assert obs.get_bytes("trickle") == data

    path = tmp_path / "f.bin"
    path.write_bytes(data)
    with open(path, "rb") as f:
        assert obs.put("file", f).digest == _digest(data)
    assert obs.get_bytes("file") == data


def test_put_refuses_what_it_cannot_read(js: JetStream, obs: ObjectStore, tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("text")
    with open(path) as text, pytest.raises(TypeError, match="binary"):
        obs.put("t", text)
    for bad in (12, None, {"a": 1}, [b"x"]):
        with pytest.raises(TypeError):
            obs.put("t", bad)
    for size in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            obs.put("t", b"x", chunk_size=size)  # type: ignore[arg-type]
    with pytest.raises(errors.MaxPayloadError):
        obs.put("t", b"x", chunk_size=2 * 1024 * 1024)  # above the server's 1 MiB
    assert js.stream("OBJ_files").info().state.messages == 0


def test_put_and_get_files(obs: ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(2 * CHUNK + 99)
    src = tmp_path / "photo.jpg"
    src.write_bytes(data)
    info = obs.put_file(src)
    assert info.name == "photo.jpg"
    assert obs.put_file(str(src), name="albums/2024/photo.jpg").size == len(data)
    out = tmp_path / "out.jpg"
    out.write_bytes(b"old contents, longer than nothing")
    got = obs.get_file("albums/2024/photo.jpg", out)
    assert got.name == "albums/2024/photo.jpg" and got.size == len(data)
    assert out.read_bytes() == data
    missing = tmp_path / "missing.bin"
    with pytest.raises(errors.ObjectNotFoundError):
        obs.get_file("nope", missing)
    assert not missing.exists()


def test_put_with_meta(obs: ObjectStore) -> None:
    meta = ObjectMeta(
        name="ignored",
        description="a report",
        headers={"Content-Type": "application/pdf", "X-Tags": ["a", "b"]},
        metadata={"owner": "me"},
        options=ObjectMetaOptions(max_chunk_size=100),
    )
    info = obs.put("r.pdf", b"z" * 250, meta=meta)
    assert info.name == "r.pdf"
    assert info.chunks == 3  # the meta's chunk size
    assert meta.name == "ignored"  # the caller's meta is not changed
    stored = obs.info("r.pdf")
    assert stored.description == "a report"
    assert stored.headers == {"Content-Type": ["application/pdf"], "X-Tags": ["a", "b"]}
    assert stored.metadata == {"owner": "me"}
    assert stored.options is not None and stored.options.max_chunk_size == 100
    assert obs.put("r2", b"z" * 250, meta=meta, chunk_size=50).chunks == 5

    linked = ObjectMeta(name="l", options=ObjectMetaOptions(link=ObjectLink("files", "r.pdf")))
    with pytest.raises(errors.LinkNotAllowedError):
        obs.put("l", b"x", meta=linked)


def test_replacing_purges_the_old_chunks(js: JetStream, obs: ObjectStore) -> None:
    first = obs.put("o", os.urandom(3 * 1000), chunk_size=1000)
    assert _msgs_on(js, "OBJ_files", f"$O.files.C.{first.nuid}") == 3
    data = os.urandom(2500)
    second = obs.put("o", data, chunk_size=1000)
    assert second.nuid != first.nuid
    assert _msgs_on(js, "OBJ_files", f"$O.files.C.{first.nuid}") == 0
    assert _msgs_on(js, "OBJ_files", f"$O.files.C.{second.nuid}") == 3
    assert obs.get_bytes("o") == data
    assert _msgs_on(js, "OBJ_files", "$O.files.M.>") == 1  # rolled up


class _FailingReader(io.RawIOBase):
    """Gives ``good`` full reads, then raises OSError."""

    def __init__(self, good: int, size: int) -> None:
        self._left = good
        self._size = size

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self._left == 0:
            raise OSError("disk on fire")
        self._left -= 1
        return b"d" * n


def test_failed_put_purges_its_chunks(js: JetStream, obs: ObjectStore) -> None:
    kept = obs.put("o", b"previous")
    with pytest.raises(OSError, match="disk on fire"):
        obs.put("o", _FailingReader(5, 1000), chunk_size=1000)
    assert obs.get_bytes("o") == b"previous"
    assert obs.info("o").nuid == kept.nuid
    state = js.stream("OBJ_files").info().state
    assert state.messages == 2  # the old object's one chunk and its meta

    # Refused by the stream (discard new at max_bytes): the same.
    small = js.create_object_store(bucket="small", storage="memory", max_bytes=20_000)
    with pytest.raises(errors.APIError):
        small.put("big", os.urandom(50_000), chunk_size=1000)
    with pytest.raises(errors.ObjectNotFoundError):
        small.info("big")
    assert js.stream("OBJ_small").info().state.messages == 0


def test_missing_and_deleted_objects(obs: ObjectStore) -> None:
    with pytest.raises(errors.ObjectNotFoundError) as ei:
        obs.info("nope")
    assert isinstance(ei.value, nats.js.errors.ObjectNotFoundError)
    with pytest.raises(errors.ObjectNotFoundError):
        obs.get("nope")
    with pytest.raises(errors.ObjectNotFoundError):
        obs.delete("nope")
    obs.put("gone", b"x")
    obs.delete("gone")
    with pytest.raises(errors.ObjectDeletedError) as de:
        obs.info("gone")
    assert isinstance(de.value, errors.ObjectNotFoundError)
    assert isinstance(de.value, nats.js.errors.ObjectNotFoundError)
    with pytest.raises(errors.ObjectNotFoundError):
        obs.get_bytes("gone")
    marker = obs.info("gone", show_deleted=True)
    assert marker.deleted is True
    assert (marker.size, marker.chunks, marker.digest) == (0, 0, None)


@pytest.mark.parametrize("name", NAMES)
def test_names_of_any_characters(obs: ObjectStore, name: str) -> None:
    data = name.encode() * 3
    obs.put(name, data, chunk_size=64)
    assert obs.info(name).name == name
    assert obs.get_bytes(name) == data
    assert [i.name for i in obs.list()] == [name]
    obs.update_meta(name, ObjectMeta(name=name, description="d"))
    assert obs.info(name).description == "d"
    obs.delete(name)
    assert obs.list() == []


@pytest.mark.parametrize("name", ["", None, 5, "bad \udcff surrogate"])
def test_bad_object_names(js: JetStream, obs: ObjectStore, name: Any) -> None:
    with pytest.raises(errors.InvalidObjectNameError) as ei:
        obs.put(name, b"x")
    assert isinstance(ei.value, nats.js.errors.InvalidObjectNameError)
    for call in (obs.info, obs.get, obs.delete):
        with pytest.raises(errors.InvalidObjectNameError):
            call(name)
    assert js.stream("OBJ_files").info().state.messages == 0


# -- delete, update_meta ------------------------------------------------------------------


def test_delete_purges_chunks_and_leaves_a_marker(js: JetStream, obs: ObjectStore) -> None:
    info = obs.put("o", os.urandom(5000), chunk_size=1000, meta=ObjectMeta(description="keep"))
    obs.delete("o")
    assert _msgs_on(js, "OBJ_files", f"$O.files.C.{info.nuid}") == 0
    assert js.stream("OBJ_files").info().state.messages == 1  # the marker
    marker = obs.info("o", show_deleted=True)
    assert marker.deleted and marker.nuid == info.nuid and marker.description == "keep"
    obs.delete("o")  # deleting a deleted object does nothing
    assert js.stream("OBJ_files").info().state.messages == 1
    again = obs.put("o", b"back")  # and the name can be used again
    assert obs.get_bytes("o") == b"back"
    assert not obs.info("o").deleted and again.nuid != info.nuid


def test_update_meta(obs: ObjectStore) -> None:
    data = os.urandom(3000)
    info = obs.put("o", data, chunk_size=1000, meta=ObjectMeta(description="old"))
    obs.update_meta("o", ObjectMeta(name="o", description="new", headers={"k": "v"}))
    now = obs.info("o")
    assert (now.description, now.headers, now.nuid, now.size) == (
        "new",
        {"k": ["v"]},
        info.nuid,
        3000,
    )
    with pytest.raises(errors.ObjectNotFoundError):
        obs.update_meta("nope", ObjectMeta(name="x"))
    obs.put("dead", b"x")
    obs.delete("dead")
    with pytest.raises(errors.ObjectDeletedError):
        obs.update_meta("dead", ObjectMeta(name="dead", description="z"))


def test_rename(js: JetStream, obs: ObjectStore) -> None:
    data = os.urandom(2500)
    info = obs.put("old name", data, chunk_size=1000)
    obs.put("taken", b"t")
    with pytest.raises(errors.ObjectAlreadyExists) as ei:
        obs.update_meta("old name", ObjectMeta(name="taken"))
    assert isinstance(ei.value, nats.js.errors.ObjectAlreadyExists)
    obs.update_meta("old name", ObjectMeta(name="new/name ✓", description="moved"))
    with pytest.raises(errors.ObjectNotFoundError):
        obs.info("old name", show_deleted=True)  # its meta is gone, not marked
    moved = obs.info("new/name ✓")
    assert (moved.nuid, moved.description) == (info.nuid, "moved")
    assert obs.get_bytes("new/name ✓") == data
    # A deleted object's name can be taken.
    obs.delete("taken")
    obs.update_meta("new/name ✓", ObjectMeta(name="taken"))
    assert obs.get_bytes("taken") == data
    assert sorted(i.name for i in obs.list()) == ["taken"]
    assert _msgs_on(js, "OBJ_files", f"$O.files.C.{info.nuid}") == 3


# -- links ----------------------------------------------------------------------------------


def test_links(js: JetStream, obs: ObjectStore) -> None:
    data = os.urandom(3000)
    target = obs.put("target", data, chunk_size=1000)
    link = obs.add_link("shortcut", target)
    assert link.is_link() and link.options is not None and link.options.link is not None
    assert (link.options.link.bucket, link.options.link.name) == ("files", "target")
    assert obs.info("shortcut").is_link()
    assert obs.get_bytes("shortcut") == data
    with obs.get("shortcut") as r:
        assert r.info.name == "target"  # the target's info

    # Across buckets.
    other = js.create_object_store(bucket="other", storage="memory")
    other.add_link("far", obs.info("target"))
    assert other.get_bytes("far") == data

    # A link may replace a link, or a deleted object; not a live object.
    obs.put("second", b"2")
    obs.add_link("shortcut", obs.info("second"))
    assert obs.get_bytes("shortcut") == b"2"
    obs.put("was", b"w")
    obs.delete("was")
    obs.add_link("was", target)
    assert obs.get_bytes("was") == data
    with pytest.raises(errors.ObjectAlreadyExists):
        obs.add_link("second", target)

    # Refused targets.
    with pytest.raises(errors.NoLinkToLinkError):
        obs.add_link("chain", obs.info("shortcut"))
    obs.put("doomed", b"d")
    doomed = obs.info("doomed")
    obs.delete("doomed")
    with pytest.raises(errors.NoLinkToDeletedError):
        obs.add_link("l2", obs.info("doomed", show_deleted=True))
    with pytest.raises(TypeError):
        obs.add_link("l3", "target")  # type: ignore[arg-type]

    # A stale target: deleted since, or made a link since.
    obs.add_link("stale", doomed)
    with pytest.raises(errors.ObjectNotFoundError):
        obs.get("stale")
    obs.add_link("doomed", target)  # "doomed" is now itself a link
    with pytest.raises(errors.NoLinkToLinkError):
        obs.get("stale")

    # Deleting a link leaves its target alone.
    obs.delete("shortcut")
    assert obs.get_bytes("second") == b"2"


def test_bucket_links(js: JetStream, obs: ObjectStore) -> None:
    other = js.create_object_store(bucket="other", storage="memory")
    info = obs.add_bucket_link("dir", other)
    assert info.options is not None and info.options.link is not None
    assert (info.options.link.bucket, info.options.link.name) == ("other", None)
    stored = obs.info("dir")
    assert stored.is_link()
    with pytest.raises(errors.LinkIsABucketError) as ei:
        obs.get("dir")
    assert isinstance(ei.value, nats.js.errors.LinkIsABucketError)
    assert obs.add_bucket_link("dir2", "other").options is not None
    with pytest.raises(errors.NoLinkToLinkError):
        obs.add_link("l", stored)
    obs.put("obj", b"x")
    with pytest.raises(errors.ObjectAlreadyExists):
        obs.add_bucket_link("obj", other)
    with pytest.raises(errors.InvalidBucketNameError):
        obs.add_bucket_link("bad", "a.b")


# -- seal ------------------------------------------------------------------------------------


def test_seal(obs: ObjectStore) -> None:
    obs.put("kept", b"k" * 2000, chunk_size=1000)
    obs.seal()
    assert obs.status().sealed is True
    with pytest.raises(errors.APIError):
        obs.put("new", b"n")
    with pytest.raises(errors.APIError):
        obs.delete("kept")
    assert obs.get_bytes("kept") == b"k" * 2000
    assert [i.name for i in obs.list()] == ["kept"]


def test_concurrent_puts_leave_no_orphan_chunks(js: JetStream, obs: ObjectStore) -> None:
    """Each put replaces exactly the version it read last, so every replaced
    version's chunks are purged, whichever put wins each race."""
    failures: list[BaseException] = []

    def writer(tag: bytes) -> None:
        try:
            for i in range(10):
                obs.put("o", tag * (2500 + i), chunk_size=1000)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in (b"a", b"b", b"c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures
    final = obs.info("o")
    assert final.chunks == 3
    assert obs.get_bytes("o")[:1] in (b"a", b"b", b"c")
    assert js.stream("OBJ_files").info().state.messages == 3 + 1  # its chunks and meta


def test_a_context_with_a_small_async_window(nc: Client) -> None:
    js = nc.jetstream(publish_async_max_pending=4, publish_async_stall_wait=0.05)
    obs = js.create_object_store(bucket="small", storage="memory")
    data = os.urandom(100_000)
    assert obs.put("o", data, chunk_size=1000).chunks == 100
    assert obs.get_bytes("o") == data


def test_a_bucket_without_direct_gets(js: JetStream) -> None:
    """A bucket made by an older client (no allow_direct): meta reads go to the leader."""
    js.create_stream(
        name="OBJ_old",
        subjects=["$O.old.C.>", "$O.old.M.>"],
        storage="memory",
        allow_rollup_hdrs=True,
        discard="new",
    )
    obs = js.object_store("old")
    data = os.urandom(3000)
    obs.put("o", data, chunk_size=1000)
    info = obs.info("o")
    assert info.size == 3000 and info.mtime is not None and info.mtime.endswith("Z")
    assert obs.get_bytes("o") == data
    obs.put("o", b"again")  # replaces, via the leader's view of the meta
    assert js.stream("OBJ_old").info().state.messages == 2
    obs.delete("o")
    with pytest.raises(errors.ObjectNotFoundError):
        obs.info("o")
    with pytest.raises(errors.ObjectNotFoundError):
        obs.info("never")


def test_mtime_is_the_servers_whether_read_by_direct_get_or_not(js: JetStream) -> None:
    """Issue 33: the leader's meta read gave mtime in microseconds; a direct get
    and a watch give the server's own text (nanoseconds, RFC 3339)."""
    js.create_stream(
        name="OBJ_mt",
        subjects=["$O.mt.C.>", "$O.mt.M.>"],
        storage="memory",
        allow_rollup_hdrs=True,
        discard="new",
    )
    js.object_store("mt").put("o", b"data")
    from_leader = js.object_store("mt").info("o").mtime
    listed = js.object_store("mt").list()[0].mtime
    assert from_leader is not None and from_leader == listed
    js.update_stream(
        name="OBJ_mt",
        subjects=["$O.mt.C.>", "$O.mt.M.>"],
        storage="memory",
        allow_rollup_hdrs=True,
        discard="new",
        allow_direct=True,
    )
    assert js.object_store("mt").info("o").mtime == from_leader
