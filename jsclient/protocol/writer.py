"""The write queue: encoded frames waiting for the socket, bounded while connected.

This pure module is the specification of its Cython twin. It is sans-I/O: the
connection owns the socket and the threads; this object only encodes and
counts. Any thread appends; one thread at a time (the holder of the
connection's write token) takes everything queued and writes it.

``WriteQueue(limit)`` has these fields:

- ``limit``: bytes the queue may hold while connected; ``open``: whether the
  connection is connected (only then do ``pub``/``push`` queue anything);
- ``nbytes``: bytes queued now; ``out_msgs``/``out_bytes``: publishes queued
  so far and their payload bytes;
- ``big``: set once a publish whose payload has at least ``GATHER_MIN`` bytes
  was queued since the last ``take`` (the writer then uses a gather write);
- ``kicked``: the writer thread was woken and has not yet looked at the queue;
  ``pub``/``push`` wake it only when this is false (the writer clears it
  *before* it takes, and writers append *before* they test it, so no wake-up
  is lost).

``pub(subject, payload, max_payload)`` queues ``PUB <subject> <len>\\r\\n<payload>\\r\\n``
as one publish; ``pub_str(subject, payload)`` does the same for a ``str``
subject found in the ``subjects`` dict (str to its checked, encoded bytes:
the client's subject cache), with the ``max_payload`` field, and returns
``UNKNOWN_SUBJECT`` (4) without queueing when the subject is not there (or
is not a ``str``); ``ack(subject, body)`` queues the same frame for a server-made
subject given as ``str`` (an ack), also as one publish; ``push(data, payload_len,
msgs)`` queues an already encoded frame counted as ``msgs`` publishes of
``payload_len`` payload bytes. Each returns:

- ``QUEUED`` (0): queued; the writer is already awake;
- ``KICK`` (1): queued; the caller must wake the writer (``kicked`` is now set);
- ``FULL`` (2): nothing queued: the queue is not ``open``, or it holds bytes and
  this frame would take it past ``limit`` (the caller makes room or buffers
  for a reconnect, then uses ``push_always``);
- ``TOO_BIG`` (3, ``pub`` only): nothing queued: the payload is longer than
  ``max_payload``;
- ``WRITE`` (5): queued, and the queue now holds at least ``write_at`` bytes
  more than when it last said ``WRITE`` (0 after a ``take``): the caller
  should write it out itself if no other thread is writing (a publishing
  thread then writes in batches, as one thread with a plain socket would,
  instead of handing every batch to the flusher); ``kicked`` is left as it
  was. This is checked before ``QUEUED``/``KICK``. Once per ``write_at``
  bytes, not on every frame past it: while another thread writes, the
  publishes that pile up meanwhile take the plain path instead of each
  asking for the busy token (that cost a publishing loop half its speed).

A frame larger than ``limit`` is still queued when the queue is empty, so a
single large message always fits. ``push_always(data, payload_len, msgs)``
queues regardless of ``open``/``limit`` and returns ``QUEUED``/``KICK``/``WRITE``;
``push_front(data)`` puts bytes before everything queued (a failed write, or
resubscriptions on reconnect) without counting publishes or waking anyone.
``take()`` returns ``(chunks, nbytes)``: every chunk queued when it started,
in order, and their size; it clears ``big``; ``len(q)`` is the number of
chunks queued. Chunks: frames shorter than ``GATHER_MIN`` appended one
after another share one chunk, a ``bytearray`` made from the first when the
second comes (a lone frame stays the ``bytes`` it was), so a write sends
them as they lie instead of joining them, which would copy every payload
once more (the Cython twin writes a small publish straight into that chunk:
no object per frame); a frame of ``GATHER_MIN`` or more is a chunk of its
own, and ``take``, ``pause`` and ``withdraw`` end the chunk being filled.

Threads: each call that changes the queue (``pub``, ``pub_str``, ``ack``,
``push``, ``push_always``, ``push_front``, ``take``, ``rekick``) is atomic with
respect to the others: this specification holds a lock of the queue's own
for its changes, the Cython twin a critical section on the queue (which is
free while a GIL exists, and a per-object lock on a free-threaded build).
Nothing relies on the GIL: no ``+=`` on a shared field outside that lock.
``rekick(clear)`` is the writer's side of the wake-up protocol in one step:
it clears ``kicked`` if ``clear``, then, when frames are queued (or ``out``
holds bytes) and ``kicked`` is false, sets it and returns True (the caller
wakes the writer); else False. Clearing the flag and looking at the queue
in one atomic step is what keeps a wake-up from being lost between a writer
that clears and a publisher that appends, whatever the memory model.
Fields written outside these calls (``kicked = True`` by a thread about to
wake the writer) are single stores: two threads that both set it both wake
the writer, which costs a spurious wake-up, never a lost one.

Positions (what reached a socket; :mod:`jsclient.jetstream.publish.engine`
asks them instead of guessing from clocks): every byte appended at the back
(``pub``, ``pub_str``, ``ack``, ``push``, ``push_always``) has a place in the
queue's *write stream*; ``appended`` is the stream's length so far.
``push_at``/``push_always_at`` are ``push``/``push_always`` returning
``appended << 3 | code`` (the position just past the frame, and the code),
so a caller learns, atomically with the append, where its frame ends.
``push_front`` bytes (resubscriptions) have no place: they go first and
belong to no publish. ``written`` is the position up to which whole
commands were written to sockets that are now lost: ``recover()`` sets it
(every command before the cut is written, the one the cut fell in and all
after it are not, and they go out again on the next socket). ``written_now()``
is that position for the live socket, for the holder of the write token.
``withdraw(ranges)`` takes frames back (each a ``(start, end)`` position
range) that are still queued and not yet taken by a writer, in one step with
respect to every other call, and returns a list of booleans: True for each
range taken out (its bytes will never be written), False for one already taken
(written, being written, or in a batch a writer holds) or not a frame's range.
Withdrawn bytes keep their positions (they are *holes* in the stream).
``pause()`` sets a *barrier* at ``appended``: from then on a writer takes
only frames before it (what was queued earlier still goes out; what comes
later waits for the next socket, after ``recover()``, which lifts it). A
writer so stops at a known place without a race with threads that append.

``Counter(start=1)``: ``next(counter)`` gives ``start``, ``start + 1``, ...
to any number of threads at once, each value exactly once (sids, reply
tokens, pull tokens, flight ids). ``itertools.count`` is not that on a
free-threaded build. This specification increments under a lock; the
Cython twin with one atomic add.

Writing: ``write(sock, flags, gather)`` is for the one thread that holds the
connection's write token. It moves everything queued to ``out`` (one joined
buffer, or with ``gather`` and a large frame among them, runs of small frames
joined and large frames as they are), then sends ``out`` with
``sock.send``/``sock.sendmsg`` and ``flags``, advancing ``out`` and
``out_sent`` (bytes of ``out[0]`` already sent) by what each call took. It
returns ``DONE`` (0) once ``out`` is empty, or ``LEFT`` (1) when the socket
took no more (``BlockingIOError``); any other exception of the socket
propagates with ``out``/``out_sent`` exact. Every buffer of ``out`` starts at
a command boundary, so ``recover()`` (after the socket is lost) can put them
back in front of the queue from the start of the command the cut fell in
(:func:`jsclient.protocol.commands.frame_start`): the next server gets whole
commands, and the commands sent whole before the cut are not sent twice.
``try_write(token, sock, flags, gather)`` does the same for a thread that
does not hold the token: it takes ``token`` (a lock) only if it is free,
writes, and releases it; ``BUSY`` (2) when another thread holds it.
In the Cython twin ``write`` and ``try_write`` are each one C call that runs
no Python code besides the socket's and the lock's methods, so an interrupt
raised into the writing thread lands before or after it: no byte is sent
twice or skipped, and the token is never left taken.

``pub`` takes a ``bytes`` subject and any bytes-like payload (its bytes are
sent, and counted); ``ack`` a ``str`` subject, encoded as UTF-8
(``surrogateescape``), and a ``bytes`` body; ``push``/``push_always``/
``push_front`` take ``bytes``. Other types raise ``TypeError``. Lengths are
written in ASCII decimal.
"""

from __future__ import annotations

import threading
from typing import Any

from jsclient.protocol.commands import frame_start

QUEUED = 0
KICK = 1
FULL = 2
TOO_BIG = 3
UNKNOWN_SUBJECT = 4
WRITE = 5
#: ``write`` results.
DONE = 0
LEFT = 1
BUSY = 2

#: Payloads from this size on make ``big`` true: their frames are worth a
#: gather write (no join copy) on their way to the socket.
GATHER_MIN = 16 * 1024
#: Default ``write_at``: a queue this full is written by the thread adding to it.
WRITE_AT = 256 * 1024


def _need(value: object, kind: type, name: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be {kind.__name__}, not {type(value).__name__}")


class WriteQueue:
    """Frames waiting for the socket; see the module docstring."""

    __slots__ = (
        "_barrier",
        "_chunks",
        "_from",
        "_holes",
        "_lead",
        "_lock",
        "_open",
        "_out_end",
        "_out_from",
        "_out_holes",
        "_out_lead",
        "_out_len",
        "_write_mark",
        "appended",
        "big",
        "iov_max",
        "kicked",
        "limit",
        "max_payload",
        "nbytes",
        "open",
        "out",
        "out_bytes",
        "out_msgs",
        "out_sent",
        "subjects",
        "write_at",
        "written",
    )

    def __init__(self, limit: int) -> None:
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"WriteQueue: limit must be a positive int, got {limit!r}")
        self._chunks: list[Any] = []  # bytes, and bytearrays of coalesced frames
        self._open = False  # the last chunk takes more small frames (see _push)
        self._lock = threading.Lock()
        self.limit = limit
        self.nbytes = 0
        self.open = False
        self.big = False
        self.kicked = False
        self.out_msgs = 0
        self.out_bytes = 0
        self.max_payload = 1024 * 1024
        self.write_at = WRITE_AT
        self.subjects: dict[str, bytes] = {}
        self.out: list[Any] = []
        self.out_sent = 0
        self.iov_max = 1024
        # Positions (see the module docstring). ``_from``: where the queued
        # (not yet taken) counted bytes start; ``_lead``: bytes of push_front
        # before them (no position); ``_holes``: withdrawn ranges at or after
        # ``_from``, sorted. The ``_out_*`` fields describe the batch in ``out``:
        # the same three when it was taken, its end and its physical length.
        self.appended = 0
        self.written = 0
        self._from = 0
        self._lead = 0
        self._holes: list[tuple[int, int]] = []
        self._barrier = -1  # pause(): take nothing past this position (-1: none)
        self._write_mark = 0  # nbytes when WRITE was last returned (0 after take)
        self._out_from = 0
        self._out_end = 0
        self._out_lead = 0
        self._out_len = 0
        self._out_holes: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self._chunks)

    def pub(self, subject: bytes, payload: bytes, max_payload: int) -> int:
        _need(subject, bytes, "subject")
        if type(payload) is not bytes:
            payload = memoryview(payload).tobytes()  # any bytes-like object, by its bytes
        plen = len(payload)
        if plen > max_payload:
            return TOO_BIG
        frame = b"PUB %s %d\r\n%s\r\n" % (subject, plen, payload)
        return self._add(frame, plen, 1)

    def pub_str(self, subject: str, payload: bytes) -> int:
        subjects = self.subjects
        subj = subjects.get(subject) if subjects is not None and type(subject) is str else None
        if subj is None:
            return UNKNOWN_SUBJECT
        return self.pub(subj, payload, self.max_payload)

    def pub_reply(
        self, subject: bytes, reply: bytes, token: str, payload: bytes, tracked: Any
    ) -> int:
        """``PUB subject reply+token len``: a request's frame, built in the queue.

        As :meth:`push` (QUEUED, KICK, WRITE or FULL; TOO_BIG over
        ``max_payload``, nothing queued then), and a queued frame's length and
        end position go to ``tracked._wlen`` and ``tracked._wend``.
        """
        _need(subject, bytes, "subject")
        _need(reply, bytes, "reply")
        _need(token, str, "token")
        _need(payload, bytes, "payload")
        plen = len(payload)
        if plen > self.max_payload:
            return TOO_BIG
        frame = b"PUB %s %s%s %d\r\n%s\r\n" % (
            subject,
            reply,
            token.encode("utf-8", "surrogateescape"),
            plen,
            payload,
        )
        n = len(frame)
        with self._lock:
            if not self.open or (self.nbytes and self.nbytes + n > self.limit):
                return FULL
            rc = self._push(frame, plen, 1)
            end = self.appended
        tracked._wlen = n
        tracked._wend = end
        return rc

    def ack(self, subject: str, body: bytes) -> int:
        _need(subject, str, "subject")
        _need(body, bytes, "body")
        frame = b"PUB %s %d\r\n%s\r\n" % (
            subject.encode("utf-8", "surrogateescape"),
            len(body),
            body,
        )
        return self._add(frame, len(body), 1)

    def push(self, data: bytes, payload_len: int = 0, msgs: int = 0) -> int:
        _need(data, bytes, "data")
        return self._add(data, payload_len, msgs)

    def push_at(self, data: bytes, payload_len: int = 0, msgs: int = 0) -> int:
        _need(data, bytes, "data")
        n = len(data)
        with self._lock:
            if not self.open or (self.nbytes and self.nbytes + n > self.limit):
                return self.appended << 3 | FULL
            rc = self._push(data, payload_len, msgs)
            return self.appended << 3 | rc

    def _add(self, data: bytes, payload_len: int, msgs: int) -> int:
        n = len(data)
        with self._lock:
            if not self.open or (self.nbytes and self.nbytes + n > self.limit):
                return FULL
            return self._push(data, payload_len, msgs)

    def push_always(self, data: bytes, payload_len: int = 0, msgs: int = 0) -> int:
        _need(data, bytes, "data")
        with self._lock:
            return self._push(data, payload_len, msgs)

    def push_always_at(self, data: bytes, payload_len: int = 0, msgs: int = 0) -> int:
        _need(data, bytes, "data")
        with self._lock:
            rc = self._push(data, payload_len, msgs)
            return self.appended << 3 | rc

    def _push(self, data: bytes, payload_len: int, msgs: int) -> int:
        # Under self._lock. Frames shorter than GATHER_MIN that follow each
        # other are coalesced into one chunk (a bytearray, made from the first
        # when the second comes): a write then sends it as it is, where joining
        # separate frames would copy each payload once more.
        n = len(data)
        chunks = self._chunks
        if n < GATHER_MIN and self._open:
            last = chunks[-1]
            if type(last) is bytes:
                last = chunks[-1] = bytearray(last)
            last += data
        else:
            chunks.append(data)
            self._open = n < GATHER_MIN
        self.nbytes += n
        self.appended += n
        if msgs:
            self.out_msgs += msgs
            self.out_bytes += payload_len
            if payload_len >= GATHER_MIN:
                self.big = True
        if self.nbytes >= self.write_at + self._write_mark:
            self._write_mark = self.nbytes
            return WRITE
        if self.kicked:
            return QUEUED
        self.kicked = True
        return KICK

    def push_front(self, data: bytes) -> None:
        _need(data, bytes, "data")
        with self._lock:
            self._chunks.insert(0, data)
            self.nbytes += len(data)
            self._lead += len(data)

    def take(self) -> tuple[list[bytes], int]:
        with self._lock:
            chunks = self._chunks
            if not chunks:
                return [], 0
            keep: list[bytes] = []
            end = self.appended
            if self._barrier >= 0:
                end = self._barrier
                chunks, keep = self._split_at(chunks, end)
                if not chunks:
                    return [], 0
            else:
                self.big = False
            self._chunks = keep
            self._open = False
            size = sum(map(len, chunks))
            self.nbytes -= size
            # What ``out`` will hold: for written_now() and recover().
            holes = self._holes
            self._out_from = self._from
            self._out_end = end
            self._out_lead = self._lead
            self._out_len = size
            self._out_holes = [h for h in holes if h[0] < end]
            self._holes = [h for h in holes if h[0] >= end]
            self._from = end
            self._lead = 0
            self._write_mark = 0
        return chunks, size

    def _split_at(self, chunks: list[bytes], pos: int) -> tuple[list[bytes], list[bytes]]:
        # Under self._lock: the chunks before position ``pos`` and those after
        # (appended whole after it: they are counted off from the end).
        after = self.appended - pos - sum(e - s for s, e in self._holes if s >= pos)
        i = len(chunks)
        while after > 0 and i > 0:
            i -= 1
            after -= len(chunks[i])
        return chunks[:i], chunks[i:]

    def pause(self) -> int:
        with self._lock:
            self._open = False  # the barrier falls between chunks
            self._barrier = self.appended
            return self._barrier

    def written_now(self) -> int:
        with self._lock:
            return self._written_now()

    def _written_now(self) -> int:
        # The position up to which whole commands are written: all that was
        # taken, or, with ``out`` part sent, up to the command the cut is in.
        out = self.out
        if not out:
            return self._from
        first = out[0]
        cut = self._out_len - sum(map(len, out)) + frame_start(first, self.out_sent)
        return self._position(cut)

    def _position(self, cut: int) -> int:
        # The stream position of byte ``cut`` of the batch in ``out``.
        c = cut - self._out_lead
        pos = self._out_from
        if c <= 0:
            return pos
        for s, e in self._out_holes:
            seg = s - pos
            if c <= seg:
                return pos + c
            c -= seg
            pos = e
        return pos + c

    def withdraw(self, ranges: list[tuple[int, int]]) -> list[bool]:
        with self._lock:
            ok = [False] * len(ranges)
            start = self._from
            holes = self._holes
            merged: list[tuple[int, int]] = []
            cuts: list[tuple[int, int]] = []  # physical, in the queued counted bytes
            hi = 0
            gone = 0  # bytes of the holes before the range looked at (already cut out)
            last = start  # the end of the last hole or range kept
            for i in sorted(range(len(ranges)), key=lambda k: ranges[k][0]):
                s, e = ranges[i]
                if not (type(s) is int and type(e) is int):
                    raise TypeError("withdraw: ranges are (start, end) pairs of ints")
                while True:  # the test inside: see tests/unit/test_interrupt_cover.py
                    if hi >= len(holes) or holes[hi][1] > s:
                        break
                    h = holes[hi]
                    merged.append(h)
                    gone += h[1] - h[0]
                    last = h[1]
                    hi += 1
                if s < last or e <= s or e > self.appended:
                    continue  # taken already, overlapping, or not a range
                if hi < len(holes) and holes[hi][0] < e:
                    continue  # overlaps a hole
                ps = s - start - gone
                cuts.append((ps, ps + e - s))
                merged.append((s, e))
                last = e  # (its bytes are still there: later offsets do not move)
                ok[i] = True
            if not cuts:
                return ok
            merged.extend(holes[hi:])
            self._holes = merged
            self._chunks = _cut(self._chunks, cuts, self._lead)
            self._open = False
            self.nbytes -= sum(pe - ps for ps, pe in cuts)
        return ok

    def rekick(self, clear: bool) -> bool:
        with self._lock:
            if clear:
                self.kicked = False
            if (self._chunks or self.out) and not self.kicked:
                self.kicked = True
                return True
            return False

    def write(self, sock: Any, flags: int, gather: bool) -> int:
        if not self.out:
            big = self.big
            chunks, _ = self.take()
            if not chunks:
                return DONE
            if len(chunks) == 1:
                self.out = chunks
            elif big and gather:
                self.out = _gather(chunks)
            else:
                self.out = [b"".join(chunks)]
            self.out_sent = 0
        out = self.out
        while out:
            sent: int
            try:
                if len(out) > 1:
                    bufs: list[Any] = out[: self.iov_max]
                    if self.out_sent:
                        bufs[0] = memoryview(out[0])[self.out_sent :]
                    sent = sock.sendmsg(bufs, (), flags)
                elif self.out_sent:
                    sent = sock.send(memoryview(out[0])[self.out_sent :], flags)
                else:
                    sent = sock.send(out[0], flags)
            except BlockingIOError:
                return LEFT
            while sent:
                left = len(out[0]) - self.out_sent
                if sent < left:
                    self.out_sent += sent
                    break
                sent -= left
                del out[0]
                self.out_sent = 0
        return DONE

    def try_write(self, token: Any, sock: Any, flags: int, gather: bool) -> int:
        if not token.acquire(False):
            return BUSY
        try:
            return self.write(sock, flags, gather)
        finally:
            token.release()

    def recover(self) -> None:
        with self._lock:
            out = self.out
            if out:
                w = self._written_now()
                first = out[0]
                start = frame_start(first, self.out_sent)
                cut = self._out_len - sum(map(len, out)) + start
                back = [bytes(b) for b in [first[start:], *out[1:]] if len(b)]
                self._chunks[0:0] = back
                self.nbytes += sum(map(len, back))
                # Resubscriptions the cut left unsent have no position either.
                # (Nothing is pushed in front between a take and its recover:
                # ``_lead`` is 0 here.)
                self._lead += max(0, self._out_lead - cut)
                self._holes = [h for h in self._out_holes if h[0] >= w] + self._holes
                self._from = w
            else:
                w = self._from
            if w > self.written:
                self.written = w
            self._barrier = -1
            self.out = []
            self.out_sent = 0
            self._out_holes = []


class Counter:
    """``start``, ``start + 1``, ... to any number of threads, each value once."""

    __slots__ = ("_lock", "_n")

    def __init__(self, start: int = 1) -> None:
        self._n = start - 1
        self._lock = threading.Lock()

    def __iter__(self) -> Counter:
        return self

    def __next__(self) -> int:
        with self._lock:
            self._n += 1
            return self._n


def _gather(chunks: list[bytes]) -> list[bytes]:
    """Buffers for one gather write: runs of small frames joined, large ones as they are."""
    bufs: list[bytes] = []
    small: list[bytes] = []
    for c in chunks:
        if len(c) >= GATHER_MIN:
            if small:
                bufs.append(small[0] if len(small) == 1 else b"".join(small))
                small = []
            bufs.append(c)
        else:
            small.append(c)
    if small:
        bufs.append(small[0] if len(small) == 1 else b"".join(small))
    return bufs


def _cut(chunks: list[bytes], cuts: list[tuple[int, int]], lead: int) -> list[bytes]:
    """``chunks`` without the byte ranges ``cuts`` (sorted, disjoint, counted from
    the end of the first ``lead`` bytes)."""
    kept: list[bytes] = []
    off = -lead  # where the chunk looked at starts
    ci = 0
    for chunk in chunks:
        n = len(chunk)
        end = off + n
        if ci >= len(cuts) or cuts[ci][0] >= end:
            kept.append(chunk)
            off = end
            continue
        at = off  # the first byte of the chunk not yet kept or cut
        while ci < len(cuts) and cuts[ci][0] < end:
            ps, pe = cuts[ci]
            if ps > at:
                kept.append(chunk[at - off : ps - off])
            if pe > end:
                at = end  # the cut goes on in the next chunk
                break
            at = pe
            ci += 1
        if at < end:
            kept.append(chunk[at - off :])
        off = end
    return kept
