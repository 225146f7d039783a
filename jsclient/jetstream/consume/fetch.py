"""One pull request's messages as an iterator: :class:`FetchBatch` (``fetch``,
``fetch_bytes``, ``fetch_no_wait``, ``next``), and :func:`wait_read`, how
``nc.drain()`` waits for a reader of a pull context."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jsclient import _impl, errors
from jsclient._handoff import next_item
from jsclient._threads import TimerHandle
from jsclient.jetstream.consume.engine import (
    EXPIRY_GUARD,
    FLOW_CONTROL,
    HEARTBEAT,
    HEARTBEAT_FACTOR,
    PIN_MISMATCH,
    WAIT_SLICE,
    Engine,
    pull_status,
)
from jsclient.msg import Msg

if TYPE_CHECKING:
    from jsclient.jetstream.consume.priority import Priority
    from jsclient.protocol.delivery import FetchBase
else:
    FetchBase = _impl.delivery.FetchBase

ErrorCallback = Callable[[BaseException], Any]
_mono = time.monotonic
_END = object()
_REPULL = object()
#: A pull that lost its pin is made again only with at least this much time left.
MIN_REPULL_EXPIRES = 0.05


class FetchBatch(FetchBase):
    """The messages of one pull request, yielded as they arrive.

    Iterate it (once): iteration ends when the batch is full or the pull ended
    (a status, the client-side guard at expires + 1 s, a missed heartbeat, the
    connection closing). Then :attr:`error` says why a short batch ended:
    ``None`` for ordinary ends (no messages, request timeout, expiry), else the
    status error (``StatusError`` for a ``409 Exceeded Max*`` refusal,
    ``NoRespondersError``, ``NoHeartbeatError``...). A consumer that does not
    exist (``ConsumerNotFoundError``, confirmed with the server after a 503) or
    was deleted under the pull (``ConsumerDeletedError``) is raised by the
    iteration, after the messages that came before it.

    A pull of a pinned priority group answered ``423`` (this client lost the
    pin) is made again, without the pin id, for what is still missing and
    within the time left, by the thread iterating the batch.
    """

    def __init__(
        self,
        engine: Engine,
        batch: int,
        max_bytes: int,
        expires: float,
        heartbeat: float,
        no_wait: bool = False,
        prio: Priority | None = None,
    ) -> None:
        self._engine = engine
        self._ack_none = engine.ack_none
        self._batch = batch
        self._max_bytes = max_bytes
        self._heartbeat = heartbeat
        self._no_wait = no_wait
        self._prio = prio
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._put = self._q.put
        self._held: deque[Any] = deque()  # what an interrupted wait took (see _handoff)
        self._count = 0
        self._bytes = 0
        self._last = _mono()
        self._ended = False
        self._done = False
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._timers: list[TimerHandle] = []
        self._taken_at = self._last
        self._reading = 0  # threads blocked in __next__ (see _drain_wait)
        guard = (engine.js._timeout if no_wait else expires) + EXPIRY_GUARD
        self._deadline = self._last + guard
        self._expires_at = self._last + expires
        inbox = engine.take_inbox()
        self._inbox = inbox
        self._reply = inbox.prefix + str(next(engine.tokens))
        sched = engine.client._scheduler
        self._timers.append(sched.call_later(guard, self._end, None))
        if heartbeat > 0:
            self._timers.append(sched.call_later(heartbeat, self._watch))
        engine.fetches_open += 1
        inbox.lend(self._on_msg)
        engine.client._drainables.add(self)
        try:
            engine.publish_pull(self._reply, batch, max_bytes, expires, heartbeat, no_wait, prio)
        except BaseException:
            self._end(None)
            raise

    # -- reader thread -----------------------------------------------------

    # _on_msg(msg), the inbox's handler, is FetchBase's (the delivery twins:
    # in C in the speedups build); what it does not decide itself is here.

    def _special(self, msg: Msg) -> bool:
        """A message with headers (or any, with ack policy none): True when it
        was a status, acted on here; else it is made ready for the user."""
        st = self._engine.read(msg)
        if st is None:
            return False
        self._on_status(msg.subject, st[0], st[1])
        return True

    def _on_status(self, subject: str, code: int, description: str) -> None:
        if subject != self._reply:
            return  # a status of an earlier pull on this inbox
        self._last = _mono()
        kind, error = pull_status(self._engine, code, description)
        if code == PIN_MISMATCH and not self._ended:
            self._put(_REPULL)  # made again by the iterating thread, not the reader
        elif kind not in (HEARTBEAT, FLOW_CONTROL):
            self._end(error)

    # -- timer thread ------------------------------------------------------

    def _watch(self) -> None:
        hb = self._heartbeat
        if self._ended or not hb:
            return  # ended, or re-pulled without heartbeats
        if _mono() - self._last > HEARTBEAT_FACTOR * hb:
            self._end(errors.NoHeartbeatError())
            return
        self._timers.append(self._engine.client._scheduler.call_later(hb, self._watch))

    # -- any thread --------------------------------------------------------

    def _end(self, error: BaseException | None) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        self._error = error
        for t in self._timers:
            t.cancel()
        engine = self._engine
        inbox = self._inbox
        inbox.give_back()
        engine.free.append(inbox)
        engine.fetches_open -= 1
        engine.fetch_delivered += self._count
        self._put(_END)

    # -- caller's thread -----------------------------------------------------

    @property
    def error(self) -> BaseException | None:
        """Why the pull ended short (``None``: normal end, or not ended yet)."""
        return self._error

    @property
    def done(self) -> bool:
        """True once iteration has reached the end of the batch."""
        return self._done

    def drained(self) -> bool:
        """True when the pull has ended and every message of it was read."""
        return self._done or (self._ended and self._q.qsize() + len(self._held) <= 1)

    def __iter__(self) -> FetchBatch:
        return self

    def __next__(self) -> Msg:
        """The next message of the batch, as it arrives; StopIteration at its end."""
        # Replaced by FetchBase.__next__ below the class (this body is what it
        # does): a message already queued is taken there, the rest is _next_slow.
        msg: Msg = FetchBase.__next__(self)
        return msg

    def _next_slow(self) -> Msg:
        q = self._q
        held = self._held
        self._reading += 1
        try:
            while True:
                try:
                    item = next_item(q, held, None, WAIT_SLICE)  # interrupt-safe: see _handoff
                except queue.Empty:
                    if self._engine.client.is_closed:
                        self._end(errors.ConnectionClosedError())
                    elif _mono() > self._deadline + WAIT_SLICE:
                        self._end(None)  # the timer thread is gone or late
                    continue
                if item is _END:
                    self._done = True
                    self._engine.client._drainables.discard(self)
                    self._raise_if_gone()
                    raise StopIteration
                if item is _REPULL:
                    self._repull()
                    continue
                self._taken_at = _mono()
                msg: Msg = item
                return msg
        finally:
            self._reading -= 1

    def _raise_if_gone(self) -> None:
        """At the end of the batch: a consumer that does not exist (a 503 the
        server confirms, asked here on the caller's thread) or was deleted
        under the pull raises, after the messages that came before."""
        err = self._error
        if type(err) is errors.NoRespondersError:
            missing = self._engine.missing()
            if missing is not None:
                self._error = err = missing
        if isinstance(err, errors.ConsumerNotFoundError | errors.ConsumerDeletedError):
            raise err

    def _repull(self) -> None:
        """Pull again, unpinned, for what is missing (the server dropped the pull)."""
        if self._ended:
            return
        left = 0.0 if self._no_wait else self._expires_at - _mono()
        if not self._no_wait and left < MIN_REPULL_EXPIRES:
            self._end(None)
            return
        hb = self._heartbeat if 2 * self._heartbeat <= left else 0.0
        self._heartbeat = hb
        max_bytes = self._max_bytes
        if max_bytes:
            max_bytes = max(1, max_bytes - self._bytes)
        engine = self._engine
        # A new token: a late status of the dropped pull cannot end this one.
        self._reply = self._inbox.prefix + str(next(engine.tokens))
        try:
            engine.publish_pull(
                self._reply,
                max(1, self._batch - self._count),
                max_bytes,
                left,
                hb,
                self._no_wait,
                self._prio,
            )
        except errors.Error as exc:
            self._end(exc)

    # -- nc.drain() ----------------------------------------------------------

    def _drain_begin(self) -> None:
        """The connection drains: the pull ends; what arrived stays to be read."""
        self._end(None)

    def _drain_wait(self, deadline: float | None) -> bool:
        """Wait while a thread reads what is buffered; see :func:`wait_read`."""
        return wait_read(self, deadline)

    def _finished(self) -> bool:
        return self._done  # the end marker was read


def wait_read(it: Any, deadline: float | None) -> bool:
    """``nc.drain()`` on an iterator (``messages()``, a fetch): wait while it is being read.

    Its buffered messages are read by whatever thread iterates it; waiting
    lets that thread have (and ack) them before the connection closes. It
    ends when the iterator reached its end (the thread came back for more
    after the last message, so it has handled it), or when nobody is reading
    it: no thread inside ``next`` and none took a message for ``WAIT_SLICE``
    (the iterating thread may be the one draining, or gone). False when the
    deadline passed first.
    """
    while not it._finished():
        if not it._reading and _mono() - it._taken_at > WAIT_SLICE:
            return True
        if deadline is not None and _mono() >= deadline:
            return False
        time.sleep(0.005)
    return True


# A message already queued is handed out by FetchBase.__next__ itself (in C in
# the speedups build: no Python frame per message). Bound here rather than in
# the class body so that the API reference, read from the source, documents
# the method above.
FetchBatch.__next__ = FetchBase.__next__  # type: ignore[method-assign]
