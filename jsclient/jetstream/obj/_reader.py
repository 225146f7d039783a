"""Reading an object: :class:`ObjectReader`, a binary file object over its chunks.

The chunks (``$O.<bucket>.C.<nuid>``) are read in order through an
:class:`~jsclient.jetstream.read.reader.OrderedReader` (an ordered consumer),
a routed batch at a time, pulled a bounded number at a time and at most ``max_buffered_bytes``
(8 MiB by default) ahead of what was read -- a byte bound the server keeps,
whatever the meta says the chunk size is -- so memory holds a few chunks
whatever the object's size. A read is one-shot: when no chunk comes for the
stall timeout (the JetStream context's timeout by default; ``obs.get(name,
timeout=...)``) it raises :class:`~jsclient.errors.TimeoutError`, and so does
every later read (issue 32, ``tests/integration/test_scan_bounds.py``); a server
restart shorter than that is ridden out. The ordered consumer is pull-based: the server's
push flow control does not apply to it (there is nothing to answer, and no
reader can stall waiting for a flow-control reply); the pull's idle
heartbeats are what reveal a lost consumer, which the ordered consumer then
recreates after the last chunk it handed out.

Nothing the meta says is trusted: every chunk goes through SHA-256 as it
arrives, and when the last one (the one that left nothing pending) comes, the
size, the chunk count and the digest are checked *before* its bytes are
handed out. A mismatch raises :class:`~jsclient.errors.DigestMismatchError`
then and from every later read.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from jsclient import errors
from jsclient.api import DeliverPolicy, ObjectInfo
from jsclient.jetstream.obj._config import DEFAULT_CHUNK_SIZE
from jsclient.jetstream.obj._meta import digest_bytes
from jsclient.jetstream.read.reader import Entry, OrderedReader, buffer_limit

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.consume.contexts import MessagesContext
    from jsclient.jetstream.consume.ordered import OrderedConsumer

#: Bytes of chunks a reader lets the server send ahead of what was read (default).
WINDOW_BYTES = 8 * 1024 * 1024
#: A reader left alone this long loses its server-side consumer; the ordered
#: consumer makes a new one (after the last chunk read) when reading resumes.
INACTIVE_THRESHOLD = 60.0


def window_messages(info: ObjectInfo, window: int = WINDOW_BYTES) -> int:
    """How many chunks to pull at a time: ``window`` bytes of the largest chunk size."""
    size = int(info.size or 0)
    chunks = int(info.chunks or 0)
    largest = info.options.max_chunk_size if info.options is not None else None
    per = max(int(largest or 0), -(-size // chunks) if chunks else 0) or DEFAULT_CHUNK_SIZE
    return max(2, min(1000, window // per))


class ObjectReader(io.RawIOBase):
    """An object's bytes as a read-only binary file: ``read(n)``, ``readinto(b)``,
    ``readline()``, and iteration by chunk (each item the next stored chunk, or
    the rest of one partly read). ``info`` is the object's meta (for a link, the
    target's). Close it (or use ``with``) to let the server forget the read.
    """

    def __init__(
        self,
        js: Context,
        stream: str,
        subject: str,
        info: ObjectInfo,
        *,
        timeout: float | None = None,
        max_buffered_bytes: int | None = None,
    ) -> None:
        super().__init__()
        # First: close() (also from the finalizer of a reader whose making failed) reads them.
        self._reader: OrderedReader | None = None
        self._batch: list[Entry] = []  # chunks taken, not read yet (a routed batch, reversed)
        self._late: BaseException | None = None  # what ended the read after the batch
        self._buf = b""  # the chunk being read, from ``_pos`` on
        self._pos = 0
        self.info = info
        self._js = js
        self._stall = js._timeout if timeout is None else timeout
        if not self._stall > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self._max_bytes = buffer_limit(js, max_buffered_bytes)
        self._stream = stream
        self._subject = subject
        self._size = int(info.size or 0)
        self._chunks = int(info.chunks or 0) or None  # None: the meta does not say
        self._want = digest_bytes(info.digest)  # a bad digest fails the get, before any read
        self._sha = hashlib.sha256()
        self._got = 0
        self._count = 0
        self._started = False
        self._eof = False
        self._error: BaseException | None = None

    def __repr__(self) -> str:
        return f"<ObjectReader {self.info.bucket!r}/{self.info.name!r} size={self._size}>"

    @property
    def _oc(self) -> OrderedConsumer | None:
        """The ordered consumer being read (None before the first read and at the end)."""
        return None if self._reader is None else self._reader.oc

    @property
    def _it(self) -> MessagesContext | None:
        """Its bounded pulls (see ``OrderedReader``)."""
        return None if self._reader is None else self._reader.it

    # -- chunks ------------------------------------------------------------------

    def _start(self) -> None:
        self._started = True
        if self._size == 0 and not self._chunks:
            self._finish()
            return
        try:
            reader = OrderedReader(
                self._js,
                self._stream,
                [self._subject],
                DeliverPolicy.ALL,
                inactive_threshold=INACTIVE_THRESHOLD,
            )
        except errors.Error as exc:  # the bucket went away, the server is away...
            self._fail(exc)
        self._reader = reader
        if not reader.pending:
            self._finish()  # no chunk stored: a size mismatch, unless the object is empty
            return
        try:
            # Chunks for half the bound per pull: two pulls are open at a time
            # (see bounded_messages), each within its bytes when the meta is right.
            reader.open(window_messages(self.info, self._max_bytes // 2), self._max_bytes)
        except errors.Error as exc:
            self._fail(exc)
        except BaseException:
            self._release()
            raise

    def _next_chunk(self) -> bytes | None:
        """The next chunk's bytes, checked; None at the end."""
        if self._error is not None:
            raise self._error
        if self._eof:
            return None
        if not self._started:
            self._start()
            if self._eof:
                return None
        if not self._batch:
            self._take_batch()
        msg, _seq, pending, _ts = self._batch.pop()  # last first: see _take_batch
        data: bytes = msg.data
        self._count += 1
        self._got += len(data)
        if self._got > self._size:
            self._fail(self._mismatch(f"more than its {self._size} bytes"))
        self._sha.update(data)
        if pending == 0 or self._count == self._chunks:
            if pending:
                self._fail(self._mismatch(f"more than its {self._chunks} chunks"))
            self._finish()
        return data

    def _take_batch(self) -> None:
        """Wait for the next routed batch of chunks (into ``_batch``), at most
        the stall timeout; then the error that ended the read, if it ended.
        The batch is kept in reverse, so that each chunk taken (``pop()``) is
        let go of at once."""
        reader = self._reader
        assert reader is not None
        if self._late is not None:
            self._fail(self._late)
        batch = self._batch
        try:
            reader.read(batch, time.monotonic() + self._stall)
        except errors.TimeoutError:
            self._fail(
                errors.TimeoutError(
                    f"nats: no chunk of object {self.info.name!r} came in {self._stall:g} s"
                )
            )
        except errors.Error as exc:
            if not batch:
                self._fail(exc)
            self._late = exc  # raised once the chunks before it are read
        batch.reverse()

    def _finish(self) -> None:
        """The last chunk is in: check everything, then end (the consumer goes)."""
        if self._got != self._size:
            self._fail(self._mismatch(f"{self._got} bytes, not {self._size}"))
        if self._chunks is not None and self._count != self._chunks:
            self._fail(self._mismatch(f"{self._count} chunks, not {self._chunks}"))
        if self._want is not None and self._sha.digest() != self._want:
            self._fail(self._mismatch("a different SHA-256 digest"))
        self._eof = True
        self._release()

    def _mismatch(self, what: str) -> errors.DigestMismatchError:
        return errors.DigestMismatchError(
            f"nats: object {self.info.bucket}/{self.info.name!r} read as {what}: discard it"
        )

    def _fail(self, exc: BaseException) -> NoReturn:
        self._error = exc
        self._buf = b""
        self._pos = 0
        self._release()
        raise exc

    def _release(self) -> None:
        """Stop pulling and delete the consumer (off the caller's path)."""
        reader = self._reader
        self._reader = None
        self._batch.clear()
        if reader is not None:
            reader.close()

    def _fill(self) -> int:
        """Bytes left in the current chunk, after moving to the next if it was used up;
        0 at the end."""
        left = len(self._buf) - self._pos
        while not left:
            chunk = self._next_chunk()
            if chunk is None:
                return 0
            self._buf = chunk
            self._pos = 0
            left = len(chunk)
        return left

    def _take(self, k: int) -> bytes | memoryview:
        """The next ``k`` bytes of the current chunk (no copy)."""
        buf, pos = self._buf, self._pos
        self._pos = pos + k
        if pos == 0 and k == len(buf):
            return buf
        return memoryview(buf)[pos : pos + k]

    # -- io.RawIOBase ----------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any, /) -> int:
        """Fill ``buffer`` from the object; fewer bytes only at its end (0 there)."""
        self._check_open()
        out = memoryview(buffer).cast("B")
        n = len(out)
        done = 0
        while done < n:
            left = self._fill()
            if not left:
                break
            k = min(n - done, left)
            out[done : done + k] = self._take(k)
            done += k
        return done

    def read(self, size: int | None = -1, /) -> bytes:
        """Up to ``size`` bytes (fewer only at the end); all the rest when ``size`` < 0."""
        self._check_open()
        if size is None or size < 0:
            return self.readall()
        parts: list[bytes | memoryview] = []
        want = size
        while want > 0:
            left = self._fill()
            if not left:
                break
            k = min(want, left)
            parts.append(self._take(k))
            want -= k
        return _join(parts)

    def readall(self) -> bytes:
        """Everything not read yet."""
        self._check_open()
        parts: list[bytes | memoryview] = []
        while True:
            left = self._fill()
            if not left:
                return _join(parts)
            parts.append(self._take(left))

    def readline(self, size: int | None = -1, /) -> bytes:
        """Up to and including the next ``b"\\n"`` (or ``size`` bytes, or the end)."""
        self._check_open()
        limit = -1 if size is None else size
        parts: list[bytes | memoryview] = []
        while limit != 0:
            left = self._fill()
            if not left:
                break
            room = left if limit < 0 else min(left, limit)
            nl = self._buf.find(b"\n", self._pos, self._pos + room)
            k = room if nl < 0 else nl - self._pos + 1
            parts.append(self._take(k))
            if limit > 0:
                limit -= k
            if nl >= 0:
                break
        return _join(parts)

    def readlines(self, hint: int | None = -1, /) -> list[bytes]:
        """Every line left (lines, not chunks: iteration gives chunks)."""
        out: list[bytes] = []
        total = 0
        while line := self.readline():
            out.append(line)
            total += len(line)
            if hint is not None and 0 < hint <= total:
                break
        return out

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        """The rest of the chunk being read, or the next chunk (as it was stored)."""
        self._check_open()
        left = self._fill()
        if not left:
            raise StopIteration
        return bytes(self._take(left))

    def close(self) -> None:
        """End the read; the server-side consumer is deleted. Reading after it raises."""
        if not self.closed:
            self._release()
            self._buf = b""
            self._pos = 0
        super().close()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on a closed ObjectReader")


def _join(parts: list[bytes | memoryview]) -> bytes:
    if len(parts) == 1:
        one = parts[0]
        return one if isinstance(one, bytes) else bytes(one)
    return b"".join(parts)
