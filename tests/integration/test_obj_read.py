"""Reading objects: the file object, the size and digest checks, no stall, bounded memory."""

from __future__ import annotations

import io
import json
import os
import shutil
import time
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nats.js.errors
import pytest
from _js import wait_for

from jsclient import errors
from jsclient.client import Client
from jsclient.jetstream import JetStream

if TYPE_CHECKING:
    from jsclient.jetstream.obj import ObjectStore

MiB = 1024 * 1024


@pytest.fixture
def js(nc: Client) -> JetStream:
    return nc.jetstream()


@pytest.fixture
def obs(js: JetStream) -> ObjectStore:
    """A memory bucket ``files``."""
    return js.create_object_store(bucket="files", storage="memory")


def _consumers(js: JetStream) -> int:
    return int(js.stream("OBJ_files").info().state.consumer_count or 0)


def _chunk_seqs(js: JetStream, nuid: str) -> list[int]:
    """Stream sequences of an object's chunks, in order."""
    oc = js.ordered_consumer("OBJ_files", filter_subjects=f"$O.files.C.{nuid}")
    try:
        n = oc.cached_info.num_pending
        return [m.metadata.sequence.stream for m in oc.fetch(n, expires=5.0)] if n else []
    finally:
        oc.delete()


# -- the file object ---------------------------------------------------------------------


def test_read_in_pieces(obs: ObjectStore) -> None:
    data = os.urandom(10_000)
    obs.put("o", data, chunk_size=1000)
    with obs.get("o") as r:
        assert r.info.name == "o" and r.info.size == 10_000
        assert r.readable() and not r.seekable()
        pos = 0
        for n in (1, 999, 1000, 1, 2500, 0, 3333):
            piece = r.read(n)
            assert piece == data[pos : pos + n]
            pos += n
        assert r.read() == data[pos:]
        assert r.read(10) == b""
        assert r.read() == b""
    assert r.closed
    with pytest.raises(ValueError):
        r.read(1)


def test_readinto(obs: ObjectStore) -> None:
    data = os.urandom(5_555)
    obs.put("o", data, chunk_size=1000)
    out = bytearray()
    with obs.get("o") as r:
        buf = bytearray(777)
        while n := r.readinto(buf):
            assert n == 777 or len(out) + n == len(data)  # short only at the end
            out += buf[:n]
        assert r.readinto(memoryview(bytearray(10))) == 0
    assert out == data


def test_iteration_by_chunk(obs: ObjectStore) -> None:
    data = os.urandom(4_500)
    obs.put("o", data, chunk_size=1000)
    with obs.get("o") as r:
        assert [len(c) for c in r] == [1000, 1000, 1000, 1000, 500]
    with obs.get("o") as r:
        head = r.read(10)
        rest = list(r)  # the rest of the first chunk, then whole chunks
        assert [len(c) for c in rest] == [990, 1000, 1000, 1000, 500]
        assert head + b"".join(rest) == data


def test_lines_across_chunks(obs: ObjectStore) -> None:
    data = b"".join(b"line %d %s\n" % (i, b"x" * (i % 13)) for i in range(200)) + b"tail"
    obs.put("log.txt", data, chunk_size=7)
    lines = data.splitlines(keepends=True)
    with obs.get("log.txt") as r:
        assert r.readline() == lines[0] == b"line 0 \n"
        assert r.readline(3) == b"lin"
        assert r.readlines() == [lines[1][3:], *lines[2:]]
        assert r.readline() == b""


def test_standard_io_helpers(obs: ObjectStore) -> None:
    data = os.urandom(3 * 1024 + 1)
    obs.put("o", data, chunk_size=1024)
    sink = io.BytesIO()
    with obs.get("o") as r:
        shutil.copyfileobj(r, sink, 500)
    assert sink.getvalue() == data
    with obs.get("o") as r, io.BufferedReader(r, 4096) as b:
        assert b.read(5) == data[:5]
        assert b.read() == data[5:]


def test_empty_object_reads_empty(js: JetStream, obs: ObjectStore) -> None:
    obs.put("e", b"")
    with obs.get("e") as r:
        assert r.read() == b""
        assert list(r) == []
    assert _consumers(js) == 0  # nothing to read: no consumer made


# -- checks --------------------------------------------------------------------------------


def _corrupt(js: JetStream, obs: ObjectStore, how: str) -> tuple[bytes, int]:
    """Store a 4-chunk object, then damage it on the stream; (data, chunks)."""
    data = os.urandom(4000)
    info = obs.put("o", data, chunk_size=1000)
    subject = f"$O.files.C.{info.nuid}"
    stream = js.stream("OBJ_files")
    seqs = _chunk_seqs(js, info.nuid)
    if how == "forged":  # chunk 2 replaced by other bytes of the same length, at the end
        stream.delete_msg(seqs[1])
        js.publish(subject, os.urandom(1000))
    elif how == "missing":
        stream.delete_msg(seqs[2])
    elif how == "extra":
        js.publish(subject, b"more")
    elif how == "purged":
        stream.purge(subject=subject)
    elif how == "digest":  # the meta names another digest
        m = stream.get_msg(last_by_subject="$O.files.M.bw==")
        meta = json.loads(m.data)
        meta["digest"] = "SHA-256=" + "A" * 43 + "="
        js.publish("$O.files.M.bw==", json.dumps(meta).encode(), headers={"Nats-Rollup": "sub"})
    return data, 4


@pytest.mark.parametrize("how", ["forged", "missing", "extra", "purged", "digest"])
def test_damage_is_detected(js: JetStream, obs: ObjectStore, how: str) -> None:
    _corrupt(js, obs, how)
    with pytest.raises(errors.DigestMismatchError) as ei:
        obs.get_bytes("o")
    assert isinstance(ei.value, nats.js.errors.DigestMismatchError)
    # Every later read raises it too; the consumer is gone.
    with obs.get("o") as r:
        with pytest.raises(errors.DigestMismatchError):
            r.read()
        with pytest.raises(errors.DigestMismatchError):
            r.read(1)
    assert wait_for(lambda: _consumers(js) == 0)


def test_a_bad_last_chunk_is_never_handed_out(js: JetStream, obs: ObjectStore) -> None:
    data, _ = _corrupt(js, obs, "digest")
    got: list[bytes] = []
    with obs.get("o") as r, pytest.raises(errors.DigestMismatchError):
        for chunk in r:
            got.append(chunk)
    assert b"".join(got) == data[:3000]  # three of four chunks: the last was held back


def test_get_file_of_a_damaged_object_leaves_no_file(
    js: JetStream, obs: ObjectStore, tmp_path: Path
) -> None:
    _corrupt(js, obs, "forged")
    out = tmp_path / "o.bin"
    with pytest.raises(errors.DigestMismatchError):
        obs.get_file("o", out)
    assert not out.exists()


def test_bad_meta(js: JetStream, obs: ObjectStore) -> None:
    obs.put("o", b"x")
    js.publish("$O.files.M.bw==", b"{not json", headers={"Nats-Rollup": "sub"})
    with pytest.raises(errors.BadObjectMetaError) as ei:
        obs.info("o")
    assert isinstance(ei.value, nats.js.errors.BadObjectMetaError)
    meta = {"name": "o", "bucket": "files", "nuid": "N", "size": 1, "chunks": 1}
    js.publish(
        "$O.files.M.bw==",
        json.dumps({**meta, "digest": "MD5=abc"}).encode(),
        headers={"Nats-Rollup": "sub"},
    )
    with pytest.raises(errors.BadObjectMetaError):
        obs.get("o")
    js.publish("$O.files.M.bw==", json.dumps({**meta, "nuid": ""}).encode())
    with pytest.raises(errors.BadObjectMetaError):
        obs.get("o")
    js.publish("$O.files.M.bw==", b"{not json", headers={"Nats-Rollup": "sub"})
    with pytest.raises(errors.BadObjectMetaError):
        obs.delete("o")
    assert obs.list() == []  # left out (and reported to the error callback)
    # A put mends it (and a link could replace it too).
    obs.put("o", b"mended")
    assert obs.get_bytes("o") == b"mended"


def test_lenient_digest_forms(js: JetStream, obs: ObjectStore) -> None:
    """Digests other clients write: no padding, the standard alphabet, lower case."""
    import base64
    import hashlib

    data = bytes(range(256)) * 40
    info = obs.put("o", data)
    raw = hashlib.sha256(data).digest()
    m = js.stream("OBJ_files").get_msg(last_by_subject="$O.files.M.bw==")
    for form in (
        "SHA-256=" + base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "SHA-256=" + base64.b64encode(raw).decode(),
        "sha-256=" + base64.urlsafe_b64encode(raw).decode(),
    ):
        meta = {**json.loads(m.data), "digest": form}
        js.publish("$O.files.M.bw==", json.dumps(meta).encode(), headers={"Nats-Rollup": "sub"})
        assert obs.get_bytes("o") == data
    assert info.digest is not None


# -- flow: many chunks, resets, cleanup --------------------------------------------------


def test_many_small_chunks_do_not_stall(obs: ObjectStore) -> None:
    data = os.urandom(8 * MiB)
    info = obs.put("many", data, chunk_size=4096)
    assert info.chunks == 2048
    t0 = time.monotonic()
    assert obs.get_bytes("many") == data
    assert time.monotonic() - t0 < 20


def test_reading_survives_a_lost_consumer(js: JetStream, obs: ObjectStore) -> None:
    data = os.urandom(600_000)
    obs.put("o", data, chunk_size=1000)
    with obs.get("o") as r:
        head = r.read(5_500)
        oc: Any = r._oc
        js.delete_consumer("OBJ_files", oc.name)  # the server forgets it mid-read
        rest = r.read()
    assert head + rest == data


def test_consumers_are_removed(js: JetStream, obs: ObjectStore) -> None:
    obs.put("o", os.urandom(50_000), chunk_size=1000)
    obs.get_bytes("o")
    assert wait_for(lambda: _consumers(js) == 0)
    r = obs.get("o")
    r.read(10)  # a read left half done
    assert _consumers(js) == 1
    r.close()
    assert wait_for(lambda: _consumers(js) == 0)
    r.close()  # closing twice is fine


def test_memory_stays_bounded(js: JetStream, tmp_path: Path) -> None:
    """64 MiB put from a file and got into a file: Python's heap grows by a few
    chunks (the put's window of unacked chunks, the get's pull window: 8 MiB each)."""
    obs = js.create_object_store(bucket="big", storage="file")
    src = tmp_path / "src.bin"
    block = os.urandom(MiB)
    with open(src, "wb") as f:
        for _ in range(64):
            f.write(block)
    out = tmp_path / "out.bin"
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        info = obs.put_file(src, name="big.bin")
        _, put_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        base2 = tracemalloc.get_traced_memory()[0]
        obs.get_file("big.bin", out)
        _, get_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.size == 64 * MiB and info.chunks == 512
    assert out.stat().st_size == 64 * MiB
    with open(out, "rb") as f:
        assert f.read(MiB) == block
    assert put_peak - base < 16 * MiB, f"put grew the heap by {(put_peak - base) / MiB:.1f} MiB"
    assert get_peak - base2 < 16 * MiB, f"get grew the heap by {(get_peak - base2) / MiB:.1f} MiB"


def test_a_read_after_the_bucket_went_away(js: JetStream, obs: ObjectStore) -> None:
    obs.put("o", b"x" * 5000, chunk_size=1000)
    r = obs.get("o")
    js.delete_object_store("files")
    with pytest.raises(errors.StreamNotFoundError):
        r.read()
    with pytest.raises(errors.StreamNotFoundError):
        r.read(1)  # and from every later read
    r.close()


def test_a_lost_consumer_in_a_batch_resets_after_the_batch_is_recorded(
    js: JetStream, obs: ObjectStore
) -> None:
    """The lost consumer's status comes in a batch after chunks the reader has not
    recorded yet: the reset (which starts the new consumer after the last chunk
    recorded) waits for them, so none of them comes twice."""
    data = os.urandom(300_000)
    obs.put("o", data, chunk_size=1000)
    with obs.get("o") as r:
        head = r.read(2_500)
        source: Any = r._reader.it._source  # type: ignore[union-attr]
        feed = source.feed
        seen: list[tuple[int, int]] = []  # (last recorded, last in the batch) at the reset
        orig_batch = feed.process_batch
        orig_reset = source.reset

        def batch_then_lost(batch: Any, ready: list[Any]) -> None:
            orig_batch(batch, ready)
            if ready and not seen:
                last = ready[-1].metadata.sequence.stream
                seen.append((-1, last))
                feed.on_status_error(0, errors.ConsumerDeletedError())

        def reset() -> None:
            # What the reset starts after, when it goes ahead (not while the batch
            # is still being processed: then it only notes that it is due).
            if seen and seen[0][0] == -1 and not getattr(source, "_in_batch", False):
                seen[0] = (source.oc._last_sseq, seen[0][1])
            orig_reset()

        feed.process_batch = batch_then_lost
        source.reset = reset
        rest = r.read()
    assert seen and seen[0][0] == seen[0][1], seen  # the whole batch recorded first
    assert head + rest == data
