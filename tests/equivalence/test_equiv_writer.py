"""The write queue (``writer``): vectors against both implementations, and a differential test.

Each vector is a sequence of operations on a fresh queue; every result, and
the state after each step, must be what the specification says, in the pure
module and in its Cython twin alike.
"""

from __future__ import annotations

import sys
import threading
from array import array
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

Pair = tuple[SimpleNamespace, SimpleNamespace]


def _state(q: Any) -> tuple[Any, ...]:
    return (
        len(q),
        q.nbytes,
        q.out_msgs,
        q.out_bytes,
        q.big,
        q.kicked,
        q.open,
        q.limit,
        q.max_payload,
        q.write_at,
    )


def test_codes_and_gather_threshold(impl: SimpleNamespace) -> None:
    w = impl.writer
    assert (w.QUEUED, w.KICK, w.FULL, w.TOO_BIG, w.UNKNOWN_SUBJECT, w.WRITE) == (0, 1, 2, 3, 4, 5)
    assert w.GATHER_MIN == 16 * 1024 and w.WRITE_AT == 256 * 1024


def test_closed_queue_refuses_until_opened(impl: SimpleNamespace) -> None:
    q = impl.writer.WriteQueue(100)
    assert _state(q) == (0, 0, 0, 0, False, False, False, 100, 1 << 20, 256 * 1024)
    assert q.pub(b"a", b"x", 1000) == 2
    assert q.push(b"PING\r\n") == 2
    assert q.ack("$JS.ACK.s", b"+ACK") == 2
    assert _state(q)[:4] == (0, 0, 0, 0)
    q.open = True
    assert q.pub(b"a", b"x", 1000) == 1  # the first frame wakes the writer
    assert q.pub(b"a", b"y", 1000) == 0  # already woken
    # Small frames in a row share one chunk (coalesced: no join copy later).
    assert _state(q) == (1, 24, 2, 2, False, True, True, 100, 1 << 20, 256 * 1024)


def test_frames(impl: SimpleNamespace) -> None:
    q = impl.writer.WriteQueue(1 << 30)
    q.open = True
    q.pub(b"foo.bar", b"hello", 10)
    q.pub(b"x", b"", 10)
    q.pub(b"x", bytearray(b"ab"), 10)
    q.pub(b"x", memoryview(b"abcd")[1:3], 10)
    q.pub(b"x", array("H", [1, 2]), 10)  # by its bytes: 4 of them
    q.ack("$JS.ACK.S.c.1.2.3.4.5", b"+ACK")
    q.ack("$JS.ACK.ünï", b"-NAK")
    q.ack("$JS.ACK.\udcff", b"+TERM")
    q.push(b"HPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", 2, 1)
    q.push(b"PING\r\n")
    chunks, size = q.take()
    # Every frame is small: one chunk, the frames back to back in order.
    assert len(chunks) == 1 and type(chunks[0]) is bytearray
    assert bytes(chunks[0]) == b"".join(
        [
            b"PUB foo.bar 5\r\nhello\r\n",
            b"PUB x 0\r\n\r\n",
            b"PUB x 2\r\nab\r\n",
            b"PUB x 2\r\nbc\r\n",
            b"PUB x 4\r\n\x01\x00\x02\x00\r\n",
            b"PUB $JS.ACK.S.c.1.2.3.4.5 4\r\n+ACK\r\n",
            "PUB $JS.ACK.ünï 4\r\n-NAK\r\n".encode(),
            b"PUB $JS.ACK.\xff 5\r\n+TERM\r\n",
            b"HPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
            b"PING\r\n",
        ]
    )
    assert size == sum(map(len, chunks))
    # 5 publishes, 3 acks and the HPUB counted as one; PING is not a publish.
    payload_bytes = 5 + 0 + 2 + 2 + 4 + 4 + 4 + 5 + 2
    assert (q.out_msgs, q.out_bytes, q.nbytes, len(q)) == (9, payload_bytes, 0, 0)
    assert q.take() == ([], 0)


def test_small_frames_coalesce_and_large_ones_stand_alone(impl: SimpleNamespace) -> None:
    """Frames shorter than GATHER_MIN that follow each other share one chunk
    (a bytearray made when the second comes); a large frame, a take, a pause
    or a withdrawal ends the chunk, so the next small frame starts a new one."""
    w = impl.writer
    q = w.WriteQueue(1 << 30)
    q.open = True
    q.pub(b"a", b"1", 100)
    chunks, _ = q.take()
    assert chunks == [b"PUB a 1\r\n1\r\n"] and type(chunks[0]) is bytes  # alone: as it is
    big = b"x" * w.GATHER_MIN
    q.pub(b"a", b"1", 100)
    q.push(b"PING\r\n")
    q.pub(b"b", big, 1 << 20)
    q.pub(b"a", b"2", 100)
    q.pause()
    q.ack("c", b"3")
    assert len(q) == 4
    chunks, size = q.take()  # up to the barrier
    assert chunks == [
        b"PUB a 1\r\n1\r\nPING\r\n",
        b"PUB b %d\r\n%s\r\n" % (len(big), big),
        b"PUB a 1\r\n2\r\n",
    ]
    assert [type(c) for c in chunks] == [bytearray, bytes, bytes]
    assert size == sum(map(len, chunks)) and len(q) == 1
    assert q.take() == ([], 0)  # the barrier holds the rest back


def test_limit(impl: SimpleNamespace) -> None:
    def frame(payload: bytes) -> int:
        return len(b"PUB s %d\r\n%s\r\n" % (len(payload), payload))

    q = impl.writer.WriteQueue(40)
    q.open = True
    assert q.pub(b"s", b"x" * 100, 1000) == 1  # alone, a large frame always fits
    assert q.pub(b"s", b"y", 1000) == 2  # full: nothing queued
    assert (len(q), q.nbytes, q.out_msgs) == (1, frame(b"x" * 100), 1)
    q.take()
    q.limit = 80
    assert q.pub(b"s", b"a" * 20, 1000) == 0  # kicked stays set until the writer clears it
    assert q.nbytes == frame(b"a" * 20) == 32
    assert q.pub(b"s", b"b" * 26, 1000) == 0  # 32 + 38 = 70 <= 80
    assert q.pub(b"s", b"c", 1000) == 2  # 70 + 10 > 80
    assert q.push(b"z" * 10) == 0  # 80 <= 80
    assert q.push(b"z") == 2
    assert q.push_always(b"PING\r\n") == 0  # bypasses the limit
    assert q.nbytes == 86
    q.kicked = False
    assert q.push_always(b"w", 3, 2) == 1
    assert (q.out_msgs, q.out_bytes) == (5, 100 + 20 + 26 + 3)
    q.limit = 1000
    assert q.pub(b"s", b"ok", 1000) == 0


def test_pub_str_uses_the_subject_cache(impl: SimpleNamespace) -> None:
    q = impl.writer.WriteQueue(1 << 20)
    q.open = True
    assert q.max_payload == 1024 * 1024 and q.subjects == {}
    assert q.pub_str("a.b", b"x") == 4  # not in the cache: nothing queued
    q.subjects = {"a.b": b"a.b", "ü": "ü".encode()}
    assert q.pub_str("a.b", b"x") == 1
    assert q.pub_str("ü", bytearray(b"yz")) == 0
    assert q.pub_str(b"a.b", b"x") == 4  # not a str
    assert q.pub_str(None, b"x") == 4
    q.max_payload = 3
    assert q.pub_str("a.b", b"long") == 3
    q.subjects = None
    assert q.pub_str("a.b", b"x") == 4
    chunks, _ = q.take()
    assert chunks == [b"PUB a.b 1\r\nx\r\n" + "PUB ü 2\r\nyz\r\n".encode()]
    assert q.out_msgs == 2


def test_write_at(impl: SimpleNamespace) -> None:
    q = impl.writer.WriteQueue(1 << 20)
    q.open = True
    assert q.write_at == 256 * 1024
    q.write_at = 100
    assert q.push(b"x" * 60) == 1
    assert q.push(b"x" * 30) == 0
    assert q.push(b"x" * 10) == 5  # 100 >= write_at: the adding thread should write it
    assert q.kicked  # left as it was
    # Once per write_at bytes: the frames after it (another thread is
    # writing, say) take the plain path until 100 more bytes are queued.
    q.kicked = False
    assert q.pub(b"s", b"y", 100) == 1  # a 13-byte frame: 113 queued
    assert q.push(b"x" * 60) == 0
    assert q.push_always(b"x" * 26) == 0  # 199 - 100 < write_at
    q.kicked = False
    assert q.push_always(b"PING\r\n") == 5  # checked before KICK
    assert not q.kicked
    assert q.push(b"x" * 99) == 1  # 304 - 205 < write_at
    q.take()  # the count starts again
    assert q.push(b"z") == 0  # still kicked
    assert q.push(b"x" * 99) == 5


def test_too_big(impl: SimpleNamespace) -> None:
    q = impl.writer.WriteQueue(10)
    assert q.pub(b"s", b"x" * 11, 10) == 3  # checked before anything else
    q.open = True
    assert q.pub(b"s", b"x" * 11, 10) == 3
    assert q.pub(b"s", b"x" * 10, 10) == 1
    assert (len(q), q.out_msgs) == (1, 1)


def test_pub_reply_builds_the_request_frame_and_notes_its_place(impl: SimpleNamespace) -> None:
    w = impl.writer
    q = w.WriteQueue(200)
    where = SimpleNamespace(_wlen=0, _wend=0)
    assert q.pub_reply(b"s.t", b"_INBOX.x.", "7", b"hi", where) == w.FULL  # closed
    assert (where._wlen, where._wend, len(q)) == (0, 0, 0)
    q.open = True
    q.push(b"PING\r\n")
    assert q.pub_reply(b"s.t", b"_INBOX.x.", "12", b"hi", where) == w.QUEUED
    frame = b"PUB s.t _INBOX.x.12 2\r\nhi\r\n"
    assert (where._wlen, where._wend) == (len(frame), 6 + len(frame))
    assert q.pub_reply(b"s", b"r.", "\u00fc", b"", where) == w.QUEUED  # not ASCII: UTF-8
    assert (where._wlen, where._wend) == (16, 6 + len(frame) + 16)
    assert (q.out_msgs, q.out_bytes, q.appended) == (2, 2, where._wend)
    # Over max_payload: nothing queued, nothing noted.
    q.max_payload = 3
    assert q.pub_reply(b"s", b"r.", "1", b"long", where) == w.TOO_BIG
    assert where._wend == q.appended and q.out_msgs == 2
    # Over the limit: FULL, as push.
    assert q.pub_reply(b"s", b"r.", "1", b"x" * 3 + b"", where) == w.QUEUED
    assert q.pub_reply(b"s" * 150, b"r.", "1", b"x", where) == w.FULL
    chunks, size = q.take()
    assert b"".join(chunks) == b"PING\r\n" + frame + "PUB s r.ü 0\r\n\r\n".encode() + (
        b"PUB s r.1 3\r\nxxx\r\n"
    )
    assert len(chunks) == 1 and size == q.appended
    # A large frame is a chunk of its own, and the next small one starts another.
    q.limit = q.max_payload = 1 << 20
    big = b"y" * w.GATHER_MIN
    assert q.pub_reply(b"b", b"r.", "2", big, where) == w.QUEUED  # still kicked
    assert q.big and where._wlen == len(b"PUB b r.2 16384\r\n\r\n") + len(big)
    q.pub_reply(b"c", b"r.", "3", b"z", where)
    chunks, _ = q.take()
    assert [bytes(c) for c in chunks] == [
        b"PUB b r.2 16384\r\n" + big + b"\r\n",
        b"PUB c r.3 1\r\nz\r\n",
    ]
    # An empty reply subject is sent as it is given (the caller checks subjects).
    q.pub_reply(b"e", b"", "", b"", where)
    assert bytes(q.take()[0][0]) == b"PUB e  0\r\n\r\n" and where._wlen == 12
    for bad in (
        lambda: q.pub_reply("s", b"r.", "1", b"x", where),
        lambda: q.pub_reply(b"s", "r.", "1", b"x", where),
        lambda: q.pub_reply(b"s", b"r.", 1, b"x", where),
        lambda: q.pub_reply(b"s", b"r.", "1", bytearray(b"x"), where),
    ):
        with pytest.raises(TypeError):
            bad()


def test_big_flag_and_front(impl: SimpleNamespace) -> None:
    w = impl.writer
    q = w.WriteQueue(1 << 30)
    q.open = True
    q.pub(b"s", b"x" * (w.GATHER_MIN - 1), 1 << 20)
    assert not q.big
    q.push(b"raw" * 10000)  # not a publish: does not count
    assert not q.big
    q.pub(b"s", b"x" * w.GATHER_MIN, 1 << 20)
    assert q.big
    kicked = q.kicked
    q.push_front(b"SUB a 1\r\n")
    assert q.kicked == kicked  # push_front wakes nobody
    chunks, _ = q.take()
    assert chunks[0] == b"SUB a 1\r\n" and len(chunks) == 4
    assert not q.big
    q.push(b"x", w.GATHER_MIN, 1)
    assert q.big


def test_type_errors(impl: SimpleNamespace) -> None:
    q = impl.writer.WriteQueue(100)
    q.open = True
    for call in (
        lambda: q.pub("str", b"x", 10),
        lambda: q.pub(None, b"x", 10),
        lambda: q.pub(b"s", "text", 10),
        lambda: q.pub(b"s", 5, 10),
        lambda: q.pub(b"s", [1, 2], 10),
        lambda: q.ack(b"bytes", b"+ACK"),
        lambda: q.ack("s", "+ACK"),
        lambda: q.push("text"),
        lambda: q.push(None),
        lambda: q.push_always(bytearray(b"x")),
        lambda: q.push_front("x"),
    ):
        with pytest.raises(TypeError):
            call()
    assert (len(q), q.nbytes, q.out_msgs) == (0, 0, 0)
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(ValueError):
            impl.writer.WriteQueue(bad)


def test_take_while_others_append(impl: SimpleNamespace) -> None:
    """No frame is lost or duplicated when takes run while other threads append."""
    q = impl.writer.WriteQueue(1 << 40)
    q.open = True
    n_threads, per = 4, 5000
    got: list[bytes] = []
    done = threading.Event()

    def writer(k: int) -> None:
        for i in range(per):
            q.pub(b"t%d" % k, b"%d" % i, 1 << 20)

    def taker() -> None:
        while not done.is_set() or len(q):
            chunks, size = q.take()
            assert size == sum(map(len, chunks))
            got.extend(chunks)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the GIL changes hands wherever it may
    try:
        t = threading.Thread(target=taker)
        t.start()
        ws = [threading.Thread(target=writer, args=(k,)) for k in range(n_threads)]
        for w in ws:
            w.start()
        for w in ws:
            w.join()
        done.set()
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert q.nbytes == 0
    frames = [b"PUB" + f for f in b"".join(got).split(b"PUB")[1:]]  # (no payload says PUB)
    assert len(frames) == n_threads * per
    for k in range(n_threads):
        mine = [c for c in frames if c.startswith(b"PUB t%d " % k)]
        assert mine == [b"PUB t%d %d\r\n%d\r\n" % (k, len(b"%d" % i), i) for i in range(per)]
    assert q.out_msgs == n_threads * per


def test_rekick(impl: SimpleNamespace) -> None:
    q = impl.writer.WriteQueue(1000)
    assert q.rekick(False) is False and q.kicked is False  # nothing queued: nobody to wake
    q.open = True
    assert q.pub(b"s", b"x", 100) == 1 and q.kicked  # KICK
    assert q.rekick(False) is False and q.kicked  # already awake: no second wake-up
    assert q.rekick(True) is True and q.kicked  # cleared, frames wait: wake (flag set again)
    q.take()
    assert q.rekick(True) is False and q.kicked is False  # cleared, nothing waits
    q.out = [b"left"]  # bytes a write left behind count as waiting
    assert q.rekick(False) is True and q.kicked


def test_counter(impl: SimpleNamespace) -> None:
    c = impl.writer.Counter()
    assert [next(c) for _ in range(3)] == [1, 2, 3]
    assert iter(c) is c
    z = impl.writer.Counter(0)
    assert next(z) == 0 and next(z) == 1
    big = impl.writer.Counter(2**62)
    assert next(big) == 2**62


def test_counter_threads(impl: SimpleNamespace) -> None:
    """Threads drawing at once never get the same value, and none is skipped."""
    c = impl.writer.Counter(1)
    n_threads, per = 6, 20000
    got: list[list[int]] = [[] for _ in range(n_threads)]
    start = threading.Barrier(n_threads)

    def draw(k: int) -> None:
        start.wait()
        mine = got[k]
        for _ in range(per):
            mine.append(next(c))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        ts = [threading.Thread(target=draw, args=(k,)) for k in range(n_threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)
    values = sorted(v for mine in got for v in mine)
    assert values == list(range(1, n_threads * per + 1))


ops = st.lists(
    st.one_of(
        st.tuples(st.just("pub"), st.binary(min_size=1, max_size=8), st.binary(max_size=40)),
        st.tuples(st.just("ack"), st.text(min_size=1, max_size=12), st.binary(max_size=6)),
        st.tuples(st.just("pub_str"), st.sampled_from(["a", "b.c", "zz"]), st.binary(max_size=40)),
        st.tuples(
            st.just("pub_reply"),
            st.binary(min_size=1, max_size=8),
            st.text(min_size=1, max_size=6),
            st.binary(max_size=40),
        ),
        st.tuples(st.just("max_payload"), st.integers(0, 50)),
        st.tuples(st.just("write_at"), st.integers(1, 150)),
        st.tuples(st.just("push"), st.binary(max_size=30), st.integers(0, 50), st.integers(0, 3)),
        st.tuples(st.just("always"), st.binary(max_size=30), st.integers(0, 50), st.integers(0, 3)),
        st.tuples(st.just("front"), st.binary(max_size=30)),
        st.tuples(st.just("take")),
        st.tuples(st.just("open"), st.booleans()),
        st.tuples(st.just("unkick")),
        st.tuples(st.just("rekick"), st.booleans()),
        st.tuples(st.just("limit"), st.integers(1, 200)),
    ),
    max_size=40,
)


def _apply(q: Any, op: tuple[Any, ...]) -> Any:
    kind = op[0]
    if kind == "pub":
        return q.pub(op[1], op[2], 32)
    if kind == "ack":
        return q.ack(op[1], op[2])
    if kind == "pub_str":
        return q.pub_str(op[1], op[2])
    if kind == "pub_reply":
        where = SimpleNamespace(_wlen=None, _wend=None)
        return q.pub_reply(op[1], b"_R.", op[2], op[3], where), where._wlen, where._wend
    if kind == "max_payload":
        q.max_payload = op[1]
        return None
    if kind == "write_at":
        q.write_at = op[1]
        return None
    if kind == "push":
        return q.push(op[1], op[2], op[3])
    if kind == "always":
        return q.push_always(op[1], op[2], op[3])
    if kind == "front":
        return q.push_front(op[1])
    if kind == "take":
        return q.take()
    if kind == "open":
        q.open = op[1]
        return None
    if kind == "unkick":
        q.kicked = False
        return None
    if kind == "rekick":
        return q.rekick(op[1])
    q.limit = op[1]
    return None


@settings(max_examples=300)
@given(limit=st.integers(1, 120), seq=ops)
def test_differential(both: Pair, limit: int, seq: list[tuple[Any, ...]]) -> None:
    py, c = (m.writer.WriteQueue(limit) for m in both)
    for q in (py, c):
        q.subjects = {"a": b"a", "b.c": b"b.c"}  # "zz" is not cached
    for op in seq:
        assert _apply(py, op) == _apply(c, op)
        assert _state(py) == _state(c)
    assert py.take() == c.take()
