"""The write queue's record of what reached a socket: positions, ``written``,
``withdraw`` and ``pause``, against both twins, with scripted sockets.

The async-publish engine decides a publish's outcome from these answers
(a publish fails as disconnected only if its frame was written whole to a
socket that was then lost; a timed-out one is withdrawn if it was never
taken), so each answer is checked against what a server would have seen:
the whole commands each socket took.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ._scripted import ScriptedSocket as Sock
from ._scripted import whole_commands as whole

Pair = tuple[SimpleNamespace, SimpleNamespace]


def frame(i: int, size: int) -> bytes:
    return b"PUB f.%d %d\r\n%s\r\n" % (i, size, b"x" * size)


def queue(impl: SimpleNamespace) -> Any:
    q = impl.writer.WriteQueue(1 << 40)
    q.open = True
    return q


def push(q: Any, data: bytes) -> tuple[int, int]:
    """Append ``data``; its (start, end) positions."""
    v = q.push_at(data, 1, 1)
    assert v & 7 in (0, 1, 5)
    end = v >> 3
    return end - len(data), end


def test_positions_are_the_stream_offsets(impl: SimpleNamespace) -> None:
    q = queue(impl)
    a = push(q, frame(1, 3))
    q.push_front(b"SUB s 1\r\n")  # no place in the stream
    b = push(q, frame(2, 10))
    v = q.push_always_at(frame(3, 0), 0, 1)
    assert a == (0, len(frame(1, 3)))
    assert b == (a[1], a[1] + len(frame(2, 10)))
    assert v >> 3 == q.appended == b[1] + len(frame(3, 0))
    assert v & 7 == impl.writer.QUEUED
    q.open = False
    assert q.push_at(b"PING\r\n") == q.appended << 3 | impl.writer.FULL  # nothing queued
    assert q.appended == v >> 3 and q.written == 0


def test_recover_reports_the_commands_written_whole(impl: SimpleNamespace) -> None:
    frames = [frame(i, 40) for i in range(4)]
    q = queue(impl)
    pos = [push(q, f) for f in frames]
    q.push_front(b"SUB s 1\r\n")  # resubscriptions: sent first, no positions
    cut = 9 + len(frames[0]) + 5  # into the second frame
    sock = Sock([cut, ConnectionResetError()])
    with pytest.raises(ConnectionResetError):
        q.write(sock, 0, False)
    assert q.written_now() == pos[0][1]
    q.recover()
    assert q.written == pos[0][1]  # the first frame only: the second was cut
    new = Sock()
    q.write(new, 0, False)
    assert whole(bytes(new.taken)) == frames[1:]
    q.recover()  # nothing half written: everything taken was written
    assert q.written == q.appended


def test_a_cut_in_the_resubscriptions_leaves_them_without_positions(impl: SimpleNamespace) -> None:
    q = queue(impl)
    p = push(q, frame(1, 5))
    q.push_front(b"SUB a 1\r\nSUB b 2\r\n")
    sock = Sock([12, BrokenPipeError()])  # inside the second SUB
    with pytest.raises(BrokenPipeError):
        q.write(sock, 0, False)
    q.recover()
    assert q.written == 0  # no frame reached the socket
    assert q.withdraw([p]) == [True]  # queued again: still withdrawable
    new = Sock()
    q.write(new, 0, False)
    assert bytes(new.taken) == b"SUB b 2\r\n"


def test_withdraw_takes_back_only_what_no_writer_took(impl: SimpleNamespace) -> None:
    frames = [frame(i, 20) for i in range(6)]
    q = queue(impl)
    pos = [push(q, f) for f in frames[:3]]
    sock = Sock([-1])  # a write takes the batch and the socket takes nothing
    assert q.write(sock, 0, False) == impl.writer.LEFT
    pos += [push(q, f) for f in frames[3:]]
    assert q.withdraw([pos[1], pos[4], (pos[5][0], pos[5][1] + 1), (7, 3)]) == [
        False,  # taken (in the writer's batch)
        True,
        False,  # not a frame's range (past the end)
        False,
    ]
    assert q.withdraw([pos[4]]) == [False]  # once
    assert q.nbytes == len(frames[3]) + len(frames[5])
    assert q.write(sock, 0, False) == impl.writer.DONE  # the batch it held
    assert q.write(sock, 0, False) == impl.writer.DONE  # then the queue
    assert whole(bytes(sock.taken)) == [frames[i] for i in (0, 1, 2, 3, 5)]
    assert q.written_now() == q.appended


def test_withdrawn_frames_keep_the_positions_exact(impl: SimpleNamespace) -> None:
    # Frames withdrawn from the middle of a recovered batch (one joined buffer)
    # and the cut position after them must still map to the right stream places.
    frames = [frame(i, 30) for i in range(8)]
    q = queue(impl)
    pos = [push(q, f) for f in frames]
    sock = Sock([len(frames[0]) + 3, OSError("cut")])
    with pytest.raises(OSError):
        q.write(sock, 0, False)
    q.recover()
    assert q.written == pos[0][1]
    assert q.withdraw([pos[2], pos[3], pos[6]]) == [True, True, True]
    sock2 = Sock([len(frames[1]) + len(frames[4]) + 10, OSError("cut")])
    with pytest.raises(OSError):
        q.write(sock2, 0, False)
    assert whole(bytes(sock2.taken)) == [frames[1], frames[4]]
    q.recover()
    assert q.written == pos[4][1]  # the holes before it count as passed
    sock3 = Sock()
    q.write(sock3, 0, False)
    assert whole(bytes(sock3.taken)) == [frames[5], frames[7]]
    assert q.written_now() == q.appended


def test_pause_stops_at_the_barrier_until_recover(impl: SimpleNamespace) -> None:
    q = queue(impl)
    before = [push(q, frame(i, 8)) for i in range(3)]
    assert q.pause() == before[-1][1]
    after = [push(q, frame(i, 8)) for i in range(3, 5)]
    sock = Sock()
    assert q.write(sock, 0, False) == impl.writer.DONE
    assert whole(bytes(sock.taken)) == [frame(i, 8) for i in range(3)]
    assert q.write(sock, 0, False) == impl.writer.DONE  # nothing past the barrier
    assert len(sock.taken) == sum(e - s for s, e in before)
    assert q.written_now() == before[-1][1] and len(q) == 1  # the two after, coalesced
    assert q.withdraw([after[0]]) == [True]  # still queued
    q.recover()  # the socket is given up: the barrier goes with it
    assert q.written == before[-1][1]
    new = Sock()
    q.write(new, 0, False)
    assert whole(bytes(new.taken)) == [frame(4, 8)]


# -- the differential test, with an oracle ------------------------------------------


def _run(impl: SimpleNamespace, seed: int, steps: int) -> list[Any]:
    """Random pushes, withdrawals, pauses, partial writes and cuts; every answer
    of the queue checked against the sockets' whole commands. Returns the trace."""
    rnd = random.Random(seed)
    q = queue(impl)
    frames: dict[bytes, tuple[int, int]] = {}  # frame -> its positions
    gone: set[bytes] = set()  # withdrawn
    seen: dict[bytes, int] = {}  # frame -> how many sockets got it whole
    trace: list[Any] = []
    sock = Sock()
    prev_written = 0
    n = 0

    def cut_socket(resub: bool = True) -> None:
        nonlocal sock, prev_written
        q.recover()
        got = whole(bytes(sock.taken))
        for f in got:
            if f.startswith(b"PUB"):
                seen[f] = seen.get(f, 0) + 1
        on_this = {f for f in got if f.startswith(b"PUB")}
        for f, (_s, e) in frames.items():
            if prev_written < e <= q.written:
                assert f in on_this or f in gone, "counted as written, never sent whole"
            elif e > q.written:
                assert f not in on_this, "sent whole, not counted as written"
        prev_written = q.written
        trace.append(("written", q.written))
        sock = Sock()
        if resub and rnd.random() < 0.5:
            q.push_front(b"SUB s.%d 1\r\n" % n)

    for _ in range(steps):
        r = rnd.random()
        if r < 0.4:
            n += 1
            f = frame(n, rnd.choice([0, 3, 50, 400, 20_000]))
            frames[f] = push(q, f)
            trace.append(("push", frames[f]))
        elif r < 0.55 and frames:
            pick = rnd.sample(sorted(frames), min(len(frames), rnd.randint(1, 4)))
            ok = q.withdraw([frames[f] for f in pick])
            for f, w in zip(pick, ok, strict=True):
                if w:
                    assert f not in gone
                    gone.add(f)
            trace.append(("withdraw", ok))
        elif r < 0.6:
            trace.append(("pause", q.pause()))
        elif r < 0.85:
            sock.script = [rnd.choice([None, -1, 1, 17, 300, 5000])]
            trace.append(("write", q.write(sock, 0, rnd.random() < 0.5)))
            trace.append(("now", q.written_now()))
        else:
            sock.script = [rnd.choice([0, 5, 100, 3000]), ConnectionResetError()]
            try:
                q.write(sock, 0, False)
            except ConnectionResetError:
                pass
            cut_socket()
    cut_socket()  # lift a barrier, then everything left goes out
    q.write(sock, 0, False)
    q.write(sock, 0, False)
    cut_socket(resub=False)
    for f in frames:
        expect = 0 if f in gone else 1
        assert seen.get(f, 0) == expect, (f[:20], seen.get(f, 0), f in gone)
    assert q.nbytes == 0
    assert all(e <= q.written for f, (_, e) in frames.items() if f not in gone)
    return trace


@pytest.mark.parametrize("seed", range(40))
def test_the_record_matches_what_the_sockets_got(impl: SimpleNamespace, seed: int) -> None:
    _run(impl, seed, 60)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 80))
def test_twins_agree_on_the_record(both: Pair, seed: int, steps: int) -> None:
    py, c = both
    assert _run(py, seed, steps) == _run(c, seed, steps)
