"""Ordered consumer (ADR-17 / ADR-37): every message of a stream once, in order, self-healing.

The server-side consumer is an ephemeral pull consumer with ack policy none, memory
storage, one replica and an inactive threshold (5 min by default), named
``<name_prefix>_<serial>``. The client checks that each message's consumer
sequence is one past the previous one. On a gap, a missed heartbeat, a deleted
consumer or no responders it *resets*: a new consumer (next serial) starts at
the last delivered stream sequence + 1, retried with backoff from 1 s doubling
to 10 s (``max_reset_attempts`` bounds the attempts; ``None`` retries forever),
and the old one is deleted in the background (by the connection's deleter,
:mod:`jsclient.jetstream.consume.deleter`). Messages of an old instance are
recognised by the consumer name in their ack subject and dropped.
A reset of the server-side consumer made elsewhere (ADR-60, ``$JS.API.CONSUMER.RESET``)
shows as the consumer sequence starting again at 1: a gap like any other, with
one WARNING on the ``jsclient`` logger (``tests/integration/test_consumer_reset.py``).

``fetch``/``next`` reset in the caller's thread before pulling; ``consume`` and
``messages`` reset on a helper thread (``jsclient-ordered-reset-<prefix>``)
while their dispatcher or iterator keeps waiting on the same queue (the
readers that check the order are in :mod:`~jsclient.jetstream.consume.ordered_source`). One
operation at a time: a second ``consume``/``messages`` while one runs raises
:class:`OrderedConsumerBusyError`; a fetch started while an earlier batch is not
fully read resets first (the unread rest of that batch is dropped, never
delivered out of order).
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jsclient import _impl, errors
from jsclient._threads import Signal, log
from jsclient.api import ConsumerInfo
from jsclient.jetstream.consume.deleter import delete_later
from jsclient.jetstream.consume.engine import (
    Engine,
    Inbox,
    PullOptions,
    continuous_options,
    fetch_heartbeat,
    positive_int,
)
from jsclient.jetstream.consume.ordered_source import (
    OrderedBatch,
    OrderedSource,
    Stopped,
    note_gap,
)
from jsclient.jetstream.consume.pull import (
    ConsumeContext,
    ErrorCallback,
    FetchBatch,
    MessagesContext,
    SourceFactory,
)
from jsclient.msg import Msg

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context

__all__ = ["OrderedConsumer", "OrderedConsumerBusyError"]

_parse_jsack = _impl.jsack.parse_jsack
_BACKOFF_FIRST = 1.0
_BACKOFF_MAX = 10.0


class OrderedConsumerBusyError(errors.JetStreamError):
    """A consume or messages iterator is already running on this ordered consumer."""

    default_message = "nats: ordered consumer already has a consume or messages in progress"


def _value(v: Any) -> Any:
    return getattr(v, "value", v)


class OrderedConsumer:
    """An ordered view of a stream with the pull API of a consumer."""

    def __init__(
        self,
        js: Context,
        stream: str,
        *,
        filter_subjects: str | list[str] | None = None,
        deliver_policy: Any = None,
        opt_start_seq: int | None = None,
        opt_start_time: _dt.datetime | str | None = None,
        replay_policy: Any = None,
        inactive_threshold: float = 300.0,
        headers_only: bool | None = None,
        name_prefix: str | None = None,
        max_reset_attempts: int | None = None,
    ) -> None:
        if isinstance(filter_subjects, str):
            filter_subjects = [filter_subjects]
        if max_reset_attempts is not None and max_reset_attempts < 1:
            raise ValueError("max_reset_attempts must be at least 1 (None: unlimited)")
        self._js = js
        self.stream_name = stream
        self._filters = list(filter_subjects or [])
        self._deliver_policy = _value(deliver_policy) if deliver_policy is not None else None
        self._opt_start_seq = opt_start_seq
        self._opt_start_time = opt_start_time
        self._replay_policy = _value(replay_policy) if replay_policy is not None else None
        self._inactive_threshold = inactive_threshold
        self._headers_only = headers_only
        self._prefix = name_prefix or js._new_name()
        self._max_reset_attempts = max_reset_attempts
        self._serial = 0
        self._name = f"{self._prefix}_0"
        self._last_sseq = 0  # stream sequence of the last message handed to the user
        self._last_cseq = 0  # consumer sequence of it, within the current instance
        self._last_pending = 0  # its pending count and timestamp (ns), as its reply said
        self._last_ts = 0
        # Set by a reader that wants a reset to start as the first consumer did
        # (a key watcher before its initial values are out: the latest of each
        # key again, not every revision after the last one delivered); that
        # reader then drops what it has already had.
        self._keep_start = False
        self._lock = threading.Lock()
        self._busy = False  # a consume/messages is running
        self._batch: OrderedBatch | None = None
        self._needs_reset = False
        self._engine: Engine | None = None
        self._cached_info: ConsumerInfo | None = None
        self._create()

    def __repr__(self) -> str:
        return f"<OrderedConsumer {self.stream_name!r}/{self.name!r}>"

    # -- server-side consumer -------------------------------------------------

    @property
    def name(self) -> str:
        """Name of the current server-side consumer (changes on every reset)."""
        return self._name

    @property
    def cached_info(self) -> ConsumerInfo | None:
        """The info of the current server-side consumer as last fetched, or None."""
        return self._cached_info

    if not TYPE_CHECKING:  # nats-py's ConsumerInfo attributes, as a Consumer has them

        def __getattr__(self, name: str) -> Any:
            from jsclient.jetstream.consume.consumer import info_attribute

            return info_attribute(self, name)

    def info(self) -> ConsumerInfo:
        """Current info of the server-side consumer."""
        resp = self._js._api_request(f"CONSUMER.INFO.{self.stream_name}.{self.name}")
        self._cached_info = ConsumerInfo.from_response(resp)
        return self._cached_info

    def _caught_up(self) -> bool:
        """Has this consumer nothing more to deliver beyond what was checked here?

        Asked of the server by a reader that waited in vain for the last of
        what was pending when it began: such messages may have gone meanwhile
        (their age limit or TTL ran out) and will never come."""
        try:
            info = self.info()
        except errors.Error:
            return False  # being replaced, or unreachable: not known to be done
        delivered = info.delivered.consumer_seq if info.delivered is not None else 0
        return not info.num_pending and (delivered or 0) <= self._last_cseq

    def _config(self, name: str) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "name": name,
            "ack_policy": "none",
            "max_deliver": -1,
            "inactive_threshold": int(self._inactive_threshold * 1e9),
            "num_replicas": 1,
            "mem_storage": True,
        }
        if self._last_sseq > 0 and not self._keep_start:
            cfg["deliver_policy"] = "by_start_sequence"
            cfg["opt_start_seq"] = self._last_sseq + 1
        else:
            if self._deliver_policy is not None:
                cfg["deliver_policy"] = self._deliver_policy
            if self._opt_start_seq is not None:
                cfg["opt_start_seq"] = self._opt_start_seq
            start = self._opt_start_time
            if start is not None:
                if isinstance(start, _dt.datetime):
                    start = start.astimezone(_dt.UTC).isoformat().replace("+00:00", "Z")
                cfg["opt_start_time"] = start
        if self._replay_policy is not None:
            cfg["replay_policy"] = self._replay_policy
        if self._headers_only:
            cfg["headers_only"] = True
        if len(self._filters) == 1:
            cfg["filter_subject"] = self._filters[0]
        elif self._filters:
            cfg["filter_subjects"] = self._filters
        return cfg

    def _create(self) -> Engine:
        """Create the next server-side consumer; the old one is deleted in the background."""
        with self._lock:
            old = self._engine
            serial = self._serial + 1
            name = f"{self._prefix}_{serial}"
            cfg = self._config(name)
            req = {"stream_name": self.stream_name, "config": cfg, "action": "create"}
            resp = self._js._api_request(f"CONSUMER.CREATE.{self.stream_name}.{name}", req)
            self._cached_info = info = ConsumerInfo.from_response(resp)
            if self._last_sseq == 0 and self._deliver_policy == "new" and info.delivered:
                # Nothing delivered yet from a "new" start: a reset must resume
                # after where this one began, not at the stream's end by then.
                self._last_sseq = info.delivered.stream_seq or 0
            self._serial = serial
            self._name = name
            self._last_cseq = 0
            engine = Engine(self._js, self.stream_name, name, ack_none=True)
            self._engine = engine
            self._needs_reset = False
        if old is not None:
            old.close()
            delete_later(self._js, self.stream_name, old.name)
        return engine

    def _reset(self, wake: Signal | None = None, deadline: float | None = None) -> Engine:
        """Recreate with backoff; raises the last error after ``max_reset_attempts``
        (or when the next attempt would come after ``deadline``, a monotonic time)."""
        delay = _BACKOFF_FIRST
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._create()
            except errors.Error as exc:
                limit = self._max_reset_attempts
                if limit is not None and attempt >= limit:
                    raise
                if deadline is not None and time.monotonic() + delay > deadline:
                    raise
                log.debug("jsclient: ordered consumer reset attempt %d failed: %s", attempt, exc)
            if wake is not None:
                if wake.wait(delay):
                    raise Stopped()
            else:
                time.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX)

    def delete(self) -> None:
        """Delete the current server-side consumer."""
        self._js.delete_consumer(self.stream_name, self.name)

    # -- ordering ------------------------------------------------------------

    def _check(self, msg: Msg) -> bool | None:
        """True: in order (recorded); False: a gap (reset needed); None: an old instance's.

        In order, the message's stream sequence, pending count and timestamp are
        kept (``_last_sseq``, ``_last_pending``, ``_last_ts``) until the next
        message is checked: a reader on the consuming thread needs no second parse.
        """
        try:
            _stream, consumer, _dlv, sseq, cseq, ts, pending, _domain = _parse_jsack(
                msg.reply, self.stream_name, self._name
            )
        except errors.Error:
            return None
        if consumer != self._name:
            return None
        if cseq != self._last_cseq + 1:
            note_gap(self, cseq, sseq)
            return False
        self._last_cseq = cseq
        self._last_sseq = sseq
        self._last_pending = pending
        self._last_ts = ts
        return True

    # -- fetch / next ----------------------------------------------------------

    def _ready_engine(self, deadline: float) -> Engine:
        if self._busy:
            raise OrderedConsumerBusyError()
        batch = self._batch
        if batch is not None and not batch.done:
            batch.abandon()
            self._needs_reset = True
        if self._needs_reset or self._engine is None:
            return self._reset(deadline=deadline)
        return self._engine

    def fetch(
        self, max_messages: int = 100, *, expires: float = 30.0, heartbeat: float | None = None
    ) -> OrderedBatch:
        """Up to ``max_messages`` in order (see ``Consumer.fetch``).

        A pending reset happens first, retried with backoff for at most ``expires``."""
        n = positive_int("max_messages", max_messages)
        hb = fetch_heartbeat(expires, heartbeat)
        return self._start_batch(lambda e: FetchBatch(e, n, 0, expires, hb), expires)

    def fetch_bytes(
        self, max_bytes: int, *, expires: float = 30.0, heartbeat: float | None = None
    ) -> OrderedBatch:
        """One pull of up to ``max_bytes`` bytes of messages, in stream order.

        Like :meth:`fetch`, bounded in bytes instead of messages; the batch ends
        when full or after ``expires`` seconds (a missed ``heartbeat`` ends it early).
        """
        limit = positive_int("max_bytes", max_bytes)
        hb = fetch_heartbeat(expires, heartbeat)
        return self._start_batch(lambda e: FetchBatch(e, 1_000_000, limit, expires, hb), expires)

    def fetch_no_wait(self, max_messages: int = 100) -> OrderedBatch:
        """One pull of what is there now (up to ``max_messages``), in stream order.

        Ends at once when nothing is pending; bounded by the context's timeout.
        """
        n = positive_int("max_messages", max_messages)
        return self._start_batch(lambda e: FetchBatch(e, n, 0, 0.0, 0.0, True), self._js._timeout)

    def _start_batch(self, make: Callable[[Engine], FetchBatch], wait: float) -> OrderedBatch:
        deadline = time.monotonic() + wait
        batch = OrderedBatch(self, make, self._ready_engine(deadline), deadline)
        self._batch = batch
        return batch

    def next(self, timeout: float | None = 30.0) -> Msg:
        """The next message in order, or ``TimeoutError``."""
        while True:
            if timeout is not None and timeout <= 0:
                batch = self.fetch_no_wait(1)
            else:
                batch = self.fetch(1, expires=30.0 if timeout is None else timeout)
            for msg in batch:
                return msg
            if batch.error is not None:
                raise batch.error
            if timeout is not None:
                raise errors.TimeoutError()

    # -- consume / messages ----------------------------------------------------

    def _source_factory(self, opts: PullOptions) -> SourceFactory:
        with self._lock:
            if self._busy:
                raise OrderedConsumerBusyError()
            self._busy = True
        batch = self._batch
        if batch is not None and not batch.done:
            batch.abandon()
            self._needs_reset = True

        def make(q: Inbox, report: Callable[[BaseException], None]) -> Any:
            return OrderedSource(self, opts, q, report)

        return make

    def _release(self) -> None:
        self._busy = False

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
    ) -> ConsumeContext:
        """Like ``Consumer.consume``; resets keep the callback's stream in order."""
        if not callable(callback):
            raise TypeError("callback must be callable")
        opts = continuous_options(
            max_messages, max_bytes, expires, heartbeat, threshold_messages, threshold_bytes
        )
        make = self._source_factory(opts)
        try:
            return ConsumeContext(self._js._client, make, callback, error_cb, self._prefix)
        except BaseException:
            self._release()
            raise

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
    ) -> MessagesContext:
        """Like ``Consumer.messages``; resets keep the iterator in order."""
        opts = continuous_options(
            max_messages,
            max_bytes,
            expires,
            heartbeat,
            threshold_messages,
            threshold_bytes,
            None,
            err_on_missing_heartbeat,
        )
        return self._open_messages(opts, error_cb)

    def _open_messages(self, opts: PullOptions, error_cb: ErrorCallback | None) -> MessagesContext:
        """A ``messages()`` iterator over pulls of ``opts`` (the library's
        readers choose their own, see ``read.reader.bounded_messages``)."""
        make = self._source_factory(opts)
        try:
            return MessagesContext(self._js._client, make, error_cb)
        except BaseException:
            self._release()
            raise

    def stats(self) -> dict[str, Any]:
        """Pull accounting of the current server-side consumer (see ``Consumer.stats``)."""
        engine = self._engine
        if engine is None:
            return Engine.idle_stats()
        return engine.stats()
