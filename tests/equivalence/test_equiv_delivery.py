"""The delivery twin (MsgBase, SubState, route) against its specification.

Scenarios run against both implementations; a hypothesis test feeds random
frame sequences and limits to both and compares every observable outcome:
queued batches, counters, owner callbacks in order, and the returned totals.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

OP_MSG, OP_PING, OP_PONG = 0, 1, 2


class Owner:
    """Records the callbacks route() makes, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.subs: dict[int, Any] = {}

    def _control(self, ev: tuple[Any, ...]) -> None:
        # Snapshot the queues at the moment of the control frame: batches
        # filled before it must already be there.
        queued = {sid: s._q.qsize() for sid, s in sorted(self.subs.items())}
        self.calls.append(("control", ev, queued))

    def _on_slow(self, sub: Any) -> None:
        self.calls.append(("slow", sub.sid, sub._dropped))

    def _on_max_msgs(self, sub: Any) -> None:
        self.calls.append(("max", sub.sid, sub._received))


def _msg_ev(sid: int, n: int, size: int = 3, hdr: bytes | None = None) -> tuple[Any, ...]:
    return (OP_MSG, sid, f"s.{n}", f"r.{n}" if n % 2 else "", hdr, b"x" * size, size + 4)


def _setup(impl: SimpleNamespace, limits: list[tuple[int, int, int, bool]]) -> tuple[Any, ...]:
    d = impl.delivery

    class Msg(d.MsgBase):
        __slots__ = ()

    class Sub(d.SubState):
        pass

    owner = Owner()
    handled: list[Any] = []
    for sid, (mlim, blim, maxm, handler) in enumerate(limits, 1):
        owner.subs[sid] = Sub(sid, mlim, blim, maxm, handled.append if handler else None)
    return d, Msg, owner, handled


def _drain(sub: Any) -> list[tuple[Any, ...]]:
    out = []
    while not sub._q.empty():
        batch, nbytes = sub._q.get_nowait()
        out.append(
            (
                nbytes,
                [(m.subject, m.reply, m.data, m._hdr, m._size, m.sid, m._ackd) for m in batch],
            )
        )
    return out


def _observe(
    impl: SimpleNamespace,
    limits: list[tuple[int, int, int, bool]],
    events: list[Any],
    consume_every: int = 0,
) -> Any:
    d, msg_type, owner, handled = _setup(impl, limits)
    totals = d.route(owner, events, owner.subs, msg_type)
    subs = owner.subs
    state = {
        sid: (s._received, s._in_bytes, s._dropped, s._slow, _drain(s)) for sid, s in subs.items()
    }
    return (
        totals,
        owner.calls,
        state,
        [(type(m).__name__, m.subject, m.sid, m._client is owner) for m in handled],
    )


def test_batches_limits_and_control_order(impl: SimpleNamespace) -> None:
    events = [
        _msg_ev(1, 1),
        _msg_ev(1, 2),
        _msg_ev(2, 3),
        (OP_PONG,),
        _msg_ev(1, 4),
        _msg_ev(9, 5),  # unknown sid: counted, not delivered
        _msg_ev(3, 6),  # handler sub
        _msg_ev(4, 7),  # max_msgs 2
        _msg_ev(4, 8),
        (OP_PING,),
    ]
    limits = [
        (100, 1 << 40, 0, False),
        (1, 1 << 40, 0, False),
        (100, 1 << 40, 0, True),
        (100, 1 << 40, 2, False),
    ]
    totals, calls, state, handled = _observe(impl, limits, events)
    assert totals == (8, 24)
    assert calls[0] == ("control", (OP_PONG,), {1: 1, 2: 1, 3: 0, 4: 0})
    assert calls[1] == ("max", 4, 2)
    assert calls[2][0] == "control" and calls[2][2] == {1: 2, 2: 1, 3: 0, 4: 1}
    assert state[1][0] == 3 and [len(b[1]) for b in state[1][4]] == [2, 1]
    assert state[1][4][0][0] == 6  # payload bytes of the first batch
    assert handled == [("Msg", "s.6", 3, True)]


def test_pending_limits_drop_and_report_once(impl: SimpleNamespace) -> None:
    events = [_msg_ev(1, i, size=10) for i in range(6)]
    totals, calls, state, _ = _observe(impl, [(3, 1 << 40, 0, False)], events)
    assert totals == (6, 60)
    assert calls == [("slow", 1, 1)]
    received, in_bytes, dropped, slow, _batches = state[1]
    assert (received, in_bytes, dropped, slow) == (3, 30, 3, True)
    totals, calls, state, _ = _observe(impl, [(100, 25, 0, False)], events)
    assert state[1][:4] == (2, 20, 4, True)
    assert calls == [("slow", 1, 1)]


def test_consumer_progress_lifts_slow_state(impl: SimpleNamespace) -> None:
    d, msg_type, owner, _ = _setup(impl, [(2, 1 << 40, 0, False)])
    sub = owner.subs[1]
    d.route(owner, [_msg_ev(1, i) for i in range(3)], owner.subs, msg_type)
    assert sub._slow and sub._dropped == 1
    sub._consumed = 2  # the consumer took the batch
    d.route(owner, [_msg_ev(1, 9)], owner.subs, msg_type)
    assert not sub._slow and sub._received == 3
    assert owner.calls == [("slow", 1, 1)]


frames = st.one_of(
    st.builds(
        _msg_ev,
        st.integers(1, 4),
        st.integers(0, 50),
        st.integers(0, 40),
        st.sampled_from([None, b"NATS/1.0\r\n\r\n"]),
    ),
    st.sampled_from([(OP_PING,), (OP_PONG,), (4, "err"), (5, "{}")]),
)
limit = st.tuples(st.integers(0, 6), st.integers(0, 120), st.integers(0, 5), st.booleans())


@settings(max_examples=250, deadline=None)
@given(events=st.lists(frames, max_size=40), limits=st.lists(limit, min_size=3, max_size=3))
def test_route_differential(
    both: tuple[SimpleNamespace, SimpleNamespace],
    events: list[Any],
    limits: list[tuple[int, int, int, bool]],
) -> None:
    py, c = both
    assert _observe(py, limits, events) == _observe(c, limits, events)


def test_msgbase_fields(impl: SimpleNamespace) -> None:
    m = impl.delivery.MsgBase("cl", "subj", "rep", b"data", b"hdr", 12, 7)
    assert (m._client, m.subject, m.reply, m.data, m._hdr, m._size, m.sid) == (
        "cl",
        "subj",
        "rep",
        b"data",
        b"hdr",
        12,
        7,
    )
    assert (m._headers, m._meta, m._ackd) == (None, None, 0)
    m2 = impl.delivery.MsgBase(None, "a", "", b"")
    assert (m2._hdr, m2._size, m2.sid) == (None, -1, 0)
