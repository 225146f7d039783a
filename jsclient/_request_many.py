"""Request-many (ADR-47): one request, the replies of many responders, as an iterator.

The request goes through the connection's one request multiplexer
(:mod:`jsclient._mux`, ADR-47's "mux inbox"): no subscription is made per
call. The multiplexer hands a token's waiter one reply (the reader thread
pops it, then calls ``deliver``); a request-many waiter puts itself back
under its token inside ``deliver``, on the reader thread, before the next
reply can be routed, so every reply of the request reaches it. Ending marks
the waiter done and forgets the token; ``deliver`` checks the mark after
putting itself back, so whichever of the two runs last removes the entry
(see ``_ManyReplies.deliver``).

The iterator ends, quietly, at ``max_count`` replies, at the total
``timeout`` (counted from the request), when no reply came within ``stall``
seconds of asking for the next one, at the sentinel reply (not yielded), at
a status reply such as 503 no responders, or when the replies it holds pass
``pending_msgs_limit`` / ``pending_bytes_limit`` (as a subscription's: a
caller that stops reading cannot make it hold more); ``end_reason`` then says
which. Only a closed connection raises
(:class:`~jsclient.errors.ConnectionClosedError`).

The request stops listening when it ends, whether or not the caller reads:
the reader thread stops putting the waiter back once a limit was reached,
and a timer at the deadline forgets the token. Nothing is
handed out after the deadline, even a reply that is already held.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from jsclient import errors
from jsclient._threads import WAIT_SLICE
from jsclient.protocol import headers as _headers

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient._mux import RequestMux
    from jsclient.msg import Msg

__all__ = ["EMPTY_SENTINEL", "END_REASONS", "ReplyIterator", "request_many"]

#: What ``end_reason`` may say.
END_REASONS = (
    "max_count",
    "timeout",
    "stall",
    "sentinel",
    "no_responders",
    "slow_consumer",
    "closed",
)


class _EmptySentinel:
    """ADR-47's standard sentinel: a reply with an empty payload ends the replies."""

    __slots__ = ()

    def __call__(self, msg: Msg) -> bool:
        return not msg.data

    def __repr__(self) -> str:
        return "jsclient.EMPTY_SENTINEL"


#: The default ``sentinel`` of ``request_many``: an empty-payload reply ends it.
EMPTY_SENTINEL: Callable[[Msg], bool] = _EmptySentinel()


class _ManyReplies:
    """The multiplexer's waiter (:class:`~jsclient._mux.Waiter`) for one request-many,
    which stays registered for every reply, and the request it sends.

    ``subject``, ``body``, ``_hdr`` and ``_token`` are what
    :meth:`~jsclient._mux.RequestMux.send_batch` publishes; it sets ``_token``
    before the write, so a reply can never come before the token is known.
    ``deliver`` holds at most ``max_msgs`` replies of ``max_bytes`` in all
    (0: no limit); past either it stops listening (``overflow``).
    """

    __slots__ = (
        "_hdr",
        "_mux",
        "_token",
        "_wend",
        "_wlen",
        "body",
        "done",
        "in_bytes",
        "max_bytes",
        "max_msgs",
        "out_bytes",
        "overflow",
        "q",
        "subject",
    )

    def __init__(
        self,
        subject: str,
        body: bytes,
        hdr: bytes | None,
        mux: RequestMux,
        max_msgs: int,
        max_bytes: int,
    ) -> None:
        self.subject = subject
        self.body = body
        self._hdr = hdr
        self._token: str | None = None
        self._mux = mux
        self.q: queue.SimpleQueue[Msg | None] = queue.SimpleQueue()
        self.done = False
        self.max_msgs = max_msgs
        self.max_bytes = max_bytes
        # Bytes queued (the reader adds) and handed out (the caller adds): one
        # writer each, so no update is lost; held = in_bytes - out_bytes.
        self.in_bytes = 0
        self.out_bytes = 0
        self.overflow = False

    def deliver(self, msg: Msg | None) -> None:
        """Reader thread: one reply (None: the connection closed)."""
        if msg is not None:
            max_bytes = self.max_bytes
            if max_bytes:
                size = msg.size
                if self.in_bytes + size - self.out_bytes > max_bytes:
                    self.overflow = True  # the caller does not keep up: stop listening
                    self.stop()
                    return
                self.in_bytes += size
            max_msgs = self.max_msgs
            if max_msgs and self.q.qsize() >= max_msgs:
                self.overflow = True
                self.stop()
                return
        self.q.put(msg)
        token = self._token
        if msg is None or self.done or token is None:
            return
        # (The deadline's timer stops the listening: no clock read per reply.)
        self._mux.rearm(token, self)  # the reader forgot it: wait for the next reply
        if self.done:
            # Ended meanwhile: stop() may have looked before the line above.
            self._mux.cancel(token)

    def stop(self) -> None:
        """Stop listening (any thread): the token is forgotten."""
        self.done = True
        self._mux.cancel(self._token)


class ReplyIterator(Iterator["Msg"]):
    """The replies of one :func:`request_many`; ``close()`` ends it early.

    Also a context manager. Replies that arrive after the end are dropped;
    ``end_reason`` says why it ended (one of :data:`END_REASONS`; None while
    it runs).
    """

    def __init__(
        self,
        client: Core,
        waiter: _ManyReplies,
        deadline: float | None,
        stall: float | None,
        max_count: int | None,
        sentinel: Callable[[Msg], bool] | None,
    ) -> None:
        self._client = client
        self._waiter = waiter
        self._deadline = deadline
        self._stall = stall
        self._max = max_count
        self._sentinel = sentinel
        self._count = 0
        self._ended = False
        self.end_reason: str | None = None
        # The deadline also ends the listening when nobody reads (see the module doc).
        self._timer = (
            None
            if deadline is None
            else client._scheduler.call_later(max(0.0, deadline - time.monotonic()), waiter.stop)
        )

    def __iter__(self) -> ReplyIterator:
        return self

    def __enter__(self) -> ReplyIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # An iterator dropped before its end must not leave its token behind.
        if not getattr(self, "_ended", True):
            self.close()

    @property
    def count(self) -> int:
        """Replies handed out so far (the sentinel not counted)."""
        return self._count

    def close(self) -> None:
        """End now: the token is forgotten, later replies are dropped."""
        self._end("closed")

    def _end(self, reason: str) -> None:
        if self._ended:
            return
        self._ended = True
        self.end_reason = reason
        self._waiter.stop()
        timer = self._timer
        if timer is not None:
            timer.cancel()

    def _wait_limit(self) -> float | None:
        """Seconds this wait may last (None: no limit), or <= 0 when time is up."""
        left = None if self._deadline is None else self._deadline - time.monotonic()
        if self._count and self._stall is not None:
            # ADR-47: after the first reply, wait the lesser of the stall and what is left.
            left = self._stall if left is None else min(left, self._stall)
        return left

    def __next__(self) -> Msg:
        if self._ended:
            raise StopIteration
        deadline = self._deadline
        w = self._waiter
        q = w.q
        if deadline is not None and time.monotonic() >= deadline:
            self._end("timeout")  # nothing after the deadline, even what is held
            raise StopIteration
        try:
            msg = q.get_nowait()  # a reply is waiting: no clock to set
        except queue.Empty:
            msg = self._wait(deadline, w, q)
        # The end checks, inline (once per reply).
        if msg is None:
            self._end("closed")
            raise errors.ConnectionClosedError()
        if w.max_bytes:
            w.out_bytes += msg.size
        if not msg.data and msg._hdr is not None and msg.status is not None:
            self._end("no_responders")  # 503 no responders, or another status: quietly
            raise StopIteration
        sentinel = self._sentinel
        if sentinel is not None:
            try:
                stop = sentinel(msg)
            except BaseException:
                self._end("closed")
                raise
            if stop:
                self._end("sentinel")
                raise StopIteration
        self._count += 1
        if self._max is not None and self._count >= self._max:
            self._end("max_count")
        return msg

    def _wait(
        self, deadline: float | None, w: _ManyReplies, q: queue.SimpleQueue[Msg | None]
    ) -> Msg | None:
        """Wait for the next reply within the total timeout and the stall."""
        limit = self._wait_limit()
        end = None if limit is None else time.monotonic() + limit
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                self._end("timeout")  # nothing after the deadline, even what is held
                raise StopIteration
            left = None if end is None else end - now
            try:
                if left is not None and left <= 0:
                    msg = q.get_nowait()
                else:
                    msg = q.get(timeout=WAIT_SLICE if left is None else min(left, WAIT_SLICE))
            except queue.Empty:
                if w.overflow:
                    self._end("slow_consumer")  # handed out what it held
                    raise StopIteration from None
                if end is not None and time.monotonic() >= end:
                    stalled = deadline is None or time.monotonic() < deadline
                    self._end("stall" if stalled else "timeout")
                    raise StopIteration from None
                continue
            return msg


def request_many(
    client: Core,
    subject: str,
    payload: bytes,
    headers: _headers.HeadersIn | None,
    timeout: float | None,
    max_count: int | None,
    stall: float | None,
    sentinel: Callable[[Msg], bool] | None,
    limits: tuple[int, int],
) -> ReplyIterator:
    """The body of :meth:`jsclient.Client.request_many`, documented there."""
    if max_count is not None and max_count < 1:
        raise ValueError("max_count must be at least 1 (or None)")
    if sentinel is not None and not callable(sentinel):
        raise TypeError("sentinel must be a callable (msg) -> bool, or None")
    if timeout is not None and timeout < 0:
        timeout = 0.0
    if stall is not None and (stall <= 0 or (timeout is not None and stall >= timeout)):
        stall = None  # ADR-47: behaves as if not supplied
    pending_msgs_limit, pending_bytes_limit = limits
    for name, limit in (
        ("pending_msgs_limit", pending_msgs_limit),
        ("pending_bytes_limit", pending_bytes_limit),
    ):
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"{name} must be an int >= 0, got {limit!r}")
    hdr = _headers.encode(headers) if headers else None
    mux = client._mux
    deadline = None if timeout is None else time.monotonic() + timeout
    waiter = _ManyReplies(subject, payload, hdr, mux, pending_msgs_limit, pending_bytes_limit)
    failed = mux.send_batch([waiter])
    if failed:
        raise failed[0][1]
    return ReplyIterator(client, waiter, deadline, stall, max_count, sentinel)
