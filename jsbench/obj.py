"""Object store workloads for jsclient, nats-py and natsio (both asyncio).

``n`` is a number of 128 KiB chunks (``size``): the object is ``n * size``
bytes (64 MiB in a full run) and the rate is chunks per second, so
``rate * size`` is bytes per second. As in :mod:`jsbench.kv`, each function
runs in a fresh process and only does the timed work (connecting, binding to
the bucket and making the data are not timed); the buckets are prepared by
the parent with jsclient's stream API rather than its object store code:
the ADR-20 stream ``OBJ_<bucket>`` as every client's ``create_object_store``
makes it (file storage), and for the get, the object's chunks and its meta
published directly.

- ``put``: one put of an in-memory object (every client's put of bytes; each
  checks the info its put returns, which comes once every chunk is acked);
- ``get``: one get of the whole object into memory (jsclient and natsio:
  ``get_bytes``; nats-py: ``get`` writing into a ``BytesIO``, its fastest way,
  as accumulating ``result.data`` copies the object once per chunk);
- the raw columns move the same bytes with core NATS on a plain socket: a
  publish of ``n`` messages of ``size`` bytes (then PING/PONG), and a receive
  of as many from an external publisher with a credit window of 8 MiB;
- ``file``: jsclient alone, ``put_file`` then ``get_file`` of a file on disk,
  for its peak RSS growth (the object never is in memory whole).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from jsbench.result import Result

PUT_BUCKET, GET_BUCKET, FILE_BUCKET = "BENCH_OBJPUT", "BENCH_OBJGET", "BENCH_OBJFILE"
OBJECT = "bench.bin"
_NUID = "BenchObjectNuid0000001"
#: The raw receive's credit window, in messages of ``size`` bytes (8 MiB of 128 KiB).
_RAW_WINDOW = 64


def _data(n: int, size: int) -> bytes:
    """The object: ``n * size`` bytes, the same for every client and run."""
    block = hashlib.sha256(b"jsbench").digest() * (size // 32 + 1)
    return block[:size] * n


# -- set-up and checks, run by the parent ----------------------------------------------


def _make_bucket(js: Any, bucket: str, description: str | None = None) -> None:
    """Delete ``bucket`` if it exists and create it empty (as create_object_store would)."""
    import jsclient
    from jsclient.api import DiscardPolicy, StorageType

    try:
        js.delete_stream(f"OBJ_{bucket}")
    except jsclient.errors.NotFoundError:
        pass
    js.create_stream(
        name=f"OBJ_{bucket}",
        description=description,
        subjects=[f"$O.{bucket}.C.>", f"$O.{bucket}.M.>"],
        storage=StorageType.FILE,
        max_bytes=-1,
        discard=DiscardPolicy.NEW,
        allow_rollup_hdrs=True,
        allow_direct=True,
    )


def setup_put(url: str, n: int, size: int) -> None:
    """A fresh, empty bucket for a put run."""
    import jsclient

    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        _make_bucket(nc.jetstream(), PUT_BUCKET)


def setup_get(url: str, n: int, size: int) -> None:
    """A bucket holding one object of ``n`` chunks, shared by the get runs of that size.

    Gets only read, so the bucket is filled again only when it was made for
    another count or size (its description records which).
    """
    import jsclient

    tag = f"jsclient bench: {n} chunks x {size} B"
    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        js = nc.jetstream(publish_async_max_pending=256, publish_async_stall_wait=60.0)
        try:
            stream = js.stream(f"OBJ_{GET_BUCKET}")
            info = stream.info()
            if info.config.description == tag and info.state.messages == n + 1:
                for name in list(stream.consumer_names()):
                    stream.delete_consumer(name)
                return
        except jsclient.errors.NotFoundError:
            pass
        _make_bucket(js, GET_BUCKET, description=tag)
        data = _data(n, size)
        for i in range(n):
            js.publish_async(f"$O.{GET_BUCKET}.C.{_NUID}", data[i * size : (i + 1) * size])
        js.publish_async_complete(timeout=300)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()
        meta = {
            "name": OBJECT,
            "options": {"max_chunk_size": size},
            "bucket": GET_BUCKET,
            "nuid": _NUID,
            "size": len(data),
            "mtime": "0001-01-01T00:00:00Z",
            "chunks": n,
            "digest": f"SHA-256={digest}",
        }
        name = base64.urlsafe_b64encode(OBJECT.encode()).decode()
        body = json.dumps(meta).encode()
        js.publish(f"$O.{GET_BUCKET}.M.{name}", body, headers={"Nats-Rollup": "sub"})
        have = js.stream(f"OBJ_{GET_BUCKET}").info().state.messages
        if have != n + 1:
            raise RuntimeError(f"bucket {GET_BUCKET} pre-fill stored {have} of {n + 1} messages")


def _check_got(got: int, n: int, size: int) -> None:
    if got != n * size:
        raise RuntimeError(f"got {got} bytes, not {n * size}")


# -- put -------------------------------------------------------------------------------


def js_put(url: str, n: int, size: int) -> Result:
    import jsclient

    data = _data(n, size)
    with jsclient.connect(url) as nc:
        obs = nc.jetstream().object_store(PUT_BUCKET)
        t0 = time.perf_counter()
        info = obs.put(OBJECT, data, chunk_size=size)
        dt = time.perf_counter() - t0
    _check_got(int(info.size or 0), n, size)
    return Result(n / dt)


def py_put(url: str, n: int, size: int) -> Result:
    import asyncio

    import nats
    from nats.js.api import ObjectMeta, ObjectMetaOptions

    data = _data(n, size)

    async def run() -> tuple[float, Any]:
        nc = await nats.connect(url)
        obs = await nc.jetstream().object_store(PUT_BUCKET)
        meta = ObjectMeta(name=OBJECT, options=ObjectMetaOptions(max_chunk_size=size))
        t0 = time.perf_counter()
        info = await obs.put(OBJECT, data, meta=meta)
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, info

    dt, info = asyncio.run(run())
    _check_got(info.size, n, size)
    return Result(n / dt)


def nio_put(url: str, n: int, size: int) -> Result:
    import asyncio

    import natsio
    from natsio.objectstore import ObjectMeta

    data = _data(n, size)

    async def run() -> tuple[float, Any]:
        nc = await natsio.connect(url)
        obs = await nc.jetstream().object_store(PUT_BUCKET)
        t0 = time.perf_counter()
        info = await obs.put(ObjectMeta(name=OBJECT, chunk_size=size), data)
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, info

    dt, info = asyncio.run(run())
    _check_got(info.size, n, size)
    return Result(n / dt)


def raw_put(url: str, n: int, size: int) -> Result:
    """The same bytes by core publish on a plain socket (nothing stores them)."""
    from jsbench import raw

    return raw.publish(url, n, size, subject=b"bench.obj")


# -- get -------------------------------------------------------------------------------


def js_get(url: str, n: int, size: int) -> Result:
    import jsclient

    with jsclient.connect(url) as nc:
        obs = nc.jetstream().object_store(GET_BUCKET)
        t0 = time.perf_counter()
        data = obs.get_bytes(OBJECT)  # size and digest checked
        dt = time.perf_counter() - t0
    _check_got(len(data), n, size)
    return Result(n / dt)


def py_get(url: str, n: int, size: int) -> Result:
    import asyncio
    import io

    import nats

    async def run() -> tuple[float, int]:
        nc = await nats.connect(url)
        obs = await nc.jetstream().object_store(GET_BUCKET)
        sink = io.BytesIO()
        t0 = time.perf_counter()
        await obs.get(OBJECT, writeinto=sink)  # digest checked
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, len(sink.getbuffer())

    dt, got = asyncio.run(run())
    _check_got(got, n, size)
    return Result(n / dt)


def nio_get(url: str, n: int, size: int) -> Result:
    import asyncio

    import natsio

    async def run() -> tuple[float, int]:
        nc = await natsio.connect(url)
        obs = await nc.jetstream().object_store(GET_BUCKET)
        t0 = time.perf_counter()
        data = await obs.get_bytes(OBJECT)  # size and digest checked
        dt = time.perf_counter() - t0
        await nc.close()
        return dt, len(data)

    dt, got = asyncio.run(run())
    _check_got(got, n, size)
    return Result(n / dt)


_PUBLISHER = r"""
import sys, jsclient
url, n, size, window = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
nc = jsclient.connect(url)
credits = nc.subscribe("bench.obj.credit")
nc.flush()
print("ready", flush=True)
sys.stdin.readline()
payload = b"x" * size
step = max(1, window // 2)
allowed = window
for i in range(n):
    if i >= allowed:
        credits.next_msg(timeout=60)
        allowed += step
    nc.publish("bench.obj.data", payload)
nc.flush(timeout=60)
nc.close()
"""


def raw_get(url: str, n: int, size: int) -> Result:
    """The same bytes by core receive on a plain socket, from a publisher process that
    keeps at most :data:`_RAW_WINDOW` messages in flight (credits every half window)."""
    from jsbench import raw

    window = _RAW_WINDOW
    step = max(1, window // 2)
    pub = subprocess.Popen(
        [sys.executable, "-c", _PUBLISHER, url, str(n), str(size), str(window)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert pub.stdout is not None and pub.stdin is not None
        if not pub.stdout.readline().startswith("ready"):
            raise RuntimeError("benchmark publisher failed to start")
        got = 0
        with raw.RawConn(url) as c:
            c.sock.sendall(b"SUB bench.obj.data 1\r\n")
            c.flush()
            t0 = time.perf_counter()
            pub.stdin.write("go\n")
            pub.stdin.flush()
            for i in range(1, n + 1):
                _subj, _reply, data = c.read_msg()
                got += len(data)
                if i % step == 0:
                    c.sock.sendall(b"PUB bench.obj.credit 0\r\n\r\n")
            dt = time.perf_counter() - t0
        pub.wait(timeout=120)
    finally:
        if pub.poll() is None:
            pub.kill()
            pub.wait(timeout=10)
    _check_got(got, n, size)
    return Result(n / dt)


# -- a file of n chunks, put and got back: peak RSS --------------------------------------


def _paths(n: int, size: int) -> tuple[str, str]:
    base = os.path.join(tempfile.gettempdir(), f"jsbench-obj-{n * size}")
    return base + ".src", base + ".out"


def setup_file(url: str, n: int, size: int) -> None:
    """A fresh, empty bucket, and the source file of ``n * size`` bytes."""
    import jsclient

    src, out = _paths(n, size)
    if not os.path.exists(src) or os.path.getsize(src) != n * size:
        block = _data(1, size)
        with open(src + ".tmp", "wb") as f:
            for _ in range(n):
                f.write(block)
        os.replace(src + ".tmp", src)
    if os.path.exists(out):
        os.remove(out)
    with jsclient.connect(url, name="jsclient-bench-setup") as nc:
        _make_bucket(nc.jetstream(), FILE_BUCKET)


def check_file(url: str, n: int, size: int) -> str | None:
    """After a file run: the copy has the source's size (the get checked its digest);
    both files and the bucket are removed (the next run's set-up makes them again)."""
    import jsclient

    src, out = _paths(n, size)
    try:
        got = os.path.getsize(out)
    except OSError:
        return "get_file left no file"
    finally:
        for path in (src, out):
            if os.path.exists(path):
                os.remove(path)
    with jsclient.connect(url, name="jsclient-bench-check") as nc:
        nc.jetstream().delete_stream(f"OBJ_{FILE_BUCKET}")
    if got != n * size:
        return f"the copy holds {got} bytes, not {n * size}"
    return None


def js_file(url: str, n: int, size: int) -> Result:
    """``put_file`` then ``get_file``: the rate counts both (2n chunks moved)."""
    import jsclient

    src, out = _paths(n, size)
    with jsclient.connect(url) as nc:
        obs = nc.jetstream().object_store(FILE_BUCKET)
        t0 = time.perf_counter()
        obs.put_file(src, name=OBJECT)
        info = obs.get_file(OBJECT, out)
        dt = time.perf_counter() - t0
    _check_got(int(info.size or 0), n, size)
    return Result(2 * n / dt)
