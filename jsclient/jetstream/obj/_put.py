"""Writing an object's chunks (ADR-20), for :meth:`ObjectStore.put`.

The data is cut into chunks (:func:`chunker`: slices of bytes-like data, or
reads of a binary file object, never the whole file), hashed as they go and
published with ``publish_async`` to the put's own chunk subject, keeping at
most :data:`PUT_WINDOW_BYTES` of them unacked (:func:`publish_chunks`). The
meta, written after, is the store's business.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, cast

from jsclient import errors
from jsclient.api import ObjectMeta, PubAck
from jsclient.jetstream.obj._config import DEFAULT_CHUNK_SIZE

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context

#: Bytes of chunks a put keeps published and not yet acked.
PUT_WINDOW_BYTES = 8 * 1024 * 1024

Chunk = bytes | bytearray | memoryview


def chunk_size_for(js: Context, meta: ObjectMeta | None, chunk_size: int) -> int:
    """The chunk size a put uses: ``meta.options.max_chunk_size`` unless
    ``chunk_size`` is given, checked against the server's max_payload."""
    if meta is not None:
        opts = meta.options
        if opts is not None and opts.link is not None:
            raise errors.LinkNotAllowedError()
        if opts is not None and opts.max_chunk_size and chunk_size == DEFAULT_CHUNK_SIZE:
            chunk_size = opts.max_chunk_size
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    max_payload = getattr(js._client, "max_payload", 0)
    if 0 < max_payload < chunk_size:
        raise js._client._too_big(chunk_size)
    return chunk_size


def publish_chunks(
    js: Context, subject: str, chunks: Iterator[Chunk], chunk_size: int
) -> tuple[int, int, bytes]:
    """Publish the chunks to ``subject`` and wait for their acks: ``(size, count,
    sha256 digest)``. On a failure the publishes in flight are let end (for
    the caller to purge the subject) and the error raised."""
    window: deque[Future[PubAck]] = deque()
    most = max(2, PUT_WINDOW_BYTES // chunk_size)
    # Within the context's own window of async publishes, which would
    # otherwise stall a put on a context made with a small one.
    limit = getattr(getattr(js, "_async", None), "max_pending", 0)
    if limit > 0:
        most = max(1, min(most, limit // 2))
    sha = hashlib.sha256()
    size = count = 0
    publish = js.publish_async
    try:
        for chunk in chunks:
            if len(window) >= most:
                _acked(js, window.popleft())
            # A slice of the caller's bytes goes out as it is: the frame is
            # formatted from any bytes-like payload, no copy made before.
            window.append(publish(subject, cast(bytes, chunk)))
            # Hashed after it is queued: the hash lets go of the GIL, so the
            # flusher writes this chunk meanwhile.
            sha.update(chunk)
            size += len(chunk)
            count += 1
        while True:  # not `while window`: see tests/unit/test_interrupt_cover.py
            if not window:
                break
            _acked(js, window.popleft())
    except BaseException:
        _settle(js, window)
        raise
    return size, count, sha.digest()


def _acked(js: Context, fut: Future[PubAck]) -> None:
    try:
        fut.result(timeout=js._timeout * 2 + 1.0)
    except TimeoutError as exc:
        if isinstance(exc, errors.Error):
            raise
        raise errors.TimeoutError("nats: timeout waiting for a chunk's publish ack") from None


def _settle(js: Context, window: deque[Future[PubAck]]) -> None:
    """Let the publishes in flight end, for what is purged after to include them."""
    deadline = time.monotonic() + js._timeout * 2 + 1.0
    for fut in window:
        try:
            fut.result(timeout=max(0.0, deadline - time.monotonic()))
        except BaseException:
            pass  # failed, or still in flight after the wait: purge anyway


def chunker(data: Any, size: int) -> Iterator[Chunk]:
    """The chunks of ``data``: slices of bytes-like data (no copy), or reads of a
    binary file object, filled to ``size`` (only the last is shorter). A type
    that cannot be read fails here, before anything is sent."""
    if isinstance(data, str):
        data = data.encode()
    if isinstance(data, bytes | bytearray | memoryview):
        return _slices(memoryview(data).cast("B"), size)
    if isinstance(data, io.TextIOBase | Mapping):
        raise TypeError("data must be bytes, a str or a binary file object (open it with 'rb')")
    read = getattr(data, "read", None)
    if not callable(read):
        raise TypeError(
            f"data must be bytes, a str or a binary file object, not {type(data).__name__}"
        )
    return _reads(read, size)


def _slices(view: memoryview, size: int) -> Iterator[Chunk]:
    for i in range(0, len(view), size):
        yield view[i : i + size]


def _reads(read: Callable[[int], Any], size: int) -> Iterator[Chunk]:
    while True:
        piece = read(size)
        if piece is None:
            raise ValueError("the file has no data ready (non-blocking): pass a blocking file")
        if not piece:
            return
        if not isinstance(piece, bytes | bytearray):
            raise TypeError(f"the file's read() gave {type(piece).__name__}, not bytes")
        if len(piece) == size:
            yield piece
            continue
        # A short read (a pipe, a socket, a raw file): fill the chunk, so every
        # chunk but the last has the same size whatever the reader did.
        buf = bytearray(piece)
        while len(buf) < size:
            more = read(size - len(buf))
            if not more:
                yield buf
                return
            buf += more
        yield buf
