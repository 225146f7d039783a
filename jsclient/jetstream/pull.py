"""Pull consuming for ADR-37 consumers: fetch, fetch_bytes, fetch_no_wait, next, consume, messages.

:class:`PullConsumerMixin` gives a consumer class these operations on top of
the pull engine in :mod:`jsclient.jetstream._pull_engine`. The class provides
``_js`` (the JetStream context), ``stream_name``, ``name`` and ``_cached_info``.

Threads: ``consume`` runs the callback on a dispatcher thread of its own
(``jsclient-consume-<consumer>``), never on the socket reader; ``messages``
hands messages to whichever thread calls ``next`` (one at a time). Either
thread receives messages from the reader through a ``queue.SimpleQueue``.

Concurrency on one consumer instance: fetches, consumes and ``messages``
iterators may run side by side; each gets an inbox of its own (fetches borrow
from a small pool, so sequential fetches reuse one subscription). They then
share the consumer's messages as the server hands them out.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from jsclient import _impl, errors
from jsclient._core import Core
from jsclient._threads import Flag, TimerHandle, log
from jsclient.jetstream._pull_engine import (
    BYTES_MODE_BATCH,
    EXPIRY_GUARD,
    FLOW_CONTROL,
    HEARTBEAT,
    HEARTBEAT_FACTOR,
    PIN_HDR,
    STOP,
    WAIT_SLICE,
    Engine,
    Feed,
    PullOptions,
    Terminal,
    ack_none,
    continuous_options,
    fetch_heartbeat,
    positive_int,
    pull_status,
)
from jsclient.msg import ACK_NONE_POLICY, Msg

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context

__all__ = [
    "ConsumeContext",
    "FetchBatch",
    "MessagesContext",
    "PullConsumerMixin",
]

ErrorCallback = Callable[[BaseException], Any]
_mono = time.monotonic
_status_of = _impl.status.status_of
_classify = _impl.status.classify
_END = object()


class Source(Protocol):
    """What a consume/messages context pulls from (a :class:`Feed`, or an ordered one)."""

    def start(self) -> None: ...

    def process(self, item: Any) -> Msg | None: ...

    def stop(self) -> None: ...


SourceFactory = Callable[["queue.SimpleQueue[Any]", Callable[[BaseException], None]], Source]


class _Reporter:
    """Sends warnings to the consume/messages ``error_cb``, else the connection's."""

    __slots__ = ("client", "error_cb")

    def __init__(self, client: Core, error_cb: ErrorCallback | None) -> None:
        self.client = client
        self.error_cb = error_cb

    def __call__(self, exc: BaseException) -> None:
        if self.error_cb is not None:
            self.client._run_callback(self.error_cb, exc)
        else:
            self.client._report_error(exc)


class FetchBatch:
    """The messages of one pull request, yielded as they arrive.

    Iterate it (once): iteration ends when the batch is full or the pull ended
    (a status, the client-side guard at expires + 1 s, a missed heartbeat, the
    connection closing). Then :attr:`error` says why a short batch ended:
    ``None`` for ordinary ends (no messages, request timeout, expiry), else the
    status error (``ConsumerDeletedError``, ``StatusError`` for a ``409
    Exceeded Max*`` refusal, ``NoRespondersError``, ``NoHeartbeatError``...).
    """

    def __init__(
        self,
        engine: Engine,
        batch: int,
        max_bytes: int,
        expires: float,
        heartbeat: float,
        no_wait: bool = False,
        group: str | None = None,
    ) -> None:
        self._engine = engine
        self._batch = batch
        self._max_bytes = max_bytes
        self._heartbeat = heartbeat
        self._ack_none = engine.ack_none
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._put = self._q.put
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
        inbox = engine.take_inbox()
        self._inbox = inbox
        self._reply = inbox.prefix + str(next(engine.tokens))
        sched = engine.client._scheduler
        self._timers.append(sched.call_later(guard, self._end, None))
        if heartbeat > 0:
            self._timers.append(sched.call_later(heartbeat, self._watch))
        engine.fetches_open += 1
        inbox.target = self._on_msg
        engine.client._drainables.add(self)
        try:
            engine.publish_pull(self._reply, batch, max_bytes, expires, heartbeat, no_wait, group)
        except BaseException:
            self._end(None)
            raise

    # -- reader thread -----------------------------------------------------

    def _on_msg(self, msg: Msg) -> None:
        hdr = msg._hdr
        if hdr is not None:
            if not msg.data:
                st = _status_of(hdr)
                if st is not None:
                    self._on_status(msg.subject, st[0], st[1])
                    return
            if PIN_HDR in hdr:
                self._engine.remember_pin(hdr)
        if self._ended:
            return
        if self._heartbeat:
            self._last = _mono()
        if self._ack_none:
            msg._ackd = ACK_NONE_POLICY
        self._put(msg)
        n = self._count + 1
        self._count = n
        if n >= self._batch:
            self._end(None)
        elif self._max_bytes:
            self._bytes += msg.size
            if self._bytes >= self._max_bytes:
                self._end(None)

    def _on_status(self, subject: str, code: int, description: str) -> None:
        if subject != self._reply:
            return  # a status of an earlier pull on this inbox
        self._last = _mono()
        kind, error = pull_status(self._engine, code, description)
        if kind not in (HEARTBEAT, FLOW_CONTROL):
            self._end(error)

    # -- timer thread ------------------------------------------------------

    def _watch(self) -> None:
        if self._ended:
            return
        hb = self._heartbeat
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
        inbox.target = None
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
        return self._done or (self._ended and self._q.qsize() <= 1)

    def __iter__(self) -> FetchBatch:
        return self

    def __next__(self) -> Msg:
        if self._done:
            raise StopIteration
        get = self._q.get
        self._reading += 1
        try:
            while True:
                try:
                    item = get(True, WAIT_SLICE)
                except queue.Empty:
                    if self._engine.client.is_closed:
                        self._end(errors.ConnectionClosedError())
                    elif _mono() > self._deadline + WAIT_SLICE:
                        self._end(None)  # the timer thread is gone or late
                    continue
                if item is _END:
                    self._done = True
                    self._engine.client._drainables.discard(self)
                    raise StopIteration
                self._taken_at = _mono()
                msg: Msg = item
                return msg
        finally:
            self._reading -= 1

    # -- nc.drain() ----------------------------------------------------------

    def _drain_begin(self) -> None:
        """The connection drains: the pull ends; what arrived stays to be read."""
        self._end(None)

    def _drain_wait(self, deadline: float | None) -> bool:
        """Wait while a thread reads what is buffered; see :func:`wait_read`."""
        return wait_read(self, deadline)

    def _finished(self) -> bool:
        return self._done  # the end marker was read


class ConsumeContext:
    """A running ``consume()``: the callback gets each message on a dispatcher thread.

    ``stop()`` stops pulling and returns at once; the callback runs no more
    after the call in progress. ``drain()`` stops pulling and lets the callback
    have what is already buffered. ``closed`` turns true, and ``wait()``
    returns, once the dispatcher has finished -- also when the consume ended on
    its own (consumer deleted, push-based consumer, bad request, connection
    closed); ``error`` then holds the reason.
    """

    def __init__(
        self,
        client: Core,
        make_source: SourceFactory,
        callback: Callable[[Msg], Any],
        error_cb: ErrorCallback | None,
        name: str,
    ) -> None:
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._report = _Reporter(client, error_cb)
        self._callback = callback
        self._stopped = False
        self._done = Flag()
        self._error: BaseException | None = None
        self._client = client
        self._source = make_source(self._q, self._report)
        self._source.start()
        client._drainables.add(self)
        self._thread = threading.Thread(
            target=self._run, name=f"jsclient-consume-{name}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        get = self._q.get
        process = self._source.process
        callback = self._callback
        try:
            while not self._stopped:
                try:
                    item = get(True, WAIT_SLICE)
                except queue.Empty:
                    continue
                if item is STOP:
                    break
                try:
                    msg = process(item)
                except Terminal as t:
                    self._error = t.error
                    if t.report:
                        self._report(t.error)
                    break
                except Exception as exc:
                    self._report(exc)
                    continue
                if msg is None or self._stopped:
                    continue
                try:
                    callback(msg)
                except Exception as exc:
                    log.exception("jsclient: consume callback raised")
                    self._report(exc)
        finally:
            self._source.stop()
            self._client._drainables.discard(self)
            self._done.set()

    def _drain_begin(self) -> None:
        """The connection drains: stop pulling; the callback gets what is buffered."""
        self.drain()

    def _drain_wait(self, deadline: float | None) -> bool:
        """Wait until the callback has had every buffered message."""
        if self._thread is threading.current_thread():
            return True  # drained from inside the callback: it cannot wait for itself
        return self.wait(None if deadline is None else max(0.0, deadline - _mono()))

    def stop(self) -> None:
        """Stop pulling and delivering; buffered messages are dropped (redelivered later)."""
        self._stopped = True
        self._source.stop()
        self._q.put(STOP)

    def drain(self) -> None:
        """Stop pulling; the callback still gets what is buffered, then the consume ends."""
        self._source.stop()
        self._q.put(STOP)

    @property
    def closed(self) -> bool:
        """True once no more callbacks will run."""
        return self._done.is_set()

    @property
    def error(self) -> BaseException | None:
        """Why the consume ended by itself (a terminal status, connection closed), or None."""
        return self._error

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the consume has ended; True if it has."""
        if self._thread is threading.current_thread():
            return self._done.is_set()
        return _wait_event(self._done, timeout)


class MessagesContext:
    """A blocking iterator over a continuous pull; also a context manager (stops on exit).

    ``next(timeout)`` returns a message or raises ``TimeoutError``; a terminal
    status (``ConsumerDeletedError`` ...) and, with ``err_on_missing_heartbeat``
    (the default), ``NoHeartbeatError`` are raised from it -- the iterator keeps
    going after a missed heartbeat. ``stop()`` and ``drain()`` may be called from
    any thread and wake a blocked ``next`` at once; after ``stop`` (or when
    ``drain`` has delivered the buffered messages) ``next`` raises
    ``MsgIteratorClosedError`` and a ``for`` loop ends.
    """

    def __init__(
        self,
        client: Core,
        make_source: SourceFactory,
        error_cb: ErrorCallback | None,
    ) -> None:
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._report = _Reporter(client, error_cb)
        self._stopped = False
        self._closed = False
        self._error: BaseException | None = None
        self._client = client
        self._taken_at = _mono()
        self._reading = 0  # threads blocked in next() (see _drain_wait)
        self._source = make_source(self._q, self._report)
        self._source.start()
        client._drainables.add(self)

    def __enter__(self) -> MessagesContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __iter__(self) -> MessagesContext:
        return self

    def __next__(self) -> Msg:
        try:
            return self.next(None)
        except errors.MsgIteratorClosedError:
            raise StopIteration from None

    def next(self, timeout: float | None = None) -> Msg:
        """The next message; ``TimeoutError`` when none comes within ``timeout`` seconds."""
        if self._closed:
            raise errors.MsgIteratorClosedError()
        get = self._q.get
        process = self._source.process
        deadline = None if timeout is None else _mono() + timeout
        wait = WAIT_SLICE
        self._reading += 1
        try:
            while True:
                if deadline is not None:
                    wait = min(WAIT_SLICE, deadline - _mono())
                    if wait <= 0:
                        raise errors.TimeoutError()
                try:
                    item = get(True, wait)
                except queue.Empty:
                    continue
                if item is STOP or self._stopped:
                    self._close()
                    raise errors.MsgIteratorClosedError()
                try:
                    msg = process(item)
                except Terminal as t:
                    self._error = t.error
                    self._close()
                    raise t.error from None
                if msg is not None:
                    self._taken_at = _mono()
                    return msg
        finally:
            self._reading -= 1

    def _close(self) -> None:
        self._closed = True
        self._source.stop()
        self._client._drainables.discard(self)

    # -- nc.drain() ----------------------------------------------------------

    def _drain_begin(self) -> None:
        """The connection drains: stop pulling; ``next`` returns what is buffered."""
        self.drain()

    def _drain_wait(self, deadline: float | None) -> bool:
        """Wait while a thread reads what is buffered; see :func:`wait_read`."""
        return wait_read(self, deadline)

    def _finished(self) -> bool:
        return self._closed  # the stop marker was read

    def stop(self) -> None:
        """Stop pulling; a blocked or later ``next`` raises ``MsgIteratorClosedError``."""
        self._stopped = True
        self._closed = True
        self._source.stop()
        self._client._drainables.discard(self)
        self._q.put(STOP)

    def drain(self) -> None:
        """Stop pulling; ``next`` returns what is buffered, then the iterator is closed."""
        self._source.stop()
        self._q.put(STOP)

    @property
    def closed(self) -> bool:
        """True once ``next`` can return no more messages."""
        return self._closed

    @property
    def error(self) -> BaseException | None:
        """The terminal error that ended the iterator, if any."""
        return self._error


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


def _wait_event(event: Flag, timeout: float | None) -> bool:
    deadline = None if timeout is None else _mono() + timeout
    while not event.is_set():
        left = WAIT_SLICE if deadline is None else min(WAIT_SLICE, deadline - _mono())
        if left <= 0:
            return False
        event.wait(left)
    return True


class PullConsumerMixin:
    """fetch / next / consume / messages / stats for a pull consumer (ADR-37).

    The consumer class sets ``_js``, ``stream_name``, ``name`` and ``_cached_info``.
    """

    _js: Context
    stream_name: str
    name: str
    _cached_info: Any
    _jsclient_pull_engine: Engine | None = None

    def _pull_engine(self) -> Engine:
        engine = self._jsclient_pull_engine
        if engine is None:
            engine = Engine(self._js, self.stream_name, self.name, ack_none(self._cached_info))
            self._jsclient_pull_engine = engine
        return engine

    # -- one pull ----------------------------------------------------------

    def fetch(
        self,
        max_messages: int = 100,
        *,
        expires: float = 30.0,
        heartbeat: float | None = None,
        group: str | None = None,
    ) -> FetchBatch:
        """Pull up to ``max_messages``; the batch yields them as they arrive.

        ``heartbeat`` defaults to 5 s when ``expires >= 10`` s (a pull whose
        server went away then ends with ``NoHeartbeatError`` instead of waiting
        for the guard). ``group`` names a priority group.
        """
        batch = positive_int("max_messages", max_messages)
        hb = fetch_heartbeat(expires, heartbeat)
        return FetchBatch(self._pull_engine(), batch, 0, expires, hb, False, group)

    def fetch_bytes(
        self,
        max_bytes: int,
        *,
        expires: float = 30.0,
        heartbeat: float | None = None,
        group: str | None = None,
    ) -> FetchBatch:
        """Pull up to ``max_bytes`` bytes of messages (ADR-37 sizes)."""
        limit = positive_int("max_bytes", max_bytes)
        hb = fetch_heartbeat(expires, heartbeat)
        return FetchBatch(self._pull_engine(), BYTES_MODE_BATCH, limit, expires, hb, False, group)

    def fetch_no_wait(self, max_messages: int = 100, *, group: str | None = None) -> FetchBatch:
        """Take up to ``max_messages`` that are available now; never waits for more."""
        batch = positive_int("max_messages", max_messages)
        return FetchBatch(self._pull_engine(), batch, 0, 0.0, 0.0, True, group)

    def next(self, timeout: float | None = 30.0, *, group: str | None = None) -> Msg:
        """One message, or ``TimeoutError`` after ``timeout`` seconds (``None``: no limit).

        A pull that ends with an error status raises that error; ``timeout <= 0``
        makes a no-wait pull.
        """
        while True:
            if timeout is not None and timeout <= 0:
                batch = self.fetch_no_wait(1, group=group)
            else:
                batch = self.fetch(1, expires=30.0 if timeout is None else timeout, group=group)
            for msg in batch:
                return msg
            if batch.error is not None:
                raise batch.error
            if timeout is not None:
                raise errors.TimeoutError()

    # -- continuous pulls ----------------------------------------------------

    def _make_feed(self, opts: PullOptions) -> SourceFactory:
        engine = self._pull_engine()

        def make(q: queue.SimpleQueue[Any], report: Callable[[BaseException], None]) -> Source:
            return Feed(engine, opts, q, report)

        return make

    def consume(
        self,
        callback: Callable[[Msg], Any],
        *,
        max_messages: int | None = None,
        max_bytes: int | None = None,
        expires: float = 30.0,
        heartbeat: float | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        error_cb: ErrorCallback | None = None,
        group: str | None = None,
    ) -> ConsumeContext:
        """Pull continuously and run ``callback(msg)`` on a dispatcher thread.

        Buffers up to ``max_messages`` (default 500) or ``max_bytes`` (exclusive
        with it) and re-pulls as soon as the pending count falls to the
        threshold (default half). Heartbeats are always on (default expires/2,
        at most 30 s, at least 0.5 s). Warnings (``409 Exceeded Max*``, missed
        heartbeats) go to ``error_cb``, or else the connection's error callback.
        """
        if not callable(callback):
            raise TypeError("callback must be callable")
        opts = continuous_options(
            max_messages, max_bytes, expires, heartbeat, threshold_messages, threshold_bytes, group
        )
        return ConsumeContext(
            self._js._client, self._make_feed(opts), callback, error_cb, self.name
        )

    def messages(
        self,
        *,
        max_messages: int | None = None,
        max_bytes: int | None = None,
        expires: float = 30.0,
        heartbeat: float | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        error_cb: ErrorCallback | None = None,
        err_on_missing_heartbeat: bool = True,
        group: str | None = None,
    ) -> MessagesContext:
        """A blocking iterator over a continuous pull (same options as :meth:`consume`)."""
        opts = continuous_options(
            max_messages,
            max_bytes,
            expires,
            heartbeat,
            threshold_messages,
            threshold_bytes,
            group,
            err_on_missing_heartbeat,
        )
        return MessagesContext(self._js._client, self._make_feed(opts), error_cb)

    def stats(self) -> dict[str, Any]:
        """Pull accounting of the latest consume/messages, or of the fetches.

        Keys: ``pending_messages``, ``pending_bytes``, ``pulls_outstanding``,
        ``last_heartbeat_age`` (seconds, or None), ``reconnects``, ``delivered``.
        """
        return self._pull_engine().stats()
