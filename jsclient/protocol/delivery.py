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

:class:`Reply` is what a requesting thread waits on; ``route_safe`` settles
it without leaving C in the Cython twin. Who reads the socket, and when
``route`` or ``route_safe`` runs, is :mod:`jsclient.protocol.readstate`.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from time import monotonic
from typing import Any

from jsclient.errors import ConnectionClosedError, Error, NotJSMessageError


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

    def ack(self) -> None:
        """Acknowledge (terminal). Ignored after another terminal ack or with ack policy none."""
        self._send_ack(b"+ACK")

    def _send_ack(self, body: bytes) -> None:
        """Publish the terminal ack ``body`` (``+ACK``, ``-NAK``, ``+TERM``...) to
        the ``$JS.ACK`` reply, once: nothing when ``_ackd`` is set (acked
        already, or ack policy none). ``_ackd`` becomes 1 only after the client
        queued the ack (ADR-15). NotJSMessageError for any other reply, Error
        with no client, ConnectionClosedError when the client (a weak proxy)
        is gone.

        The ack goes straight into the client's write queue (``_client._wq.ack``);
        any answer but ``QUEUED`` (0: nothing more to do) is the client's to act
        on (``_client._ack_not_queued(rc, reply, body)``: wake the writer, or
        send it the bounded way)."""
        if self._ackd != 0:
            return
        reply = self.reply
        if not reply or not reply.startswith("$JS.ACK."):
            raise NotJSMessageError()
        client = self._client
        if client is None:
            raise Error("nats: message is not bound to a connection")
        try:
            rc = client._wq.ack(reply, body)
            if rc != 0:  # the write queue's QUEUED
                client._ack_not_queued(rc, reply, body)
        except ReferenceError:  # its connection's client is gone (closed and dropped)
            raise ConnectionClosedError() from None
        self._ackd = 1


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

    ``_taker`` (a :class:`Reply` made with ``taker=True``, or None) is a
    thread waiting for this queue: each put of a batch sets its ``done`` and
    wakes it, so it may wait in the reading role instead of on the queue
    (:meth:`jsclient.subscription.Subscription._await`).
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
        self._taker: Any = None  # a Reply(taker=True) waiting for this queue, see _flush_batch
        # The consuming side's: messages already taken off _q, and whether
        # next_msg may hand them out itself (see next_msg).
        self._local: deque[Any] = deque()
        self._fast_next = False

    def _took(self, n: int, nbytes: int) -> None:
        """Count ``n`` messages of ``nbytes`` payload bytes handed out (or, with a
        negative ``n``, an item that was not one the reader counted)."""
        with self._took_lock:
            self._consumed += n
            self._out_bytes += nbytes

    def _pop_local(self) -> Any:
        """The next message of the taken batch (``_local``), counted as handed
        out; None when there is none (another thread may have taken the last)."""
        local = self._local
        if local:
            try:
                msg = local.popleft()
            except IndexError:
                return None
            self._took(1, len(msg.data))
            return msg
        return None

    def next_msg(self, timeout: float | None = 1.0) -> Any:
        """The next message; TimeoutError if none arrives within ``timeout`` seconds.

        While ``_fast_next`` is set (the consuming class sets it) the rest of a
        taken batch is handed out here (``_pop_local``); everything else is the
        consuming class's ``_next_msg(timeout)``.
        """
        if self._fast_next:
            msg = self._pop_local()
            if msg is not None:
                return msg
        return self._next_msg(timeout)  # type: ignore[attr-defined]

    def _flush_batch(self) -> None:
        """Hand the collected messages to the consumer in one queue put."""
        batch = self._batch
        if batch:
            self._batch = []
            self._q.put((batch, self._batch_bytes))
            self._batch_bytes = 0
            taker = self._taker
            if taker is not None:  # a thread waits for this queue, maybe reading the socket
                taker.done = True
                taker.wake()


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
    :meth:`jsclient.protocol.readstate.ReadState.join`). Either may find the
    lock released already, so a second release is ignored.

    With ``taker=True`` it is a thread waiting for a subscription's queue
    instead (``SubState._taker``): done when a batch is put; it yields the
    reading role to requesters (see the readstate module).
    """

    __slots__ = ("done", "lead", "lock", "msg", "taker")

    def __init__(self, taker: bool = False) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.msg: Any = None
        self.done = False
        self.lead = False
        self.taker = taker

    def deliver(self, msg: Any) -> None:
        self.msg = msg
        self.done = True
        self.wake()

    def wake(self) -> None:
        try:
            self.lock.release()
        except RuntimeError:
            pass  # released already


class FetchBase:
    """One pull's messages: the per-message rule of a fetch, on both its threads.

    The subclass (``FetchBatch``) sets every field before its inbox is lent
    and provides ``_special(msg)`` (a message with headers, or any with ack
    policy none: True when it was a status and is consumed), ``_end(error)``
    and ``_next_slow()``.

    ``_on_msg(msg)``, the inbox's handler on the reader thread: ``_special``
    first where it applies; nothing once ``_ended``; else ``_last`` becomes
    ``monotonic()`` if ``_heartbeat`` is set, the message goes to ``_put``
    and is counted in ``_count``, and reaching ``_batch`` messages (or
    ``_max_bytes``, when set, in ``_bytes`` of ``msg.size``) ends the pull
    with ``_end(None)``.

    ``__next__``, the caller's: StopIteration once ``_done``; with nothing
    in ``_held``, a message ``_q`` has ready (``get_nowait``) is returned at
    once, ``_taken_at`` set to ``monotonic()``; anything else it took (an end
    or a re-pull marker) goes to the front of ``_held`` and, as when ``_q``
    is empty, ``_next_slow()`` decides.
    """

    _ack_none: bool
    _ended: bool
    _done: bool
    _heartbeat: float
    _last: float
    _taken_at: float
    _put: Callable[[Any], None]
    _q: queue.SimpleQueue[Any]
    _held: deque[Any]
    _count: int
    _batch: int
    _max_bytes: int
    _bytes: int

    def _special(self, msg: Any) -> bool:
        raise NotImplementedError

    def _end(self, error: BaseException | None) -> None:
        raise NotImplementedError

    def _next_slow(self) -> Any:
        raise NotImplementedError

    def _on_msg(self, msg: Any) -> None:
        if (msg._hdr is not None or self._ack_none) and self._special(msg):
            return
        if self._ended:
            return
        if self._heartbeat:
            self._last = monotonic()
        self._put(msg)
        n = self._count + 1
        self._count = n
        if n >= self._batch:
            self._end(None)
        elif self._max_bytes:
            self._bytes += msg.size
            if self._bytes >= self._max_bytes:
                self._end(None)

    def __iter__(self) -> FetchBase:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        held = self._held
        if not held:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                pass
            else:
                if isinstance(item, MsgBase):
                    self._taken_at = monotonic()
                    return item
                held.appendleft(item)
        return self._next_slow()
