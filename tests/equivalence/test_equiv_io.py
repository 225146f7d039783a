"""The I/O decisions of the twins, driven directly with scripted sockets: no server.

- the write queue's ``write``/``try_write``/``recover``: partial sends, a send
  that fails, and what goes out again after a reconnect (whole commands, each
  once);
- ``commands.frame_start``;
- ``delivery.route_safe`` (stops before owner code, delivers the rest as
  ``route`` does) and ``readstate.ReadState`` (reads, the backlog, the reading role).

Every test runs against the pure specification and its Cython twin, plus
differential tests that feed both the same random input.
"""

from __future__ import annotations

import queue
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jsclient import errors
from jsclient.protocol.commands import frame_start

from ._scripted import ScriptedSocket, whole_commands

Pair = tuple[SimpleNamespace, SimpleNamespace]


def _frames(n: int, size: int) -> list[bytes]:
    return [b"PUB s.%d %d\r\n%s\r\n" % (i, size, bytes([65 + i % 26]) * size) for i in range(n)]


def _open_queue(impl: SimpleNamespace, frames: list[bytes]) -> Any:
    q = impl.writer.WriteQueue(1 << 30)
    q.open = True
    for f in frames:
        q.push(f, len(f) - 20, 1)
    return q


# -- frame_start ---------------------------------------------------------------------


def test_frame_start_finds_the_cut_command() -> None:
    buf = b"PUB a 3\r\nabc\r\nHPUB b r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\nSUB c 1\r\n"
    starts = [0, 14, 46, 52]
    for offset in range(len(buf) + 1):
        expect = max(s for s in [*starts, len(buf)] if s <= offset)
        got = frame_start(buf, offset)
        assert got == (offset if offset in starts or offset == len(buf) else expect), offset
    assert frame_start(memoryview(buf), 20) == 14
    # A payload holding CRLF and command words does not confuse it.
    tricky = b"PUB a 12\r\nPING\r\nPUB x\r\n\r\nPONG\r\n"
    assert frame_start(tricky, 15) == 0 and frame_start(tricky, 24) == 24


# -- write / try_write / recover -------------------------------------------------


def test_write_sends_everything_and_empties_out(impl: SimpleNamespace) -> None:
    frames = _frames(5, 10)
    q = _open_queue(impl, frames)
    sock = ScriptedSocket([])
    assert q.write(sock, 0, False) == impl.writer.DONE
    assert bytes(sock.taken) == b"".join(frames)
    assert q.out == [] and q.out_sent == 0 and len(q) == 0 and q.nbytes == 0


def test_partial_sends_continue_where_they_stopped(impl: SimpleNamespace) -> None:
    frames = _frames(4, 30)
    q = _open_queue(impl, frames)
    sock = ScriptedSocket([7, 1, -1])
    assert q.write(sock, 0, False) == impl.writer.LEFT  # the socket took 8 bytes, then no more
    assert q.out_sent == 8 and bytes(sock.taken) == b"".join(frames)[:8]
    assert q.write(sock, 0, False) == impl.writer.DONE
    assert bytes(sock.taken) == b"".join(frames)


@pytest.mark.parametrize("gather", [False, True])
def test_recover_resends_from_the_cut_command_once(impl: SimpleNamespace, gather: bool) -> None:
    # Large frames so that gather writes keep them apart; the socket fails
    # in the middle of the third one.
    frames = _frames(5, 20_000)
    stream = b"".join(frames)
    q = _open_queue(impl, frames)
    assert q.big if gather else True
    cut = len(frames[0]) + len(frames[1]) + 1234
    sock = ScriptedSocket([cut, ConnectionResetError()])
    with pytest.raises(ConnectionResetError):
        q.write(sock, 0, gather)
    assert bytes(sock.taken) == stream[:cut]
    q.push(b"PUB late 1\r\nz\r\n")  # queued after the failure
    q.recover()
    assert q.out == [] and q.out_sent == 0
    q.push_front(b"SUB s.> 1\r\n")  # resubscriptions go first on the new socket
    new = ScriptedSocket([])
    assert q.write(new, 0, gather) == impl.writer.DONE
    sent = bytes(new.taken)
    assert sent == b"SUB s.> 1\r\n" + b"".join(frames[2:]) + b"PUB late 1\r\nz\r\n"
    # What a server sees: the whole commands the dead socket carried (the
    # half command at its end is discarded), then the new socket's. Every
    # frame exactly once, each whole.
    seen = whole_commands(stream[:cut]) + whole_commands(sent)
    assert seen == [frames[0], frames[1], b"SUB s.> 1\r\n", *frames[2:], b"PUB late 1\r\nz\r\n"]


def test_recover_at_a_boundary_resends_nothing_twice(impl: SimpleNamespace) -> None:
    frames = _frames(3, 10)
    q = _open_queue(impl, frames)
    sock = ScriptedSocket([len(frames[0]), BrokenPipeError()])
    with pytest.raises(BrokenPipeError):
        q.write(sock, 0, False)
    q.recover()
    new = ScriptedSocket([])
    q.write(new, 0, False)
    assert bytes(new.taken) == frames[1] + frames[2]


def test_try_write_takes_the_token_only_when_free(impl: SimpleNamespace) -> None:
    w = impl.writer
    frames = _frames(2, 10)
    q = _open_queue(impl, frames)
    token = threading.Lock()
    token.acquire()
    assert q.try_write(token, ScriptedSocket([]), 0, False) == w.BUSY
    assert len(q) == 1 and q.nbytes == sum(map(len, frames))  # untouched (one coalesced chunk)
    token.release()
    sock = ScriptedSocket([5, -1])
    assert q.try_write(token, sock, 0, False) == w.LEFT
    assert not token.locked() and q.out_sent == 5
    with pytest.raises(OSError):
        q.try_write(token, ScriptedSocket([OSError("boom")]), 0, False)
    assert not token.locked() and q.out_sent == 5  # released, state exact


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 5, 900, 17_000]), min_size=1, max_size=12),
    script=st.lists(st.one_of(st.integers(1, 40_000), st.just(-1), st.none()), max_size=12),
    cut_after=st.integers(0, 6),
    gather=st.booleans(),
)
def test_twins_agree_on_writes_and_recovery(
    both: Pair, sizes: list[int], script: list[Any], cut_after: int, gather: bool
) -> None:
    results = []
    for impl in both:
        frames = [b"PUB x %d\r\n%s\r\n" % (n, b"p" * n) for n in sizes]
        q = _open_queue(impl, frames)
        steps = [*script[:cut_after], OSError("cut")]
        sock = ScriptedSocket(steps)
        codes = []
        for _ in range(len(steps)):
            try:
                codes.append(q.write(sock, 0, gather))
            except OSError:
                codes.append("err")
                break
        q.recover()
        new = ScriptedSocket([])
        q.write(new, 0, gather)
        old = bytes(sock.taken)
        # What the new socket gets starts at a command boundary of the stream
        # and continues it to the end: nothing skipped, nothing sent twice
        # except the head of the command the old socket was cut in.
        stream = b"".join(frames)
        resumed = bytes(new.taken)
        assert stream.endswith(resumed)
        start = len(stream) - len(resumed)
        assert start == frame_start(stream, len(old))
        assert whole_commands(old) + whole_commands(resumed) == frames
        results.append((codes, old, resumed))
    assert results[0] == results[1]


# -- route_safe ------------------------------------------------------------------


class Owner:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def _control(self, ev: tuple[Any, ...]) -> None:
        self.calls.append(("control", ev[0]))

    def _on_slow(self, sub: Any) -> None:
        self.calls.append(("slow", sub.sid))

    def _on_max_msgs(self, sub: Any) -> None:
        self.calls.append(("max", sub.sid))


def _msg(sid: int, subject: str = "s", payload: bytes = b"x") -> tuple[Any, ...]:
    return (0, sid, subject, "", None, payload, len(subject) + len(payload))


def _subs(impl: SimpleNamespace) -> tuple[dict[int, Any], dict[str, Any], Any]:
    d = impl.delivery
    plain = d.SubState(1, 3, 1 << 30, 0)
    handler_sub = d.SubState(2, 1 << 30, 1 << 30, 0, lambda m: None)
    mux_sub = d.SubState(3, 1 << 30, 1 << 30, 0, lambda m: None)
    mux: dict[str, Any] = {}
    mux_sub._mux = mux
    mux_sub._mux_skip = 2
    return {1: plain, 2: handler_sub, 3: mux_sub}, mux, d.MsgBase


def test_route_safe_stops_before_owner_code(impl: SimpleNamespace) -> None:
    d = impl.delivery
    subs, mux, msg_type = _subs(impl)
    owner = Owner()
    reply = d.Reply()
    mux["7"] = reply
    mux["8"] = object()  # a waiter that is not a Reply: its deliver is owner code
    events = [
        _msg(1),  # plain: delivered
        _msg(9),  # unknown sid: counted, skipped
        _msg(3, "r.7"),  # a Reply: delivered
        _msg(3, "r.99"),  # a reply nobody waits for: dropped
        _msg(3, "r.8"),  # stop here
        _msg(1),
    ]
    i, n, b = d.route_safe(owner, events, 0, subs, msg_type)
    assert (i, n) == (4, 4) and b == 4
    assert reply.done and reply.msg.subject == "r.7" and "7" not in mux and "8" in mux
    assert not reply.lock.locked()  # woken
    assert subs[1]._received == 1 and subs[1]._q.qsize() == 1 and owner.calls == []
    assert d.route_safe(owner, events, 5, subs, msg_type)[0] == 6
    assert d.route_safe(owner, [(1,), _msg(1)], 0, subs, msg_type)[0] == 0  # control frame
    assert d.route_safe(owner, [_msg(2)], 0, subs, msg_type)[0] == 0  # library handler


def test_route_safe_stops_where_route_would_call_the_owner(impl: SimpleNamespace) -> None:
    d = impl.delivery
    subs, _, msg_type = _subs(impl)
    owner = Owner()
    plain = subs[1]  # pending limit 3
    events = [_msg(1) for _ in range(5)]
    i, _, _ = d.route_safe(owner, events, 0, subs, msg_type)
    assert i == 3 and owner.calls == []  # the 4th starts a slow episode: owner code
    d.route(owner, events[3:4], subs, msg_type)
    assert owner.calls == [("slow", 1)] and plain._slow
    i, _, _ = d.route_safe(owner, events, 4, subs, msg_type)
    assert i == 5 and plain._dropped == 2  # already slow: dropped quietly, as route does
    limited = d.SubState(5, 100, 1 << 30, 2)
    subs[5] = limited
    i, _, _ = d.route_safe(owner, [_msg(5), _msg(5)], 0, subs, msg_type)
    assert i == 1  # the 2nd reaches max_msgs: owner code


@settings(max_examples=200, deadline=None)
@given(
    kinds=st.lists(
        st.sampled_from(["plain", "handler", "reply", "other", "nobody", "ctl", "gone"]),
        max_size=30,
    ),
    limit=st.integers(1, 10),
)
def test_route_safe_then_route_equals_route(both: Pair, kinds: list[str], limit: int) -> None:
    # Routing a prefix with route_safe and the rest with route delivers
    # exactly what route alone delivers, in both twins.
    outcomes = []
    for impl in both:
        per_mode = []
        for mode in ("split", "whole"):
            d = impl.delivery
            got: list[Any] = []
            plain = d.SubState(1, limit, 1 << 30, 0)
            hsub = d.SubState(2, 1 << 30, 1 << 30, 0, lambda m, g=got: g.append(("h", m.subject)))
            msub = d.SubState(3, 1 << 30, 1 << 30, 0, lambda m: None)
            mux: dict[str, Any] = {}
            msub._mux = mux
            msub._mux_skip = 2
            subs = {1: plain, 2: hsub, 3: msub}
            replies = []
            events: list[tuple[Any, ...]] = []
            for k, kind in enumerate(kinds):
                if kind == "plain":
                    events.append(_msg(1, f"p{k}"))
                elif kind == "handler":
                    events.append(_msg(2, f"h{k}"))
                elif kind == "ctl":
                    events.append((2,))
                elif kind == "gone":
                    events.append(_msg(99))
                else:
                    tok = str(k)
                    if kind == "reply":
                        r = d.Reply()
                        replies.append(r)
                        mux[tok] = r
                    elif kind == "other":
                        w = SimpleNamespace(deliver=lambda m, t=tok, g=got: g.append(("w", t)))
                        mux[tok] = w
                    events.append(_msg(3, "r." + tok))
            owner = Owner()
            if mode == "split":
                i, n1, b1 = d.route_safe(owner, events, 0, subs, d.MsgBase)
                n2, b2 = d.route(owner, events[i:], subs, d.MsgBase)
                totals = (n1 + n2, b1 + b2)
            else:
                totals = d.route(owner, events, subs, d.MsgBase)
            delivered = []
            while True:
                try:
                    batch = plain._q.get_nowait()
                except queue.Empty:
                    break
                delivered += [m.subject for m in batch[0]]
            per_mode.append(
                (totals, delivered, got, owner.calls, plain._dropped, [r.done for r in replies])
            )
        assert per_mode[0] == per_mode[1]
        outcomes.append(per_mode[0])
    assert outcomes[0] == outcomes[1]


# -- ReadState: reads and the role ------------------------------------------------


class ScriptedReader:
    def __init__(self, chunks: list[Any]) -> None:
        self.chunks = list(chunks)

    def recv_into(self, view: memoryview, n: int = 0, flags: int = 0) -> int:
        if not self.chunks:
            raise BlockingIOError()
        c = self.chunks.pop(0)
        if isinstance(c, BaseException):
            raise c
        view[: len(c)] = c
        return len(c)


def _read_state(impl: SimpleNamespace) -> tuple[Any, Any, Owner]:
    d = impl.delivery
    r = impl.readstate
    owner = Owner()
    sub = d.SubState(1, 1 << 30, 1 << 30, 0)
    rs = r.ReadState(owner, {1: sub}, d.MsgBase, impl.parser.Parser(), 0.001)
    return rs, sub, owner


def test_read_routes_what_needs_no_owner_code_and_keeps_the_rest(impl: SimpleNamespace) -> None:
    r = impl.readstate
    rs, sub, owner = _read_state(impl)
    view = memoryview(bytearray(4096))
    wire = [b"MSG a 1 1\r\nx\r\nMSG a 1 1\r", b"\ny\r\nPONG\r\nMSG a 1 1\r\nz\r\n", b""]
    sock = ScriptedReader(wire)
    assert rs.read(sock, view, 0, False) > 0  # one whole MSG, one half
    assert sub._received == 1 and rs.backlog == []
    assert rs.read(sock, view, 0, False) == r.HANDOFF  # stopped at PONG
    assert sub._received == 2 and [ev[0] for ev in rs.backlog] == [2, 0]
    assert rs.read(sock, view, 0, False) == r.HANDOFF  # nothing read while a backlog waits
    rs.flush_backlog()
    assert owner.calls == [("control", 2)] and sub._received == 3 and rs.backlog == []
    assert (rs.in_msgs, rs.in_bytes) == (3, 3)
    assert rs.read(sock, view, 0, True) == 0  # end of stream
    assert rs.read(ScriptedReader([]), view, 0, True) == r.WOULD_BLOCK


@pytest.mark.parametrize("full", [True, False], ids=["reader", "requester"])
def test_frames_are_counted_before_anyone_can_see_them(impl: SimpleNamespace, full: bool) -> None:
    # A thread handed a message must find it in the counters already (stats
    # read right after next_msg() returns): counted at receipt, not after routing.
    rs, sub, _ = _read_state(impl)
    seen: list[tuple[int, int]] = []

    class Queue:  # what the consuming thread would be woken by
        def put(self, item: Any) -> None:
            seen.append((rs.in_msgs, rs.in_bytes))

    sub._q = Queue()
    view = memoryview(bytearray(4096))
    sock = ScriptedReader([b"MSG a 1 2\r\nxy\r\nMSG a 9 3\r\nabc\r\nMSG a 1 1\r\nz\r\n"])
    rs.read(sock, view, 0, full)
    assert seen == [(3, 6)]  # the unknown sid 9 included
    assert (rs.in_msgs, rs.in_bytes) == (3, 6)
    rs.route_all(impl.parser.Parser().feed(b"MSG a 1 4\r\nwxyz\r\nPING\r\n"))
    assert seen[-1] == (4, 10) and (rs.in_msgs, rs.in_bytes) == (4, 10)


def test_frames_before_a_protocol_error_are_counted(impl: SimpleNamespace) -> None:
    rs, _, _ = _read_state(impl)
    view = memoryview(bytearray(4096))
    with pytest.raises(errors.ProtocolError):
        rs.read(ScriptedReader([b"MSG a 1 1\r\nx\r\nBOGUS\r\n"]), view, 0, False)
    rs.flush_backlog()  # routing the backlog counts nothing twice
    assert (rs.in_msgs, rs.in_bytes) == (1, 1)


def test_a_protocol_error_keeps_the_frames_before_it(impl: SimpleNamespace) -> None:
    rs, sub, _ = _read_state(impl)
    view = memoryview(bytearray(4096))
    sock = ScriptedReader([b"MSG a 1 1\r\nx\r\nBOGUS\r\n"])
    with pytest.raises(errors.ProtocolError):
        rs.read(sock, view, 0, False)
    with pytest.raises(errors.ProtocolError):
        rs.read(sock, view, 0, True)  # the parser stays unusable until reset
    rs.reset(impl.parser.Parser())
    rs.flush_backlog()
    assert sub._received == 1  # the frame before the error was delivered


def test_the_reading_role(impl: SimpleNamespace) -> None:
    d = impl.delivery
    r = impl.readstate
    rs, _, _ = _read_state(impl)
    a, b, c = d.Reply(), d.Reply(), d.Reply()
    assert rs.role == r.READER
    assert rs.join(a) == r.WAKE and rs.join(b) == r.WAKE  # queued; wake the reader thread
    assert rs.hand_over() and rs.role == r.LEADER and rs.leader is a and a.lead
    assert not a.lock.locked()  # woken to lead
    assert rs.join(c) == r.WAIT  # a leader will pass the role on
    assert not rs.leave(c, True) and rs.waiters == [b]  # c gave up waiting
    assert not rs.leave(a, True) and rs.leader is b and b.lead  # passed on to b
    assert not rs.leave(b, True) and rs.role == r.LINGER  # nobody waits: linger
    x = d.Reply()
    assert rs.join(x) == r.LEAD and rs.leader is x  # the next request leads at once
    assert rs.leave(x, False) and rs.role == r.READER  # socket gone: back to the reader
    assert not rs.leave(x, False)  # twice is harmless
    y = d.Reply()
    assert rs.join(y) == r.WAKE
    y.deliver(None)  # its reply came before the hand-over
    assert not rs.hand_over() and rs.role == r.READER  # a done waiter is skipped
    assert rs.leave(y, True) is False


def test_linger_ends_and_the_reader_reclaims(impl: SimpleNamespace) -> None:
    d = impl.delivery
    r = impl.readstate
    rs, _, _ = _read_state(impl)
    x = d.Reply()
    rs.join(x)
    rs.hand_over()
    rs.leave(x, True)
    assert (rs.role == r.LINGER and not rs.reclaim()) or rs.role == r.READER
    import time

    time.sleep(0.005)
    assert rs.reclaim() and rs.role == r.READER


def test_a_leader_with_a_backlog_hands_back_to_the_reader(impl: SimpleNamespace) -> None:
    d = impl.delivery
    r = impl.readstate
    rs, _, _ = _read_state(impl)
    x, y = d.Reply(), d.Reply()
    rs.join(x)
    rs.join(y)
    rs.hand_over()
    rs.backlog = [(2,)]
    assert rs.leave(x, True) and rs.role == r.READER  # not to y: the backlog comes first
    assert not rs.hand_over()  # nor while the backlog waits
    rs.flush_backlog()
    assert rs.hand_over() and rs.leader is y


def test_requesters_come_before_takers(impl: SimpleNamespace) -> None:
    d = impl.delivery
    r = impl.readstate
    rs, _, _ = _read_state(impl)
    rs.linger = 10.0  # no linger ends by itself here
    t, q = d.Reply(True), d.Reply()
    assert t.taker and not q.taker
    assert rs.join(t) == r.WAKE and rs.join(q) == r.WAKE
    assert rs.hand_over() and rs.leader is q  # the requester first, though it came later
    assert rs.waiters == [t] and t.lock.locked()  # the taker waits on
    assert not rs.leave(q, True) and rs.role == r.LINGER  # not passed to the taker: it lingers
    assert rs.waiters == [t] and not t.lead
    assert rs.join(d.Reply(True)) == r.WAIT  # a requester's linger is for a requester
    q2 = d.Reply()
    assert rs.join(q2) == r.LEAD and rs.leader is q2
    rs.waiters.clear()
    assert not rs.leave(q2, True) and rs.role == r.LINGER
    assert rs.reclaim() is False
    t2 = d.Reply(True)
    assert rs.join(t2) == r.WAIT
    assert rs.leave(t2, True) is False and rs.waiters == []  # gave up waiting


def test_a_taker_leads_and_its_linger_is_for_anyone(impl: SimpleNamespace) -> None:
    d = impl.delivery
    r = impl.readstate
    rs, _, _ = _read_state(impl)
    rs.linger = 10.0
    t = d.Reply(True)
    assert rs.join(t) == r.WAKE
    assert rs.hand_over() and rs.leader is t and t.lead  # no requester waits: the taker leads
    assert not rs.leave(t, True) and rs.role == r.LINGER  # its queue had something
    t2 = d.Reply(True)
    assert rs.join(t2) == r.LEAD  # the same handler thread, back for the next request
    assert not rs.leave(t2, True) and rs.role == r.LINGER
    q = d.Reply()
    assert rs.join(q) == r.LEAD  # a requester may take a taker's linger too
    t3 = d.Reply(True)
    assert rs.join(t3) == r.WAIT
    assert not rs.leave(q, True) and rs.role == r.LINGER and rs.waiters == [t3]
    rs.linger = 0.0
    assert rs.reclaim() and rs.hand_over() and rs.leader is t3  # the reader passes it on


def test_the_reader_parks_deep_under_a_long_lead(impl: SimpleNamespace) -> None:
    d = impl.delivery
    r = impl.readstate
    rs, _, _ = _read_state(impl)
    t = d.Reply(True)
    rs.join(t)
    rs.hand_over()
    assert rs.park_time(1.0) == rs.linger and not rs.deep  # a fresh lead: look every linger
    rs.lead_since -= r.DEEP_AFTER
    assert rs.park_time(1.0) == 1.0 and rs.deep  # a long one: wait for a wake-up
    assert rs.leave(t, True) is True  # so its end wakes the reader thread to time the linger
    assert rs.role == r.LINGER and not rs.deep
    assert rs.park_time(1.0) == rs.linger


def test_a_batch_for_a_waiting_taker_wakes_it(impl: SimpleNamespace) -> None:
    d = impl.delivery
    rs, sub, _ = _read_state(impl)
    t = d.Reply(True)
    sub._taker = t
    view = memoryview(bytearray(4096))
    assert rs.read(ScriptedReader([b"MSG a 1 1\r\nx\r\n"]), view, 0, False) > 0
    assert t.done and not t.lock.locked()
    assert sub._q.get_nowait()[0][0].data == b"x"
    sub._taker = None  # the taker went: the next batch is only queued
    rs.route_all([(0, 1, "a", None, None, b"y", 1)])
    assert sub._q.get_nowait()[0][0].data == b"y"
