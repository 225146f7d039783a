"""The subscription table of one connection: sids, SUB and UNSUB commands.

A :class:`~jsclient.client.Client` composes one :class:`SubTable`. It owns
the sid counter and fills the ``sid -> subscription`` dict that the reader
thread routes by (the same dict object the connection's read side holds);
``Client.subscribe`` and the library's own subscriptions (request/reply mux,
pull inboxes, push consumers) all go through it, after a reconnect
:meth:`SubTable.resubscribe_commands` says what to send again, and
:meth:`SubTable.drain` runs the steps of ``Client.drain``.

The table writes with the connection's writer and never waits for room for
an internal SUB or UNSUB (``send_nowait``): it may run on the reader or timer
thread, or in a finalizer.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from jsclient import _impl, errors
from jsclient._io.options import CLOSED, check_open
from jsclient._threads import remaining as _left
from jsclient.msg import Msg
from jsclient.protocol import commands
from jsclient.subscription import Subscription

if TYPE_CHECKING:
    from jsclient._io.writer import Writer
    from jsclient.connection import Connection
    from jsclient.protocol.delivery import SubState
else:
    SubState = _impl.delivery.SubState


class InternalSub(SubState):
    """A library-owned subscription: its handler runs on the reader thread, or,
    without one, its messages reach its queue in batches.

    Handlers must be short and never block: they hand work to other threads.
    """

    def __init__(self, sid: int, subject: str, handler: Callable[[Msg], None] | None) -> None:
        super().__init__(sid, 1 << 62, 1 << 62, 0, handler)
        self.subject = subject
        self.queue = None


class SubTable:
    """The subscriptions of one connection (see the module docstring).

    ``owner`` is the client a user subscription is made for (its first
    constructor argument); ``subs`` the dict the reader routes by.
    """

    def __init__(self, owner: Any, subs: dict[int, Any], conn: Connection, w: Writer) -> None:
        self.owner = owner
        self.subs = subs
        self.conn = conn
        self.w = w
        self.sid: Iterator[int] = _impl.writer.Counter(1)  # sids: unique across threads
        # Library subscriptions released by a finalizer (release_later), whose
        # UNSUB the next subscribe or unsubscribe sends (reap).
        self.orphans: deque[int] = deque()

    def user_subs(self) -> list[Subscription]:
        """The users' subscriptions (not the library's own)."""
        return [s for s in list(self.subs.values()) if isinstance(s, Subscription)]

    def add(
        self,
        cls: Callable[..., Subscription],
        subject: str,
        queue: str | None,
        cb: Callable[[Msg], Any] | None,
        max_msgs: int,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
        **extra: Any,
    ) -> Any:
        """Subscribe with a Subscription subclass (``extra`` goes to its constructor)."""
        commands.check_subject(subject)
        if queue is not None:
            commands.check_subject(queue, "queue group")
        if cb is not None and not callable(cb):
            raise errors.Error("nats: cb must be callable")
        check_open(self.conn)
        if self.orphans:
            self.reap()
        sid = next(self.sid)
        sub = cls(
            self.owner,
            sid,
            subject,
            queue,
            cb,
            max_msgs,
            pending_msgs_limit,
            pending_bytes_limit,
            **extra,
        )
        self.subs[sid] = sub
        cmd = commands.sub(subject, queue, sid)
        if max_msgs > 0:
            cmd += commands.unsub(sid, max_msgs)
        self.w.send(cmd)
        return sub

    def add_internal(self, subject: str, handler: Callable[[Msg], None]) -> int:
        """Library subscription whose handler runs on the reader thread; returns the sid."""
        check_open(self.conn)
        if self.orphans:
            self.reap()
        sid = next(self.sid)
        self.subs[sid] = InternalSub(sid, subject, handler)
        self.w.send_nowait(commands.sub(subject, None, sid))
        return sid

    def add_batched(self, subject: str, q: queue.SimpleQueue[Any]) -> Any:
        """Library subscription whose messages are put on ``q`` as the reader
        routes them: one ``(messages, payload bytes)`` item per batch, no code
        run per message on the reader thread. What arrives must be bounded by
        the caller (a pull's size): no pending limit applies. Returns the
        reader-side state (``sid``; ``_received`` counts what arrived)."""
        check_open(self.conn)
        if self.orphans:
            self.reap()
        sid = next(self.sid)
        sub = InternalSub(sid, subject, None)
        sub._q = q
        self.subs[sid] = sub
        self.w.send_nowait(commands.sub(subject, None, sid))
        return sub

    def move(self, sub: Any, subject: str) -> None:
        """Re-point a subscription at another subject, keeping its sid and queue.

        Messages the server already sent for the old subject may still arrive
        (with the same sid); the subscription must tell them apart itself.
        """
        commands.check_subject(subject)
        sub.subject = subject
        sid: int = sub.sid
        registered = self.subs.get(sid) is sub
        if registered and self.conn.status is not CLOSED:
            self.w.send_nowait(commands.unsub(sid) + commands.sub(subject, sub.queue, sid))

    def remove_internal(self, sid: int) -> None:
        """Forget a library subscription and UNSUB it (best effort)."""
        if self.subs.pop(sid, None) is not None:
            self.orphans.append(sid)
        self.reap()

    def release_later(self, sids: list[int]) -> None:
        """Forget library subscriptions now and UNSUB them at the next subscribe
        or unsubscribe: for finalizers, which the garbage collector runs in
        whatever thread it interrupts, maybe one holding the write queue's lock
        (not re-entrant), so they take no lock (a dict pop and a deque append)."""
        for sid in sids:
            if self.subs.pop(sid, None) is not None:
                self.orphans.append(sid)

    def reap(self) -> None:
        """Send the UNSUBs of the released library subscriptions (best effort).

        Any thread (the timer thread, a caller): never waits for room.
        """
        orphans = self.orphans
        unsubs = []
        while True:
            try:
                unsubs.append(commands.unsub(orphans.popleft()))
            except IndexError:
                break
        if unsubs and self.conn.status is not CLOSED:
            try:
                self.w.send_nowait(b"".join(unsubs))
            except errors.Error:
                pass

    def send_unsub(self, sid: int, max_msgs: int) -> None:
        if self.conn.status is CLOSED:
            raise errors.ConnectionClosedError()
        self.w.send_nowait(commands.unsub(sid, max_msgs))

    def remove(self, sid: int) -> None:
        self.subs.pop(sid, None)

    def resubscribe_commands(self) -> bytes:
        """SUB (and UNSUB for what is left of a max_msgs) for every subscription."""
        parts = []
        for sid, sub in list(self.subs.items()):
            parts.append(commands.sub(sub.subject, sub.queue, sid))
            if sub._max_msgs:
                left = sub._max_msgs - sub._received
                if left > 0:
                    parts.append(commands.unsub(sid, left))
        return b"".join(parts)

    def drain(
        self, user_subs: list[Subscription], contexts: list[Any], deadline: float | None
    ) -> bool:
        """The steps of ``Client.drain`` before it closes; True when something was late.

        The JetStream pull ``contexts`` stop pulling (their buffered messages
        stay), ``user_subs`` are unsubscribed, and after a flush their queued
        messages are still handed out: this waits for their dispatcher
        threads and the contexts until ``deadline``, then flushes the acks of
        what was processed.
        """
        conn = self.conn
        late = False
        for ctx in contexts:
            ctx._drain_begin()  # no more pulls; buffered messages stay
        for sub in user_subs:
            try:
                self.send_unsub(sub.sid, 0)
            except errors.Error:
                pass
        try:
            conn.flush(_left(deadline, 5.0))
        except errors.Error:
            pass
        for sub in user_subs:
            self.remove(sub.sid)
            sub._finish(None)
        me = threading.current_thread()
        for sub in user_subs:
            t = sub._dispatcher
            if t is not None and t is not me:
                t.join(_left(deadline, None))
                late = late or t.is_alive()
        for ctx in contexts:
            late = not ctx._drain_wait(deadline) or late
        try:
            conn.flush(_left(deadline, 5.0))  # the acks of what was just processed
        except errors.Error:
            pass
        return late
