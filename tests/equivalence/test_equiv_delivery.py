"""The delivery twin (MsgBase, SubState, route) against its specification.

Scenarios run against both implementations; a hypothesis test feeds random
frame sequences, limits and a request/reply mux sub (random skip, registered
tokens and failing waiters) to both and compares every observable outcome:
queued and unflushed batches, counters, owner callbacks in order, handler and
waiter deliveries, the tokens left in the mux, and the returned totals (or the
exception).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
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


class Waiter:
    """A reply waiter in a mux: logs ``(token, msg)``, or raises like a failing callback."""

    def __init__(self, token: str, log: list[tuple[str, Any]], fail: bool = False) -> None:
        self.token, self.log, self.fail = token, log, fail

    def deliver(self, msg: Any) -> None:
        self.log.append((self.token, msg))
        if self.fail:
            raise RuntimeError(f"waiter {self.token!r} failed")


#: A mux sub: ``(skip, {token: fails})``; it is added after the ``limits`` subs.
MuxSpec = tuple[int, dict[str, bool]]


def _setup(
    impl: SimpleNamespace,
    limits: list[tuple[int, int, int, bool]],
    mux: MuxSpec | None = None,
) -> tuple[Any, ...]:
    d = impl.delivery

    class Msg(d.MsgBase):
        __slots__ = ()

    class Sub(d.SubState):
        pass

    owner = Owner()
    handled: list[Any] = []
    for sid, (mlim, blim, maxm, handler) in enumerate(limits, 1):
        owner.subs[sid] = Sub(sid, mlim, blim, maxm, handled.append if handler else None)
    delivered: list[tuple[str, Any]] = []
    if mux is not None:
        skip, tokens = mux
        sid = len(limits) + 1
        sub = owner.subs[sid] = Sub(sid, 0, 0, 0, handled.append)
        sub._mux = {t: Waiter(t, delivered, fail) for t, fail in tokens.items()}
        sub._mux_skip = skip
    owner.delivered = delivered
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


def _seen(msgs: list[Any], owner: Owner) -> list[tuple[Any, ...]]:
    return [(type(m).__name__, m.subject, m.reply, m.data, m.sid, m._client is owner) for m in msgs]


def _observe(
    impl: SimpleNamespace,
    limits: list[tuple[int, int, int, bool]],
    events: list[Any],
    mux: MuxSpec | None = None,
) -> Any:
    """``(totals, calls, state, handled, mux)``; totals is ``("raised", ...)`` if route raised."""
    d, msg_type, owner, handled = _setup(impl, limits, mux)
    try:
        totals = d.route(owner, events, owner.subs, msg_type)
    except RuntimeError as exc:
        totals = ("raised", type(exc), str(exc))
    subs = owner.subs
    state = {
        sid: (s._received, s._in_bytes, s._dropped, s._slow, _drain(s)) for sid, s in subs.items()
    }
    return (
        totals,
        owner.calls,
        state,
        [(type(m).__name__, m.subject, m.sid, m._client is owner) for m in handled],
        (
            [(token, *_seen([m], owner)[0]) for token, m in owner.delivered],
            {sid: sorted(s._mux) for sid, s in subs.items() if s._mux is not None},
            {sid: _seen(s._batch, owner) for sid, s in subs.items() if s._batch},
        ),
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
    totals, calls, state, handled, _ = _observe(impl, limits, events)
    assert totals == (8, 24)
    assert calls[0] == ("control", (OP_PONG,), {1: 1, 2: 1, 3: 0, 4: 0})
    assert calls[1] == ("max", 4, 2)
    assert calls[2][0] == "control" and calls[2][2] == {1: 2, 2: 1, 3: 0, 4: 1}
    assert state[1][0] == 3 and [len(b[1]) for b in state[1][4]] == [2, 1]
    assert state[1][4][0][0] == 6  # payload bytes of the first batch
    assert handled == [("Msg", "s.6", 3, True)]


def test_pending_limits_drop_and_report_once(impl: SimpleNamespace) -> None:
    events = [_msg_ev(1, i, size=10) for i in range(6)]
    totals, calls, state, *_ = _observe(impl, [(3, 1 << 40, 0, False)], events)
    assert totals == (6, 60)
    assert calls == [("slow", 1, 1)]
    received, in_bytes, dropped, slow, _batches = state[1]
    assert (received, in_bytes, dropped, slow) == (3, 30, 3, True)
    totals, calls, state, *_ = _observe(impl, [(100, 25, 0, False)], events)
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
        st.integers(1, 5),  # 1-3: the limits subs, 4: the mux sub if any, else unknown
        st.integers(0, 50),
        st.integers(0, 40),
        st.sampled_from([None, b"NATS/1.0\r\n\r\n"]),
    ),
    st.sampled_from([(OP_PING,), (OP_PONG,), (4, "err"), (5, "{}")]),
)
limit = st.tuples(st.integers(0, 6), st.integers(0, 120), st.integers(0, 5), st.booleans())


@st.composite
def mux_spec(draw: st.DrawFn) -> MuxSpec:
    # tokens are cut from the subjects _msg_ev makes ("s.<n>"), so some frames hit;
    # skip 9 leaves every token "", and -2 keeps the last two characters as Python does
    skip = draw(st.sampled_from([0, 2, 2, 3, 9, -2]))
    registered = draw(
        st.dictionaries(st.integers(0, 50), st.integers(0, 7).map(lambda n: n == 0), max_size=12)
    )
    return skip, {f"s.{n}"[skip:]: fails for n, fails in registered.items()}


@settings(max_examples=250, deadline=None)
@given(
    events=st.lists(frames, max_size=40),
    limits=st.lists(limit, min_size=3, max_size=3),
    mux=st.none() | mux_spec(),
)
def test_route_differential(
    both: tuple[SimpleNamespace, SimpleNamespace],
    events: list[Any],
    limits: list[tuple[int, int, int, bool]],
    mux: MuxSpec | None,
) -> None:
    py, c = both
    assert _observe(py, limits, events, mux) == _observe(c, limits, events, mux)


# ----------------------------------------------------------------------------- reply mux

INBOX = "_INBOX.abc."


def _reply_ev(sid: int, subject: str, payload: bytes = b"ok") -> tuple[Any, ...]:
    return (OP_MSG, sid, subject, "", None, payload, len(payload) + 20)


def test_mux_defaults_and_settable(impl: SimpleNamespace) -> None:
    sub = impl.delivery.SubState(1, 10, 100, 0)
    assert (sub._mux, sub._mux_skip) == (None, 0)
    resp: dict[str, Any] = {}
    sub._mux, sub._mux_skip = resp, len(INBOX)
    assert sub._mux is resp and sub._mux_skip == len(INBOX)
    sub._mux = None
    assert sub._mux is None


def test_mux_hit_delivers_and_removes_token(impl: SimpleNamespace) -> None:
    events = [
        _reply_ev(1, INBOX + "a", b"one"),
        _reply_ev(1, INBOX + "a", b"again"),  # the token is gone: a late duplicate
        _reply_ev(1, INBOX + "b", b"two"),
    ]
    mux = (len(INBOX), {"a": False, "b": False, "c": False})
    totals, calls, state, handled, (delivered, left, unflushed) = _observe(impl, [], events, mux)
    assert delivered == [
        ("a", "Msg", INBOX + "a", "", b"one", 1, True),
        ("b", "Msg", INBOX + "b", "", b"two", 1, True),
    ]
    assert left == {1: ["c"]}
    assert handled == [] and calls == [] and unflushed == {}
    assert totals == (3, 11)  # every MSG frame is counted, hit or miss
    assert state[1] == (0, 0, 0, False, [])  # like a handler sub: no queue, no pending counts


def test_mux_miss_drops_silently(impl: SimpleNamespace) -> None:
    events = [_reply_ev(1, INBOX + "zz"), _reply_ev(1, "other.subject"), _reply_ev(1, INBOX)]
    totals, calls, state, handled, (delivered, left, _) = _observe(
        impl, [], events, (len(INBOX), {"a": False})
    )
    assert (delivered, handled, calls) == ([], [], [])
    assert left == {1: ["a"]}
    assert totals == (3, 6)
    assert state[1] == (0, 0, 0, False, [])


def test_non_mux_handler_sub_still_gets_handler(impl: SimpleNamespace) -> None:
    # sid 1: a handler sub without mux; sid 2: the mux sub, whose handler must stay silent
    events = [_reply_ev(1, INBOX + "a"), _reply_ev(2, INBOX + "a"), _reply_ev(2, INBOX + "b")]
    limits = [(100, 1 << 40, 0, True)]
    _, _, _, handled, (delivered, left, _) = _observe(
        impl, limits, events, (len(INBOX), {"a": False})
    )
    assert handled == [("Msg", INBOX + "a", 1, True)]
    assert [d[:3] for d in delivered] == [("a", "Msg", INBOX + "a")]
    assert left == {2: []}
    # a mux set back to None makes the sub a plain handler sub again
    d, msg_type, owner, handled = _setup(impl, [], (len(INBOX), {"a": False}))
    owner.subs[1]._mux = None
    d.route(owner, [_reply_ev(1, INBOX + "a")], owner.subs, msg_type)
    assert [m.subject for m in handled] == [INBOX + "a"] and owner.delivered == []


def test_mux_raising_waiter_is_like_raising_handler(impl: SimpleNamespace) -> None:
    # sid 1 batches normally; sid 2 raises: first as a handler, then as a mux waiter
    def events(subject: str) -> list[Any]:
        return [_msg_ev(1, 1), _reply_ev(2, subject), _msg_ev(1, 2), (OP_PING,)]

    def boom(msg: Any) -> None:
        raise RuntimeError("waiter 'a' failed")

    d, msg_type, owner, _ = _setup(impl, [(100, 1 << 40, 0, False), (100, 1 << 40, 0, True)])
    owner.subs[2]._handler = boom
    with pytest.raises(RuntimeError) as raised:
        d.route(owner, events("x"), owner.subs, msg_type)
    sub1 = owner.subs[1]
    # the exception left route at once: the batch so far unflushed, the rest unread
    assert (sub1._received, sub1._q.qsize(), [m.subject for m in sub1._batch], owner.calls) == (
        1,
        0,
        ["s.1"],
        [],
    )

    observed = _observe(
        impl, [(100, 1 << 40, 0, False)], events(INBOX + "a"), (len(INBOX), {"a": True})
    )
    totals, calls, state, handled, (delivered, left, unflushed) = observed
    assert totals == ("raised", RuntimeError, str(raised.value))
    assert (state[1], calls) == ((1, 3, 0, False, []), [])
    assert [u[1] for u in unflushed[1]] == ["s.1"]
    assert [d[:3] for d in delivered] == [("a", "Msg", INBOX + "a")]
    assert left == {2: []}  # popped before deliver was called
    assert handled == []


def test_mux_subject_shorter_than_skip(impl: SimpleNamespace) -> None:
    # the token is "" then: an ordinary key, a miss unless "" is registered
    events = [_reply_ev(1, "_INBOX"), _reply_ev(1, "")]
    _, _, _, handled, (delivered, left, _) = _observe(impl, [], events, (len(INBOX), {"a": False}))
    assert (delivered, handled, left) == ([], [], {1: ["a"]})
    _, _, _, handled, (delivered, left, _) = _observe(
        impl, [], events, (len(INBOX), {"": False, "a": False})
    )
    assert [d[:3] for d in delivered] == [("", "Msg", "_INBOX")]
    assert (handled, left) == ([], {1: ["a"]})


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


def test_next_msg_hands_out_the_taken_batch_while_fast(impl: SimpleNamespace) -> None:
    """``SubState.next_msg``: with ``_fast_next`` set, the local deque's messages
    go out in order, each counted (``_consumed``, ``_out_bytes``); an empty
    deque, or ``_fast_next`` unset, is the subclass's ``_next_msg(timeout)``."""
    d, msg_type, owner, _ = _setup(impl, [(100, 1 << 40, 0, False)])
    slow_calls: list[Any] = []

    class Sub(d.SubState):
        def _next_msg(self, timeout: Any) -> Any:
            slow_calls.append(timeout)
            return "slow"

    sub = Sub(1, 100, 1 << 40, 0)
    assert not sub._fast_next and not sub._local
    msgs = [msg_type(owner, f"s.{i}", "", b"x" * i) for i in range(3)]
    sub._local.extend(msgs)
    assert sub.next_msg(0.5) == "slow"  # not fast: the subclass decides
    sub._fast_next = True
    got = [sub.next_msg(), sub.next_msg(2.0), sub.next_msg(timeout=None)]
    assert got == msgs
    assert (sub._consumed, sub._out_bytes) == (3, 0 + 1 + 2)
    assert sub.next_msg(timeout=3.0) == "slow"  # the deque is empty
    assert slow_calls == [0.5, 3.0]
    assert sub._pop_local() is None  # what the callback dispatcher asks first
    sub._local.append(msgs[2])
    assert sub._pop_local() is msgs[2] and (sub._consumed, sub._out_bytes) == (4, 5)


class _AckQueue:
    """A write queue's ``ack``: records the frame, answers ``rc``."""

    def __init__(self, log: list[tuple[Any, ...]], rc: int) -> None:
        self.log, self.rc = log, rc

    def ack(self, subject: str, body: bytes) -> int:
        self.log.append(("wq.ack", subject, body))
        return self.rc


class _AckClient:
    """A client as an ack sees it: ``_wq.ack`` and ``_ack_not_queued``, recorded
    in one log; ``fail``: what ``_ack_not_queued`` raises (a full buffer...)."""

    def __init__(self, rc: int = 0, fail: BaseException | None = None) -> None:
        self.log: list[tuple[Any, ...]] = []
        self._wq = _AckQueue(self.log, rc)
        self.fail = fail

    def _ack_not_queued(self, rc: int, subject: str, body: bytes) -> None:
        self.log.append(("not_queued", rc, subject, body))
        if self.fail is not None:
            raise self.fail


def test_msgbase_ack_once_then_marked(impl: SimpleNamespace) -> None:
    """``MsgBase.ack``/``_send_ack``: the ack into the client's write queue, then
    ``_ackd`` 1; nothing once ``_ackd`` is set (1, or 2 for ack policy none).
    Only an answer other than the queue's QUEUED goes to ``_ack_not_queued``."""
    from jsclient import errors

    assert impl.writer.QUEUED == 0  # what both twins of the ack test for
    client = _AckClient()
    reply = "$JS.ACK.S.C.1.2.3.4.5"
    m = impl.delivery.MsgBase(client, "s", reply, b"d")
    m.ack()
    assert (client.log, m._ackd) == ([("wq.ack", reply, b"+ACK")], 1)
    m.ack()
    m._send_ack(b"-NAK")
    assert len(client.log) == 1  # terminal: nothing more
    none_policy = impl.delivery.MsgBase(client, "s", reply, b"d")
    none_policy._ackd = 2
    none_policy._send_ack(b"+TERM")
    assert len(client.log) == 1 and none_policy._ackd == 2
    kick = _AckClient(rc=impl.writer.KICK)
    m1 = impl.delivery.MsgBase(kick, "s", reply, b"d")
    m1._send_ack(b"+TERM x")
    assert kick.log == [
        ("wq.ack", reply, b"+TERM x"),
        ("not_queued", impl.writer.KICK, reply, b"+TERM x"),
    ]
    assert m1._ackd == 1
    # A refused ack leaves the message un-acked, the error the caller's.
    failing = _AckClient(rc=impl.writer.FULL, fail=errors.SlowConsumerError("full"))
    m2 = impl.delivery.MsgBase(failing, "s", reply, b"d")
    with pytest.raises(errors.SlowConsumerError):
        m2._send_ack(b"-NAK")
    assert m2._ackd == 0 and len(failing.log) == 2


@pytest.mark.parametrize(
    ("client", "reply", "error", "text"),
    [
        ("rec", "", "NotJSMessageError", "not a JetStream message"),
        ("rec", "_INBOX.x", "NotJSMessageError", "not a JetStream message"),
        (None, "$JS.ACK.S.C.1.2.3.4.5", "Error", "not bound to a connection"),
        ("gone", "$JS.ACK.S.C.1.2.3.4.5", "ConnectionClosedError", "closed"),
    ],
)
def test_msgbase_ack_refusals(
    impl: SimpleNamespace, client: Any, reply: str, error: str, text: str
) -> None:
    """What cannot be acked raises its typed error (a freed client's weak
    proxy: ConnectionClosedError, with the ReferenceError not chained)."""
    import weakref

    from jsclient import errors

    if client == "rec":
        client = _AckClient()
    elif client == "gone":
        client = weakref.proxy(_AckClient())  # its referent is freed at once
    m = impl.delivery.MsgBase(client, "s", reply, b"d")
    with pytest.raises(getattr(errors, error), match=text) as info:
        m.ack()
    assert type(info.value) is getattr(errors, error)
    assert info.value.__suppress_context__ or info.value.__context__ is None
    assert m._ackd == 0


def _fetch_pair(impl: SimpleNamespace, batch: int, max_bytes: int = 0) -> tuple[Any, Any]:
    """A FetchBase subclass that logs its hooks, and a message type with a size."""
    import queue
    from collections import deque

    class M(impl.delivery.MsgBase):  # type: ignore[name-defined,misc]
        @property
        def size(self) -> int:
            return len(self.data) + 10

    class Fetch(impl.delivery.FetchBase):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            self.log: list[tuple[Any, ...]] = []
            self.status = False  # what _special answers
            self._ack_none = False
            self._ended = False
            self._done = False
            self._heartbeat = 0.0
            self._last = 0.0
            self._taken_at = 0.0
            self._q = queue.SimpleQueue()
            self._put = self._q.put
            self._held = deque()
            self._count = 0
            self._batch = batch
            self._max_bytes = max_bytes
            self._bytes = 0

        def _special(self, msg: Any) -> bool:
            self.log.append(("special", msg.subject))
            return self.status

        def _end(self, error: BaseException | None) -> None:
            self.log.append(("end", error))
            self._ended = True

        def _next_slow(self) -> Any:
            self.log.append(("slow", list(self._held)))
            return "slow"

    return Fetch(), M


def _queued(f: Any) -> list[str]:
    out = []
    while not f._q.empty():
        out.append(f._q.get_nowait().subject)
    return out


def test_fetch_on_msg_counts_and_ends_at_the_batch(impl: SimpleNamespace) -> None:
    """``FetchBase._on_msg``: a plain message is queued and counted without a
    hook; the one that fills the batch ends the pull; after the end nothing
    is queued. Headers (or ack policy none) ask ``_special`` first: True
    consumes the message (a status), False lets it through."""
    f, M = _fetch_pair(impl, batch=3)
    f._on_msg(M(None, "a", "r", b"x"))
    f._on_msg(M(None, "b", "r", b"x", b"NATS/1.0\r\nPin: 1\r\n\r\n"))
    f.status = True
    f._on_msg(M(None, "st", "", b"", b"NATS/1.0 100\r\n\r\n"))
    assert (f._count, f._last) == (2, 0.0)  # no heartbeat: no clock read
    f._heartbeat = 5.0
    f._on_msg(M(None, "c", "r", b"x"))
    assert f.log == [("special", "b"), ("special", "st"), ("end", None)]
    assert f._count == 3 and f._last > 0 and _queued(f) == ["a", "b", "c"]
    f._on_msg(M(None, "late", "r", b"x"))
    assert f._count == 3 and _queued(f) == []
    f2, M2 = _fetch_pair(impl, batch=10)
    f2._ack_none = True
    f2._on_msg(M2(None, "n", "r", b"x"))
    assert f2.log == [("special", "n")] and _queued(f2) == ["n"]


def test_fetch_on_msg_ends_at_max_bytes(impl: SimpleNamespace) -> None:
    """With ``_max_bytes`` set, each message's ``size`` adds to ``_bytes``; the
    one that reaches the limit ends the pull (a batch that is not reached)."""
    f, M = _fetch_pair(impl, batch=1_000_000, max_bytes=25)
    f._on_msg(M(None, "a", "r", b"12"))  # size 12
    assert (f._bytes, f.log) == (12, [])
    f._on_msg(M(None, "b", "r", b"123"))  # 13: 25 reached
    assert (f._bytes, f.log, _queued(f)) == (25, [("end", None)], ["a", "b"])


def test_fetch_next_takes_a_ready_message_else_the_slow_path(impl: SimpleNamespace) -> None:
    """``FetchBase.__next__``: StopIteration once done; a queued message while
    nothing is held is returned (``_taken_at`` set); a marker goes to the
    front of ``_held`` and, like an empty queue or anything held, leaves the
    decision to ``_next_slow``."""
    f, M = _fetch_pair(impl, batch=10)
    m = M(None, "a", "r", b"x")
    f._q.put(m)
    assert iter(f) is f
    assert next(f) is m and f._taken_at > 0 and f.log == []
    assert next(f) == "slow" and f.log == [("slow", [])]  # empty queue
    marker = object()
    f._q.put(marker)
    f._q.put(m)
    assert next(f) == "slow" and f.log[-1] == ("slow", [marker])
    assert next(f) == "slow" and f._q.qsize() == 1  # something held: the queue waits
    f._held.clear()
    f._done = True
    with pytest.raises(StopIteration):
        next(f)
    assert list(f) == []
