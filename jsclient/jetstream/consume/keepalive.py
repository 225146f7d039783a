"""In-progress keep-alive: ``+WPI`` for messages still being worked on.

A message that is not acked within the consumer's ``ack_wait`` is delivered
again, even while its handler is still working on it. A :class:`KeepAlive`
holds the messages in hand and, every ``interval`` seconds (a third of
``ack_wait`` by default, see :func:`interval_for`), sends ``msg.in_progress()``
for each of them, which restarts the server's ack timer.

One keep-alive is one timer on the connection's scheduler (``jsclient-timers``),
however many messages it holds: no thread or timer per message. The tick
sends every ``+WPI`` itself, in one write that never waits for room in the
write queue (``send_nowait``: a library thread must not block): liveness work
never waits behind user code, as it would on the callback thread, where done
callbacks, ``error_cb`` and ``reconnect_to_server_cb`` run. Holding and
releasing a message is a dict store under a plain lock; when the option is
off nothing of this runs at all. :meth:`KeepAlive.close` cancels the timer at
once (``consume().stop()`` and the end of its dispatcher call it), so a
stopped consume's buffer is not held until the next tick.

Used by ``consume(keepalive=...)`` and ``messages(keepalive=...)``: a message
is held from its arrival in the buffer (:class:`KeptAliveInbox`, so a message
waiting behind a slow one is kept alive too) until the callback returns, or
until ``next`` is called again; and by the Django worker (every message it has
taken, see :mod:`jsclient.contrib.django.worker`). A kept-alive buffer is not
redelivered to another client of the consumer: with slow handlers keep
``max_messages`` small, so that other clients get work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from jsclient import errors
from jsclient._core import Core
from jsclient._threads import TimerHandle, log
from jsclient.jetstream.consume.contexts import MessagesContext, SourceFactory
from jsclient.jetstream.consume.engine import Inbox
from jsclient.jetstream.consume.fetch import ErrorCallback
from jsclient.msg import ACK_NOT_YET, Msg

_mono = time.monotonic

#: ``+WPI`` goes out this many times per ``ack_wait`` (and per backoff step).
PER_ACK_WAIT = 3
#: The server's default ``ack_wait``, for a consumer info without one.
DEFAULT_ACK_WAIT = 30.0
#: No keep-alive ticks faster than this.
MIN_INTERVAL = 0.05


def interval_for(info: Any) -> float:
    """A third of the shortest ack wait of the consumer (``ack_wait``, or a ``backoff`` step)."""
    cfg = getattr(info, "config", None)
    ack_wait = getattr(cfg, "ack_wait", None) or DEFAULT_ACK_WAIT
    waits = [float(ack_wait)]
    backoff = getattr(cfg, "backoff", None)
    if backoff:
        waits.extend(float(b) for b in backoff if b)
    return max(MIN_INTERVAL, min(waits) / PER_ACK_WAIT)


def resolve(option: bool | float | None, info: Any) -> float | None:
    """The keep-alive interval a ``keepalive=`` option asks for, or None when off.

    ``True`` takes :func:`interval_for` the consumer's info; a number is the
    interval in seconds; ``False``/``None`` is off.
    """
    if option is None or option is False:
        return None
    if option is True:
        return interval_for(info)
    if isinstance(option, int | float) and option > 0:
        return max(MIN_INTERVAL, float(option))
    raise ValueError(
        f"keepalive must be True, False or a positive number of seconds, not {option!r}"
    )


class KeepAlive:
    """Sends ``+WPI`` every ``interval`` seconds for each message it holds.

    ``hold(msg, deadline=None)`` adds a message (again: updates its deadline,
    a monotonic time); ``release(msg)`` removes it. A message already acked,
    nak'd or terminated is dropped at the next tick. Past its deadline a
    message is dropped and handed to ``on_deadline`` (on the timer thread:
    keep it short). The timer ends with :meth:`close`, or at the first tick
    after ``done()`` turns true.
    """

    __slots__ = (
        "__weakref__",
        "_closed",
        "_done",
        "_held",
        "_lock",
        "_on_deadline",
        "_timer",
        "client",
        "interval",
        "sent",
    )

    def __init__(
        self,
        client: Core,
        interval: float,
        *,
        on_deadline: Callable[[Msg], Any] | None = None,
    ) -> None:
        self.client = client
        self.interval = interval
        self._on_deadline = on_deadline
        self._lock = threading.Lock()
        self._held: dict[int, tuple[Msg, float | None]] = {}
        self._timer: TimerHandle | None = None
        self._done: Callable[[], bool] | None = None
        self._closed = False
        self.sent = 0  # +WPI sent so far (for tests and stats)

    def start(self, done: Callable[[], bool] | None = None) -> None:
        self._done = done
        if not self._closed:
            self._timer = self.client._scheduler.call_later(self.interval, self._tick)

    def close(self) -> None:
        self._closed = True
        timer = self._timer
        if timer is not None:
            timer.cancel()
        with self._lock:
            self._held.clear()

    def hold(self, msg: Msg, deadline: float | None = None) -> None:
        with self._lock:
            self._held[id(msg)] = (msg, deadline)

    def hold_arrived(self, msgs: list[Msg]) -> None:
        """Hold the JetStream messages of a routed batch (statuses have no ack subject)."""
        with self._lock:
            held = self._held
            for msg in msgs:
                reply = msg.reply
                if not (reply and reply.startswith("$JS.ACK.")):
                    continue
                # Last, not under an if: see tests/unit/test_interrupt_cover.py.
                held[id(msg)] = (msg, None)

    def release(self, msg: Msg) -> None:
        with self._lock:
            self._held.pop(id(msg), None)

    def release_all(self) -> None:
        with self._lock:
            self._held.clear()

    def __len__(self) -> int:
        return len(self._held)

    def wrap(self, callback: Callable[[Msg], Any]) -> Callable[[Msg], Any]:
        """``callback``, its message let go when it returns (for ``consume``; the
        message is held from its arrival by :class:`KeptAliveInbox`)."""
        release = self.release

        def kept_alive(msg: Msg) -> Any:
            try:
                return callback(msg)
            finally:
                release(msg)

        return kept_alive

    # -- timer thread --------------------------------------------------------

    def _tick(self) -> None:
        done = self._done
        if self._closed or (done is not None and done()):
            self.close()
            return
        now = _mono()
        send: list[Msg] = []
        late: list[Msg] = []
        with self._lock:
            for key, (msg, deadline) in list(self._held.items()):
                if msg._ackd != ACK_NOT_YET:
                    del self._held[key]  # settled by its handler
                elif deadline is not None and now >= deadline:
                    del self._held[key]
                    late.append(msg)
                else:
                    send.append(msg)
        if send:
            self._send(send)
        on_deadline = self._on_deadline
        for msg in late:
            if on_deadline is not None:
                try:
                    on_deadline(msg)
                except BaseException:  # a library thread runs user code: log, go on
                    log.exception("jsclient: keep-alive deadline callback raised")
        if not self._closed:
            timer = self._timer = self.client._scheduler.call_later(self.interval, self._tick)
            if self._closed:  # closed meanwhile: close() may have cancelled the old timer
                timer.cancel()

    def _send(self, msgs: list[Msg]) -> None:
        # Timer thread: every +WPI in one frame batch, queued without waiting.
        frames = b"".join(
            b"PUB %s 4\r\n+WPI\r\n" % msg.reply.encode("utf-8", "surrogateescape") for msg in msgs
        )
        try:
            self.client._publish_nowait(frames, 4 * len(msgs), len(msgs))
        except errors.Error as exc:  # closed, or the reconnect buffer is full
            log.debug("jsclient: keep-alive +WPI not sent: %s", exc)
            return
        self.sent += len(msgs)


class KeptAliveInbox(Inbox):
    """The inbox of a consume/messages with keep-alive: what the reader puts in
    is held from its arrival, so buffered messages are kept alive too."""

    def __init__(self, keepalive: KeepAlive) -> None:
        super().__init__()
        self.keepalive = keepalive

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        if item.__class__ is tuple and item[0].__class__ is list:
            self.keepalive.hold_arrived(item[0])
        super().put(item, block, timeout)


class KeptAliveMessages(MessagesContext):
    """``messages(keepalive=...)``: the message ``next`` returned last is kept
    alive until ``next`` is called again (or it is acked, or the iterator ends)."""

    def __init__(
        self,
        client: Core,
        make_source: SourceFactory,
        error_cb: ErrorCallback | None,
        interval: float,
    ) -> None:
        ka = KeepAlive(client, interval)
        self._keepalive = ka
        self._last: Msg | None = None
        super().__init__(client, make_source, error_cb, KeptAliveInbox(ka))
        ka.start(lambda: self.closed)

    def next(self, timeout: float | None = None) -> Msg:
        ka = self._keepalive
        last = self._last
        if last is not None:
            self._last = None
            ka.release(last)  # the caller moved on from it
        try:
            msg = super().next(timeout)
        except errors.TimeoutError:
            raise
        except BaseException:
            if self.closed:
                ka.close()
            raise
        self._last = msg
        return msg

    def stop(self) -> None:
        super().stop()
        self._keepalive.close()
