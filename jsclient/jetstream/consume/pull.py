"""Pull consuming for ADR-37 consumers: fetch, fetch_bytes, fetch_no_wait, next, consume, messages.

:class:`PullConsumerMixin` gives a consumer class these operations on top of
the pull engine in :mod:`jsclient.jetstream.consume.engine`. The class provides
``_js`` (the JetStream context), ``stream_name``, ``name`` and ``_cached_info``.

Threads: ``consume`` runs the callback on a dispatcher thread of its own
(``jsclient-consume-<consumer>-<n>``), never on the socket reader; ``messages``
hands messages to whichever thread calls ``next`` (one at a time). Either
thread receives messages from the reader through a queue, one batch per read.

Concurrency on one consumer instance: fetches, consumes and ``messages``
iterators may run side by side; each gets an inbox of its own (fetches borrow
from a small pool, so sequential fetches reuse one subscription). They then
share the consumer's messages as the server hands them out.

Priority groups (ADR-42): every operation takes ``group``, ``min_pending``,
``min_ack_pending`` and ``priority``, checked against the consumer's cached
info before anything is sent (see :mod:`jsclient.jetstream.consume.priority`). One
consumer instance is one client of a ``pinned_client`` group: its pulls share
the pin id the server gave it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.jetstream.consume.engine import (
    BYTES_MODE_BATCH,
    Engine,
    Inbox,
    PullOptions,
    ack_none,
    continuous_options,
    fetch_heartbeat,
    positive_int,
)
from jsclient.jetstream.consume.feed import Feed
from jsclient.jetstream.consume.priority import Priority, priority_options
from jsclient.msg import Msg

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
from jsclient.jetstream.consume.contexts import (
    ConsumeContext,
    MessagesContext,
    Source,
    SourceFactory,
)
from jsclient.jetstream.consume.fetch import ErrorCallback, FetchBatch
from jsclient.jetstream.consume.keepalive import KeepAlive, KeptAliveInbox, KeptAliveMessages
from jsclient.jetstream.consume.keepalive import resolve as keepalive_interval

__all__ = [
    "ConsumeContext",
    "ErrorCallback",
    "FetchBatch",
    "MessagesContext",
    "PullConsumerMixin",
    "SourceFactory",
]


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

    def _priority(
        self,
        group: str | None,
        min_pending: int | None,
        min_ack_pending: int | None,
        priority: int | None,
    ) -> Priority | None:
        return priority_options(self._cached_info, group, min_pending, min_ack_pending, priority)

    # -- one pull ----------------------------------------------------------

    def fetch(
        self,
        max_messages: int = 100,
        *,
        expires: float = 30.0,
        heartbeat: float | None = None,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> FetchBatch:
        """Pull up to ``max_messages``; the batch yields them as they arrive.

        ``heartbeat`` defaults to 5 s when ``expires >= 10`` s (a pull whose
        server went away then ends with ``NoHeartbeatError`` instead of waiting
        for the guard). ``group`` names the priority group, required on a
        consumer with priority groups; ``min_pending`` / ``min_ack_pending``
        (policy ``overflow``) serve the pull only while the consumer has at
        least that many messages pending / awaiting acks; ``priority`` (0-9,
        policy ``prioritized``) ranks it, lower first.
        """
        batch = positive_int("max_messages", max_messages)
        hb = fetch_heartbeat(expires, heartbeat)
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        return FetchBatch(self._pull_engine(), batch, 0, expires, hb, False, prio)

    def fetch_bytes(
        self,
        max_bytes: int,
        *,
        expires: float = 30.0,
        heartbeat: float | None = None,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> FetchBatch:
        """Pull up to ``max_bytes`` bytes of messages (ADR-37 sizes); options as ``fetch``."""
        limit = positive_int("max_bytes", max_bytes)
        hb = fetch_heartbeat(expires, heartbeat)
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        return FetchBatch(self._pull_engine(), BYTES_MODE_BATCH, limit, expires, hb, False, prio)

    def fetch_no_wait(
        self,
        max_messages: int = 100,
        *,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> FetchBatch:
        """Take up to ``max_messages`` that are available now; never waits for more."""
        batch = positive_int("max_messages", max_messages)
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        return FetchBatch(self._pull_engine(), batch, 0, 0.0, 0.0, True, prio)

    def next(
        self,
        timeout: float | None = 30.0,
        *,
        group: str | None = None,
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
    ) -> Msg:
        """One message, or ``TimeoutError`` after ``timeout`` seconds (``None``: no limit).

        A pull that ends with an error status raises that error; ``timeout <= 0``
        makes a no-wait pull. Priority-group options as ``fetch``.
        """
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        engine = self._pull_engine()
        while True:
            if timeout is not None and timeout <= 0:
                batch = FetchBatch(engine, 1, 0, 0.0, 0.0, True, prio)
            else:
                expires = 30.0 if timeout is None else timeout
                hb = fetch_heartbeat(expires, None)
                batch = FetchBatch(engine, 1, 0, expires, hb, False, prio)
            for msg in batch:
                return msg
            if batch.error is not None:
                raise batch.error
            if timeout is not None:
                raise errors.TimeoutError()

    # -- continuous pulls ----------------------------------------------------

    def _make_feed(self, opts: PullOptions) -> SourceFactory:
        engine = self._pull_engine()

        def make(q: Inbox, report: Callable[[BaseException], None]) -> Source:
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
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
        keepalive: bool | float | None = None,
    ) -> ConsumeContext:
        """Pull continuously and run ``callback(msg)`` on a dispatcher thread.

        The callback runs on this consume's own thread
        (``jsclient-consume-<consumer>-<n>``), one message at a time, never on the
        socket reader; an exception it raises is logged (and sent to
        ``error_cb``) and the next message follows. Returns a
        ``ConsumeContext`` (``stop()``, ``drain()``, ``wait()``); priority
        options a consumer does not allow raise before anything is sent.

        Buffers up to ``max_messages`` (default 500) or ``max_bytes`` (exclusive
        with it) and re-pulls as soon as the pending count falls to the
        threshold (default half). Heartbeats are always on (default expires/2,
        at most 30 s, at least 0.5 s). Warnings (``409 Exceeded Max*``, missed
        heartbeats, a lost pin) go to ``error_cb``, or else the connection's error
        callback (the callback's own errors and the error that ends the consume
        on its thread, before ``wait()`` returns; warnings from the pull on the
        client's callback thread). Priority-group options as ``fetch``.
        ``keepalive=True`` sends
        ``+WPI`` (``msg.in_progress()``) every third of the consumer's
        ``ack_wait`` for each message from its arrival in the buffer until the
        callback returns; a number sets that interval (seconds). See
        :mod:`jsclient.jetstream.consume.keepalive`.
        """
        if not callable(callback):
            raise TypeError("callback must be callable")
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        opts = continuous_options(
            max_messages, max_bytes, expires, heartbeat, threshold_messages, threshold_bytes, prio
        )
        interval = keepalive_interval(keepalive, self._cached_info)
        if interval is None:
            return ConsumeContext(
                self._js._client, self._make_feed(opts), callback, error_cb, self.name
            )
        ka = KeepAlive(self._js._client, interval)
        cc = ConsumeContext(
            self._js._client,
            self._make_feed(opts),
            ka.wrap(callback),
            error_cb,
            self.name,
            KeptAliveInbox(ka),
            ka.close,  # stop() or the dispatcher's end closes it at once
        )
        ka.start()
        return cc

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
        min_pending: int | None = None,
        min_ack_pending: int | None = None,
        priority: int | None = None,
        keepalive: bool | float | None = None,
    ) -> MessagesContext:
        """A blocking iterator over a continuous pull (same options as :meth:`consume`).

        With ``keepalive`` a message gets ``+WPI`` from its arrival in the
        buffer until ``next`` is called after returning it (or it is acked).
        """
        interval = keepalive_interval(keepalive, self._cached_info)
        prio = self._priority(group, min_pending, min_ack_pending, priority)
        opts = continuous_options(
            max_messages,
            max_bytes,
            expires,
            heartbeat,
            threshold_messages,
            threshold_bytes,
            prio,
            err_on_missing_heartbeat,
        )
        if interval is not None:
            return KeptAliveMessages(self._js._client, self._make_feed(opts), error_cb, interval)
        return MessagesContext(self._js._client, self._make_feed(opts), error_cb)

    def stats(self) -> dict[str, Any]:
        """Pull accounting of the latest consume/messages, or of the fetches.

        Keys: ``pending_messages``, ``pending_bytes``, ``pulls_outstanding``,
        ``last_heartbeat_age`` (seconds, or None), ``reconnects``, ``delivered``.
        """
        return self._pull_engine().stats()
