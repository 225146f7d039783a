"""Reader-side delivery: message storage, per-subscription state, and routing by sid.

This pure module is the specification of its Cython twin. It runs on the socket
reader thread for every inbound message, so it does only bookkeeping: build
the message, apply the pending limits, and append it to the subscription's
batch. One queue put per batch hands the messages to the consuming thread.

``route(owner, events, subs, msg_type)`` walks parser frames in order:

- ``OP_MSG``: look the sid up in ``subs``; unknown sids are counted and
  skipped. Build ``msg_type(owner, subject, reply, payload, header, size, sid)``.
  A subscription with a ``_handler`` (library-owned, never user code) gets
  ``_handler(msg)`` at once, unless it also has a ``_mux``: then it is a
  request/reply mux, and instead ``_mux.pop(subject[_mux_skip:], None)`` takes
  the waiter for the subject's token; a waiter found gets ``waiter.deliver(msg)``,
  an unknown token (a late or foreign reply) is dropped silently, and the
  handler is not called. An exception from ``_handler`` or ``deliver``
  propagates out of ``route`` at once: batches filled so far stay unflushed
  and the totals are lost. Otherwise, when pending messages
  (``_received - _consumed``) have reached ``_pending_msgs_limit``, or pending
  bytes plus this payload would exceed ``_pending_bytes_limit``, the message is
  dropped and counted in ``_dropped``. The first drop of an episode calls
  ``owner._on_slow(sub)``, and ``_slow`` stays set until a message is accepted.
  An accepted message is appended to ``_batch``. When ``_received`` reaches a
  non-zero ``_max_msgs``, ``owner._on_max_msgs(sub)`` is called.
- any other frame: every batch filled so far is flushed first, then
  ``owner._control(frame)`` is called. Flushing first matters because a PONG
  may release a drain() that closes these subscriptions.

At the end every touched batch is flushed. A flushed batch is put on
``_q`` as ``(messages, payload bytes)``; the consumer counts ``_consumed``
and ``_out_bytes`` per message it hands out (``SubState._took``), so the limits hold exactly. The
return value is ``(messages, payload bytes)`` over all MSG frames.

``route_safe(owner, events, start, subs, msg_type)`` routes ``events[start:]``
as ``route`` does, but stops *before* the first frame whose delivery would run
code of the owner or of a handler: a control frame, a MSG for a ``_handler``
subscription (unless it is a mux reply whose waiter is a :class:`Reply`, or
one with no waiter), one that would start a slow episode, or one that reaches
``_max_msgs``. It returns ``(index of that frame or len(events), messages,
payload bytes)``. What it delivers it delivers exactly as ``route`` would.

:class:`ReadState` is the read side of one connection: its parser, the
frames read and not yet routed (the *backlog*), the inbound counters, and
who may read the socket (the *role*): the reader thread (READER), a thread
waiting for a reply (LEADER, see ``join``), or nobody for a short while
after a lead ended (LINGER), so that the next request takes the role at once.

The Cython twin is what makes a requesting thread's reads safe against
interrupts (``KeyboardInterrupt``, or any exception raised into that thread
asynchronously): its ``read`` with ``full=False`` and the role methods are
each one C call that runs no Python code, so an interrupt lands before or
after one, never inside, and no frame is lost or half parsed. The
connection lets requesters read only with the Cython twin; with this
specification, only the reader thread reads.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from jsclient.errors import ProtocolError

#: Who reads the socket.
READER = 0
LEADER = 1
LINGER = 2
#: What ``ReadState.join`` tells a requester.
LEAD = 0  # read the socket now
WAKE = 1  # wait; the reader thread must be woken to hand the role over
WAIT = 2  # wait; a leader will hand the role over (or the reply comes)
#: ``ReadState.read`` results besides the number of bytes read.
WOULD_BLOCK = -1
HANDOFF = -2  # stopped at a frame for the reader thread; it is in the backlog


class MsgBase:
    """Message storage: the fields the reader fills for every inbound message.

    ``_client``, ``subject``, ``reply`` ("" when absent), ``data``, ``_hdr`` (raw
    header block or None), ``_size`` (ADR-37 size, -1 if unknown), ``sid``, and
    the lazily filled ``_headers`` (None), ``_meta`` (None), ``_ackd`` (0).
    """

    __slots__ = (
        "_ackd",
        "_client",
        "_hdr",
        "_headers",
        "_meta",
        "_size",
        "data",
        "reply",
        "sid",
        "subject",
    )

    def __init__(
        self,
        client: Any,
        subject: str,
        reply: str,
        data: bytes,
        hdr: bytes | None = None,
        size: int = -1,
        sid: int = 0,
    ) -> None:
        self._client = client
        self.subject = subject
        self.reply = reply
        self.data = data
        self._hdr = hdr
        self._size = size
        self.sid = sid
        self._headers: dict[str, str] | None = None
        self._meta: Any = None
        self._ackd = 0


class SubState:
    """Reader-side state of one subscription.

    The reader writes ``_received``, ``_in_bytes``, ``_dropped``, ``_slow`` and
    ``_batch``; consumers count what they hand out with ``_took(n, nbytes)``
    (``_consumed += n``, ``_out_bytes += nbytes`` as one step: several threads
    may take from one subscription), never by assigning the fields.

    ``_mux`` (dict of token to waiter, or None) and ``_mux_skip`` (how many
    leading subject characters to drop to get the token) make a ``_handler``
    subscription a request/reply mux that ``route`` dispatches itself; the
    owner sets them after construction.
    """

    def __init__(
        self,
        sid: int,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
        max_msgs: int,
        handler: Callable[[Any], None] | None = None,
    ) -> None:
        self.sid = sid
        self._pending_msgs_limit = pending_msgs_limit
        self._pending_bytes_limit = pending_bytes_limit
        self._max_msgs = max_msgs
        self._handler = handler
        self._mux: dict[str, Any] | None = None
        self._mux_skip = 0
        self._received = 0
        self._in_bytes = 0
        self._consumed = 0
        self._out_bytes = 0
        self._dropped = 0
        self._slow = False
        self._batch: list[Any] = []
        self._batch_bytes = 0
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._took_lock = threading.Lock()

    def _took(self, n: int, nbytes: int) -> None:
        """Count ``n`` messages of ``nbytes`` payload bytes handed out (or, with a
        negative ``n``, an item that was not one the reader counted)."""
        with self._took_lock:
            self._consumed += n
            self._out_bytes += nbytes

    def _flush_batch(self) -> None:
        """Hand the collected messages to the consumer in one queue put."""
        batch = self._batch
        if batch:
            self._batch = []
            self._q.put((batch, self._batch_bytes))
            self._batch_bytes = 0


def route(
    owner: Any, events: list[tuple[Any, ...]], subs: dict[int, Any], msg_type: Any
) -> tuple[int, int]:
    """Deliver parser frames; see the module docstring."""
    touched: list[SubState] = []
    n_in = 0
    b_in = 0
    for ev in events:
        if ev[0] != 0:
            for s in touched:
                s._flush_batch()
            touched.clear()
            owner._control(ev)
            continue
        _, sid, subject, reply, hdr, payload, size = ev
        plen = len(payload)
        n_in += 1
        b_in += plen
        sub = subs.get(sid)
        if sub is None:
            continue
        msg = msg_type(owner, subject, reply, payload, hdr, size, sid)
        handler = sub._handler
        if handler is not None:
            mux = sub._mux
            if mux is None:
                handler(msg)
            else:
                waiter = mux.pop(subject[sub._mux_skip :], None)
                if waiter is not None:
                    waiter.deliver(msg)
            continue
        if (
            sub._received - sub._consumed >= sub._pending_msgs_limit
            or sub._in_bytes - sub._out_bytes + plen > sub._pending_bytes_limit
        ):
            sub._dropped += 1
            if not sub._slow:
                sub._slow = True
                owner._on_slow(sub)
            continue
        sub._slow = False
        sub._in_bytes += plen
        sub._received += 1
        sub._batch_bytes += plen
        batch = sub._batch
        batch.append(msg)
        if len(batch) == 1:
            touched.append(sub)
        if sub._max_msgs and sub._received >= sub._max_msgs:
            owner._on_max_msgs(sub)
    for s in touched:
        s._flush_batch()
    return n_in, b_in


def route_safe(
    owner: Any, events: list[tuple[Any, ...]], start: int, subs: dict[int, Any], msg_type: Any
) -> tuple[int, int, int]:
    """Deliver ``events[start:]`` up to the first frame that needs owner code."""
    touched: list[SubState] = []
    n_in = 0
    b_in = 0
    i = start
    end = len(events)
    while i < end:
        ev = events[i]
        if ev[0] != 0:
            break
        _, sid, subject, reply, hdr, payload, size = ev
        plen = len(payload)
        sub = subs.get(sid)
        if sub is None:
            n_in += 1
            b_in += plen
            i += 1
            continue
        handler = sub._handler
        if handler is not None:
            mux = sub._mux
            if mux is None:
                break
            token = subject[sub._mux_skip :]
            waiter = mux.get(token)
            if waiter is not None:
                if type(waiter) is not Reply:
                    break
                del mux[token]
                waiter.deliver(msg_type(owner, subject, reply, payload, hdr, size, sid))
            n_in += 1
            b_in += plen
            i += 1
            continue
        if (
            sub._received - sub._consumed >= sub._pending_msgs_limit
            or sub._in_bytes - sub._out_bytes + plen > sub._pending_bytes_limit
        ):
            if not sub._slow:
                break
            sub._dropped += 1
            n_in += 1
            b_in += plen
            i += 1
            continue
        if sub._max_msgs and sub._received + 1 >= sub._max_msgs:
            break
        sub._slow = False
        sub._in_bytes += plen
        sub._received += 1
        sub._batch_bytes += plen
        batch = sub._batch
        batch.append(msg_type(owner, subject, reply, payload, hdr, size, sid))
        if len(batch) == 1:
            touched.append(sub)
        n_in += 1
        b_in += plen
        i += 1
    for s in touched:
        s._flush_batch()
    return i, n_in, b_in


class Reply:
    """A request waiting for its response: a pre-acquired lock released when it is settled.

    ``deliver`` (the reply, or None when the connection closed) sets ``done``;
    ``wake`` with ``lead`` set hands the waiting thread the reading role (see
    :meth:`ReadState.join`). Either may find the lock released already, so a
    second release is ignored.
    """

    __slots__ = ("done", "lead", "lock", "msg")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.msg: Any = None
        self.done = False
        self.lead = False

    def deliver(self, msg: Any) -> None:
        self.msg = msg
        self.done = True
        self.wake()

    def wake(self) -> None:
        try:
            self.lock.release()
        except RuntimeError:
            pass  # released already


class ReadState:
    """The read side of one connection; see the module docstring.

    Reading (``read``, ``flush_backlog``, ``route_all``) is for the holder of
    the role only. The role methods (``join``, ``leave``, ``reclaim``,
    ``hand_over``) may be called from any thread.
    """

    def __init__(
        self, owner: Any, subs: dict[int, Any], msg_type: Any, parser: Any, linger: float
    ) -> None:
        self.owner = owner
        self.subs = subs
        self.msg_type = msg_type
        self.parser = parser
        self.linger = linger
        self.backlog: list[tuple[Any, ...]] = []
        self.broken: BaseException | None = None  # a ProtocolError: the parser is unusable
        self.in_msgs = 0
        self.in_bytes = 0
        self.role = READER
        self.leader: Any = None
        self.waiters: list[Any] = []
        self.linger_since = 0.0
        self._lock = threading.Lock()

    # -- reading (role holder) -------------------------------------------------

    def read(self, sock: Any, view: memoryview, flags: int, full: bool) -> int:
        """One receive into ``view``, parsed and routed.

        ``full``: route every frame (the reader thread); else stop before the
        first frame that needs owner code and keep the rest in the backlog
        (HANDOFF). Returns the bytes read, 0 at end of stream, WOULD_BLOCK, or
        HANDOFF. A ProtocolError (also raised again by every later call) keeps
        the frames before it in the backlog.
        """
        if self.broken is not None:
            raise self.broken
        if self.backlog:
            if not full:
                return HANDOFF
            self.flush_backlog()
        try:
            n: int = sock.recv_into(view, 0, flags)
        except BlockingIOError:
            return WOULD_BLOCK
        if n == 0:
            return 0
        try:
            events = self.parser.feed(view[:n].tobytes())
        except ProtocolError as exc:
            self.backlog = list(getattr(exc, "events", None) or [])
            self.broken = exc
            raise
        if full:
            self.route_all(events)
            return n
        i, m, b = route_safe(self.owner, events, 0, self.subs, self.msg_type)
        self.in_msgs += m
        self.in_bytes += b
        if i < len(events):
            self.backlog = events[i:]
            return HANDOFF
        return n

    def route_all(self, events: list[tuple[Any, ...]]) -> None:
        """Route ``events`` in full (after the backlog), counting them."""
        if self.backlog:
            self.flush_backlog()
        n, b = route(self.owner, events, self.subs, self.msg_type)
        self.in_msgs += n
        self.in_bytes += b

    def flush_backlog(self) -> None:
        """Route the backlog in full."""
        events = self.backlog
        self.backlog = []
        n, b = route(self.owner, events, self.subs, self.msg_type)
        self.in_msgs += n
        self.in_bytes += b

    def reset(self, parser: Any) -> None:
        """A new socket: its parser (the backlog of the old one stays to be routed)."""
        self.parser = parser
        self.broken = None

    # -- the role (any thread) -------------------------------------------------

    def join(self, waiter: Any) -> int:
        """A requester waits for ``waiter``'s reply: LEAD, WAKE or WAIT (see the constants)."""
        with self._lock:
            if self.role == LINGER and not self.backlog and self.broken is None:
                self.role = LEADER
                self.leader = waiter
                waiter.lead = True
                return LEAD
            self.waiters.append(waiter)
            return WAKE if self.role == READER else WAIT

    def leave(self, waiter: Any, keep: bool) -> bool:
        """``waiter`` stops waiting (reply, timeout, error, interrupt); safe to call twice.

        If it was leading, the role goes to the next waiting requester, else
        it lingers (``keep``: the socket is fine) or goes back to the reader
        thread. True when the reader thread should be woken to take it.
        """
        with self._lock:
            try:
                self.waiters.remove(waiter)
            except ValueError:
                pass
            if self.leader is not waiter:
                return False
            self.leader = None
            if not self.backlog and self.broken is None:
                if self._give():
                    return False
                if keep:
                    self.role = LINGER
                    self.linger_since = time.monotonic()
                    return False
            self.role = READER
            return True

    def reclaim(self) -> bool:
        """Reader thread: True when the role is (back) with it; a linger past its time ends."""
        with self._lock:
            if self.role == LINGER and time.monotonic() - self.linger_since >= self.linger:
                self.role = READER
            return self.role == READER

    def hand_over(self) -> bool:
        """Reader thread, between reads: give the role to a waiting requester."""
        with self._lock:
            if self.role != READER or self.backlog or self.broken is not None:
                return False
            return self._give()

    def _give(self) -> bool:
        # With the lock held: the first waiter still waiting leads.
        waiters = self.waiters
        while waiters:
            w = waiters.pop(0)
            if not w.done:
                self.role = LEADER
                self.leader = w
                w.lead = True
                w.wake()
                return True
        return False
