"""Subscriptions: a bounded queue filled by the reader thread, read by user threads.

- ``next_msg(timeout)`` and iteration block on the queue with a timeout;
  ``unsubscribe``/``drain``/close from another thread wake them with a sentinel.
- With ``cb=...`` a named dispatcher thread runs the callback; the reader
  thread never runs user code.
- Pending limits: past ``pending_msgs_limit`` messages or
  ``pending_bytes_limit`` payload bytes the message is dropped, counted in
  ``dropped``, and a SlowConsumerError goes to the connection's ``error_cb``
  (once per slow episode).

Hand-off is batched: the reader collects the messages one socket read brings
for a subscription into a list and puts the list on the queue once; the
consuming side keeps a local deque it serves single messages from. Pending
counts are pairs of counters: the reader counts what came in (it alone writes
those), and the threads taking messages count what they handed out with
``_took`` (atomic adds in the Cython twin, a short lock in the pure one).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from jsclient import _impl, errors
from jsclient._handoff import next_item
from jsclient._threads import WAIT_SLICE, log
from jsclient._threads import remaining as _remaining
from jsclient.msg import Msg

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.protocol.delivery import SubState
else:
    SubState = _impl.delivery.SubState
_Reply = _impl.delivery.Reply


class _Closed:
    """Queue sentinel: the subscription ended (reason in ``error``)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class _Ended(Exception):
    """Internal: the queue sentinel was reached."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class Subscription(SubState):
    """A subscription to a subject (optionally in a queue group).

    The reader-side counters and batch live in ``SubState`` (see
    :mod:`jsclient.protocol.delivery`); this class is the consuming side.
    """

    #: ``next_msg`` may hand out the local batch itself (``_take``'s first step):
    #: false in a subclass with a ``_take`` of its own (a JetStream push
    #: subscription counts and checks what it hands out).
    _plain_take = True
    _local: deque[Msg]  # SubState's: messages already taken off _q

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._plain_take = cls._take is Subscription._take

    def __init__(
        self,
        client: Core,
        sid: int,
        subject: str,
        queue_group: str | None,
        cb: Callable[[Msg], Any] | None,
        max_msgs: int,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
    ) -> None:
        super().__init__(
            sid,
            pending_msgs_limit if pending_msgs_limit > 0 else 1 << 62,
            pending_bytes_limit if pending_bytes_limit > 0 else 1 << 62,
            max_msgs,
        )
        self._client = client
        self.subject = subject
        self.queue = queue_group
        self._cb = cb
        self._held: deque[Any] = deque()  # what a wait took off _q (see _take)
        self._waiter: Any = None  # the taker's Reply of _await, made once
        self._closed = False
        self._discard = False  # unsubscribe()/close(): queued messages are dropped
        # SubState.next_msg hands out the rest of a taken batch itself (in C in
        # the speedups build): not with a callback, a _take of a subclass's own,
        # or once queued messages are dropped.
        self._fast_next = self._plain_take and cb is None
        self._draining = False
        self._dispatcher: threading.Thread | None = None
        if cb is not None:
            self._dispatcher = threading.Thread(
                target=self._dispatch_loop, name=f"jsclient-sub-{sid}", daemon=True
            )
            self._dispatcher.start()

    def __repr__(self) -> str:
        return f"<Subscription sid={self.sid} subject={self.subject!r} queue={self.queue!r}>"

    # -- reader side -------------------------------------------------------

    def _finish(self, error: BaseException | None, discard: bool = False) -> None:
        """End the subscription: readers see the sentinel after what is queued.

        With ``discard`` (unsubscribe, close) nothing queued is delivered any
        more; drain and auto-unsubscribe keep it.
        """
        if discard:
            self._fast_next = False
            self._discard = True
        if not self._closed:
            self._closed = True
            self._q.put(_Closed(error))
            taker = self._taker
            if taker is not None:
                taker.done = True
                taker.wake()

    def _end_in_forked_child(self, error: BaseException) -> None:
        """Fork hook (child): readers get ``error``, never the parent's buffered messages.

        A fresh queue: the old one's lock may be held by a reader thread that
        does not exist in the child. ``unsubscribe``/``drain`` still go to the
        client, which raises the same error.
        """
        self._local.clear()
        self._held.clear()
        q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        q.put(_Closed(error))
        self._q = q

    def _take(self, timeout: float | None) -> Msg:
        """Consumer side: the next message, or raise queue.Empty / the close reason.

        A blocking wait moves what it got into ``_held`` in the same C call
        (:func:`~jsclient._handoff.next_item`), so an interrupt delivered as
        the wait returns leaves the batch there for the next call.
        """
        local = self._local
        while True:
            if self._discard:
                self._discard_queued()
            if local:
                try:
                    msg = local.popleft()
                except IndexError:  # another thread took the last one
                    continue
            else:
                msg = next_item(self._q, self._held, local, timeout)
                if msg.__class__ is _Closed:
                    self._q.put(msg)  # keep the sentinel for other readers
                    raise _Ended(msg.error)
                if self._discard:
                    continue  # unsubscribed while this thread waited: dropped
            # Counted per message handed out, so the pending limits hold
            # exactly while a batch sits in the local deque.
            self._took(1, len(msg.data))
            return msg

    def _await(self, timeout: float, claim: bool) -> None:
        """Wait up to ``timeout`` seconds for something to take (then ``_take(0)``
        has it), as a *taker* of the reading role: on a connection where
        requesters may read the socket, this thread may too while it waits, so a
        request for it wakes it directly instead of through the reader thread
        (see :mod:`jsclient._io.reader`). ``claim``: wake the reader thread to
        take the role from it (else only a taker's linger or a hand-over after
        a read gives it). For one taker at a time (a service's handler threads
        take in turn); it returns early for no reason at worst. A wake that
        comes late (a batch put as the last wait ended) finds the waiter armed
        again, and that batch is in the queue: the wait returns for it.
        """
        waiter = self._waiter
        if waiter is None:
            waiter = self._waiter = _Reply(True)
        else:  # one per subscription, armed again: its lock held, not done, not leading
            waiter.lock.acquire(False)
            waiter.done = waiter.lead = False
        self._taker = waiter
        try:
            if self._local or self._held or not self._q.empty():
                return
            self._client._conn.await_reply(waiter, time.monotonic() + timeout, claim)
        finally:
            self._taker = None

    def next_as_taker(self, timeout: float, claim: bool) -> Msg:
        """The next message for a library thread that may read the socket while it
        waits (a service's handler thread: :meth:`_await`): TimeoutError after
        ``timeout``, the end reason (or BadSubscriptionError) once it ended."""
        if not (self._local or self._held) and self._q.empty():
            self._await(timeout, claim)
        msg: Msg = self.next_msg(0)
        return msg

    def _give_back(self, msgs: list[Msg]) -> None:
        """Put messages taken but not handed out back in front, in order (an
        interrupted fetch); the next take hands them out again."""
        self._local.extendleft(reversed(msgs))
        self._took(-len(msgs), -sum(len(m.data) for m in msgs))

    def _discard_queued(self) -> None:
        """Drop what is taken or queued up to the sentinel, which stays for other readers."""
        self._local.clear()
        held = self._held
        q = self._q
        while True:
            if held:
                try:
                    item = held.popleft()
                except IndexError:
                    continue
            else:
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    return
            if type(item) is not tuple:
                q.put(item)
                raise _Ended(item.error)

    def next_msg(self, timeout: float | None = 1.0) -> Msg:
        """The next message; TimeoutError if none arrives within ``timeout`` seconds."""
        # Replaced by SubState.next_msg below the class (this body is what it does).
        msg: Msg = SubState.next_msg(self, timeout)
        return msg

    def _next_msg(self, timeout: float | None) -> Msg:
        if self._cb is not None:
            raise errors.BadSubscriptionError(
                "nats: next_msg() is not available on a subscription with a callback"
            )
        try:
            return self._take(timeout)
        except queue.Empty:
            raise errors.TimeoutError() from None
        except _Ended as end:
            raise end.error or errors.BadSubscriptionError("nats: subscription closed") from None

    @property
    def messages(self) -> Subscription:
        """nats-py's ``sub.messages``: the subscription itself, iterated as ``for msg in sub``."""
        return self

    def __iter__(self) -> Iterator[Msg]:
        """Messages as they come, blocking; ends when unsubscribed, drained or closed."""
        return self

    def __next__(self) -> Msg:
        """The next message (waits without a limit); StopIteration at the end."""
        while True:
            try:
                return self._take(WAIT_SLICE)
            except queue.Empty:
                continue
            except _Ended as end:
                err = end.error
                if err is None or isinstance(err, errors.ConnectionClosedError):
                    raise StopIteration from None
                raise err from None

    def _dispatch_loop(self) -> None:
        cb = self._cb
        assert cb is not None
        take = self._take
        pop_local = self._pop_local
        plain = self._plain_take
        while True:
            # The rest of a taken batch without _take's frame (in C in the
            # speedups build), unless a subclass's _take decides what goes out.
            msg = pop_local() if plain and not self._discard else None
            if msg is None:
                try:
                    msg = take(WAIT_SLICE)
                except queue.Empty:
                    continue
                except _Ended:
                    return
            try:
                cb(msg)
            except BaseException as exc:  # the dispatcher outlives user code (issue 32)
                log.exception("jsclient: subscription callback raised")
                self._client._report_error(exc)

    # -- control -----------------------------------------------------------

    @property
    def pending_msgs(self) -> int:
        """Messages received and not yet handed to the user."""
        return max(0, self._received - self._consumed)

    @property
    def pending_bytes(self) -> int:
        """Payload bytes received and not yet handed to the user."""
        return max(0, self._in_bytes - self._out_bytes)

    @property
    def delivered(self) -> int:
        """Messages handed to this subscription (not counting dropped ones)."""
        return self._received

    @property
    def dropped(self) -> int:
        """Messages dropped because the pending limits were reached (slow consumer)."""
        return self._dropped

    @property
    def is_closed(self) -> bool:
        """True once unsubscribed, drained, or its connection closed."""
        return self._closed

    def unsubscribe(self, limit: int = 0) -> None:
        """Stop receiving; with ``limit``, stop after that many messages in total."""
        if self._closed:
            raise errors.BadSubscriptionError("nats: subscription already closed")
        if limit > 0 and self._received < limit:
            self._max_msgs = limit
            self._client._send_unsub(self.sid, limit)
            return
        self._client._send_unsub(self.sid, 0)
        self._client._remove_sub(self.sid)
        self._finish(None, discard=True)

    def drain(self, timeout: float | None = 30.0) -> None:
        """Unsubscribe, let the server's in-flight messages arrive, and process what is queued.

        For a callback subscription this waits (up to ``timeout``) until the
        callback has run for every queued message. For an iterator
        subscription, iteration ends after the queued messages.
        """
        if self._closed:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        self._draining = True
        self._client._send_unsub(self.sid, 0)
        try:
            self._client.flush(timeout=_remaining(deadline, 5.0))
        except errors.Error:
            pass
        self._client._remove_sub(self.sid)
        self._finish(None)
        if self._dispatcher is not None and self._dispatcher is not threading.current_thread():
            self._dispatcher.join(_remaining(deadline, None))
            if self._dispatcher.is_alive():
                raise errors.DrainTimeoutError()


# The rest of a taken batch is handed out by SubState.next_msg itself (in C in
# the speedups build: no Python frame per message); everything else is
# Subscription._next_msg. Bound here rather than in the class body so that the
# API reference, read from the source, documents the method above.
Subscription.next_msg = SubState.next_msg  # type: ignore[method-assign]
