"""The read side of one connection: reads, the backlog, and who may read the socket.

This pure module is the specification of its Cython twin.
:mod:`jsclient.protocol.delivery` routes the frames; this module decides when
they are read and routed, and by which thread.

:class:`ReadState` is the read side of one connection: its parser, the
frames read and not yet routed (the *backlog*), the inbound counters, and
who may read the socket (the *role*): the reader thread (READER), a thread
waiting for a reply (LEADER, see ``join``), or nobody for a short while
after a lead ended (LINGER), so that the next request takes the role at once.

Two kinds of thread wait in the role: requesters (a :class:`Reply`) and
takers (``Reply(taker=True)``: a thread waiting for a subscription's queue,
such as a service's handler thread). Requesters come first: a lead ending
passes the role to a waiting requester only, a linger a requester left is
taken by the next requester only, and the reader thread's ``hand_over``
prefers requesters. So a requester and a handler thread in one process keep
the role with the requester (the handler is woken by its queue, as with the
reader thread), and a handler thread alone in its process reads its own
requests, one wake-up each.

While a thread leads, the reader thread parks and looks again every linger;
once a lead has lasted ``DEEP_AFTER`` it waits for a wake-up instead
(``park_time``), and the lead's end wakes it (``leave`` returns True), so an
idle handler thread that leads costs no wake-ups of the reader thread.

The inbound counters (``in_msgs``, ``in_bytes``: MSG frames and their
payload bytes) count frames as they are received, before any is routed: a
thread that has a message sees it counted.

The Cython twin is what makes a requesting thread's reads safe against
interrupts (``KeyboardInterrupt``, or any exception raised into that thread
asynchronously): its ``read`` with ``full=False`` and the role methods are
each one C call that runs no Python code, so an interrupt lands before or
after one, never inside, and no frame is lost or half parsed. The
connection lets requesters read only with the Cython twin; with this
specification, only the reader thread reads.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jsclient.errors import ProtocolError
from jsclient.protocol.delivery import route, route_safe

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
#: How long a lead lasts before the parked reader thread waits for a wake-up.
DEEP_AFTER = 0.01


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
        self.linger_taker = False  # the linger is a taker's: the next taker may lead
        self.lead_since = 0.0
        self.deep = False  # the reader thread waits for a wake-up (see park_time)
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
            self.count(self.backlog)
            self.broken = exc
            raise
        if full:
            self.route_all(events)
            return n
        self.count(events)
        i = route_safe(self.owner, events, 0, self.subs, self.msg_type)[0]
        if i < len(events):
            self.backlog = events[i:]
            return HANDOFF
        return n

    def route_all(self, events: list[tuple[Any, ...]]) -> None:
        """Count ``events`` and route them in full (after the backlog)."""
        if self.backlog:
            self.flush_backlog()
        self.count(events)
        route(self.owner, events, self.subs, self.msg_type)

    def flush_backlog(self) -> None:
        """Route the backlog (counted when it was read) in full."""
        events = self.backlog
        self.backlog = []
        route(self.owner, events, self.subs, self.msg_type)

    def count(self, events: list[tuple[Any, ...]]) -> None:
        """Add the MSG frames of ``events`` and their payload bytes to the counters."""
        n = 0
        b = 0
        for ev in events:
            if ev[0] == 0:
                n += 1
                b += len(ev[5])
        self.in_msgs += n
        self.in_bytes += b

    def reset(self, parser: Any) -> None:
        """A new socket: its parser (the backlog of the old one stays to be routed)."""
        self.parser = parser
        self.broken = None

    # -- the role (any thread) -------------------------------------------------

    def join(self, waiter: Any) -> int:
        """A requester waits for ``waiter``'s reply (a taker for its queue):
        LEAD, WAKE or WAIT (see the constants)."""
        with self._lock:
            if (
                self.role == LINGER
                and not self.backlog
                and self.broken is None
                and (self.linger_taker or not waiter.taker)
            ):
                self._grant(waiter)
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
                if self._give(False):
                    return False
                if keep:
                    self.role = LINGER
                    self.linger_since = time.monotonic()
                    self.linger_taker = bool(waiter.taker)
                    if self.deep:  # the reader thread waits for a wake-up: it times the linger
                        self.deep = False
                        return True
                    return False
            self.role = READER
            return True

    def reclaim(self) -> bool:
        """Reader thread: True when the role is (back) with it; a linger past its time ends."""
        with self._lock:
            if self.role == LINGER and time.monotonic() - self.linger_since >= self.linger:
                self.role = READER
            return self.role == READER

    def park_time(self, deep: float) -> float:
        """Reader thread, the role being elsewhere: how long to wait for a wake-up
        before ``reclaim`` again: the linger, or ``deep`` once a lead has lasted
        DEEP_AFTER (its end wakes the reader thread then, see ``leave``)."""
        with self._lock:
            if self.role == LEADER and time.monotonic() - self.lead_since >= DEEP_AFTER:
                self.deep = True
                return deep
            self.deep = False
            return self.linger

    def hand_over(self) -> bool:
        """Reader thread, between reads: give the role to a waiting requester, else taker."""
        with self._lock:
            if self.role != READER or self.backlog or self.broken is not None:
                return False
            return self._give(True)

    def _give(self, takers: bool) -> bool:
        # With the lock held: the first requester still waiting leads, else
        # (``takers``) the first taker; waiters already done are dropped.
        waiters = self.waiters
        pick = None
        i = 0
        while i < len(waiters):
            w = waiters[i]
            if w.done:
                del waiters[i]
                continue
            if not w.taker:
                pick = w
                break
            if pick is None and takers:
                pick = w
            i += 1
        if pick is None:
            return False
        waiters.remove(pick)
        self._grant(pick)
        pick.wake()
        return True

    def _grant(self, waiter: Any) -> None:
        # With the lock held: ``waiter`` leads from now.
        self.role = LEADER
        self.leader = waiter
        self.lead_since = time.monotonic()
        waiter.lead = True
