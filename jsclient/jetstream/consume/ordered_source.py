"""The ordered consumer's readers: :class:`OrderedBatch` (``fetch``/``next``) and
:class:`OrderedSource` (``consume``/``messages``), which check each message's
consumer sequence and ask :class:`~jsclient.jetstream.consume.ordered.OrderedConsumer`
for a reset on a gap, a lost consumer or a missed heartbeat.

A batch resets in the caller's thread (on the next fetch); a source resets on a
helper thread (``jsclient-ordered-reset-<prefix>``) while its dispatcher or
iterator keeps waiting on the same queue.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from jsclient import _impl, errors
from jsclient._threads import Signal, log
from jsclient.jetstream.consume.engine import (
    NO_RESPONDERS,
    TERMINAL,
    Engine,
    Inbox,
    PullOptions,
    Terminal,
)
from jsclient.jetstream.consume.feed import Feed
from jsclient.jetstream.consume.fetch import FetchBatch
from jsclient.msg import Msg

__all__ = ["OrderedBatch", "OrderedConsumerState", "OrderedSource", "Stopped", "note_gap"]

_parse_jsack = _impl.jsack.parse_jsack
_RESET_FAILED = 10


class OrderedConsumerState(Protocol):
    """What the readers use of their ``OrderedConsumer`` (typed here so that this
    module does not import that one, which imports it)."""

    stream_name: str
    _name: str
    _prefix: str
    _engine: Engine | None
    _needs_reset: bool
    _last_cseq: int
    _last_sseq: int
    _last_pending: int
    _last_ts: int

    def _check(self, msg: Msg) -> bool | None: ...
    def _reset(self, wake: Signal | None = None, deadline: float | None = None) -> Engine: ...
    def _release(self) -> None: ...


def note_gap(oc: OrderedConsumerState, cseq: int, sseq: int) -> None:
    """Log why an ordered consumer is about to be recreated. A consumer sequence
    at or below the last one seen can only come from a reset of the server-side
    consumer that this client did not make (ADR-60: ``$JS.API.CONSUMER.RESET``,
    e.g. ``nats consumer reset`` from another process): one WARNING naming the
    stream, consumer and sequences. A forward jump (a message lost on the way)
    stays a DEBUG line, as it has always been handled quietly."""
    last = oc._last_cseq
    if 0 < cseq <= last:
        log.warning(
            "jsclient: ordered consumer %s on stream %s was reset elsewhere or restored "
            "by a server restart (consumer "
            "sequence %d after %d, stream sequence %d after %d); recreating it after "
            "stream sequence %d",
            oc._name,
            oc.stream_name,
            cseq,
            last,
            sseq,
            oc._last_sseq,
            oc._last_sseq,
        )
    else:
        log.debug(
            "jsclient: ordered consumer %s on stream %s: gap (consumer sequence %d after %d)",
            oc._name,
            oc.stream_name,
            cseq,
            last,
        )


class Stopped(Exception):
    """A reset's backoff wait ended by a stop."""


class OrderedBatch:
    """A fetch batch that checks order; a gap ends it early (the next fetch resets)."""

    def __init__(
        self,
        oc: OrderedConsumerState,
        make: Callable[[Engine], FetchBatch],
        engine: Engine,
        deadline: float,
    ) -> None:
        self._oc = oc
        self._make = make
        self._deadline = deadline
        self._inner = make(engine)
        self._yielded = 0
        self._retried = False
        self._done = False
        self._error: BaseException | None = None

    @property
    def error(self) -> BaseException | None:
        """Why the batch ended short (see ``FetchBatch.error``)."""
        return self._error or self._inner.error

    @property
    def done(self) -> bool:
        """True when nothing of this batch is left unread."""
        return self._done or self._inner.drained()

    def abandon(self) -> None:
        self._done = True

    def __iter__(self) -> OrderedBatch:
        return self

    def __next__(self) -> Msg:
        oc = self._oc
        while not self._done:
            try:
                msg = next(self._inner)
            except (StopIteration, errors.ConsumerNotFoundError, errors.ConsumerDeletedError):
                err = self._inner.error
                if isinstance(err, errors.ConsumerDeletedError | errors.NoRespondersError):
                    # The consumer went away (deleted, inactive, server restarted).
                    oc._needs_reset = True
                    if not self._retried and self._yielded == 0:
                        self._retried = True
                        try:
                            self._inner = self._make(oc._reset(deadline=self._deadline))
                        except errors.Error as exc:
                            self._error = exc
                            self._done = True
                            break
                        continue
                elif isinstance(err, errors.NoHeartbeatError):
                    oc._needs_reset = True
                self._done = True
                break
            verdict = oc._check(msg)
            if verdict:
                self._yielded += 1
                return msg
            if verdict is False:
                oc._needs_reset = True
                self._done = True
        raise StopIteration


class _OrderedFeed(Feed):
    """A Feed whose lost consumer or missed heartbeat asks its source for a reset."""

    def __init__(self, source: OrderedSource, engine: Engine, opts: PullOptions) -> None:
        super().__init__(engine, opts, source.q, source.report)
        self.source = source
        self.watch_resets = False  # the source checks every message

    def on_no_responders(self) -> None:
        self.source.reset()  # its consumer is gone: make a new one (no server query)

    def on_status_error(self, kind: int, error: errors.Error) -> None:
        if isinstance(error, errors.ConsumerDeletedError) or kind == NO_RESPONDERS:
            self.source.reset()
        elif kind == TERMINAL:
            raise Terminal(error)
        else:
            self.report(error)

    def on_missed_heartbeat(self) -> None:
        self.source.reset()
        if self.opts.err_on_missing_heartbeat:
            raise errors.NoHeartbeatError()


class OrderedSource:
    """The consume/messages source of an ordered consumer: one feed at a time, resets."""

    def __init__(
        self,
        oc: OrderedConsumerState,
        opts: PullOptions,
        q: Inbox,
        report: Callable[[BaseException], None],
    ) -> None:
        self.oc = oc
        self.opts = opts
        self.q = q
        self.report = report
        self.feed: _OrderedFeed | None = None
        self.stopped = False
        self.resetting = False
        self._in_batch = False  # in process_batch: a reset waits for its end
        self._reset_due = False
        self._wake = Signal()

    def start(self) -> None:
        oc = self.oc
        engine = oc._engine
        if oc._needs_reset or engine is None:
            self.reset()  # on the helper thread: with backoff, never blocking the caller
            return
        try:
            self._start_feed(engine)
        except BaseException:
            self.stop()
            raise

    def _start_feed(self, engine: Engine) -> None:
        feed = _OrderedFeed(self, engine, self.opts)
        self.feed = feed
        feed.start()
        if self.stopped:
            feed.stop()

    def process(self, item: Any) -> Msg | None:
        feed = self.feed
        if item.__class__ is Msg:
            if feed is None or item.sid != feed.sid:
                return None  # from a replaced consumer
            msg = feed.process(item)
            if msg is None:
                return None
            verdict = self.oc._check(msg)
            if verdict:
                return msg
            if verdict is False:
                self.reset()
            return None
        kind, origin = item
        if kind == _RESET_FAILED:
            raise Terminal(origin)
        if feed is None or origin is not feed:
            return None
        return feed.process(item)

    def process_batch(self, batch: list[Msg], out: list[tuple[Msg, int, int, int]]) -> None:
        """``process`` for every message of a batch the reader routed, in order:
        each one delivered in order is appended to ``out`` as ``(message, stream
        sequence, pending, timestamp ns)``. One loop instead of a call chain per
        message, for library readers that take whole batches (KV scans and
        watchers). A gap stops it (the rest is the old consumer's) and resets;
        a :class:`Terminal` propagates with ``out`` holding what came before."""
        feed = self.feed
        if feed is None or not batch or batch[0].sid != feed.sid:
            return  # a batch is one inbox's: this one a replaced consumer's
        ready: list[Msg] = []
        # A lost consumer's status in the batch asks for a reset while what came
        # before it sits in ``ready``, not yet recorded: the reset waits for the
        # check, or it would make the new consumer start before those messages
        # and they would come twice.
        self._in_batch = True
        try:
            feed.process_batch(batch, ready)
        finally:
            self._in_batch = False
            self._check_batch(ready, out)
            if self._reset_due:
                self._reset_due = False
                self.reset()

    def _check_batch(self, ready: list[Msg], out: list[tuple[Msg, int, int, int]]) -> None:
        oc = self.oc
        name = oc._name
        stream = oc.stream_name
        last = oc._last_cseq
        append = out.append
        parse = _parse_jsack
        gap = False
        for m in ready:
            try:
                _s, consumer, _dlv, sseq, cseq, ts, pending, _dom = parse(m.reply, stream, name)
            except errors.Error:
                continue
            if consumer != name:
                continue
            if cseq != last + 1:
                oc._last_cseq = last
                if out:
                    _m, oc._last_sseq, oc._last_pending, oc._last_ts = out[-1]
                note_gap(oc, cseq, sseq)
                gap = True
                break
            last = cseq
            append((m, sseq, pending, ts))
        # What was delivered is recorded before any reset reads it.
        if last != oc._last_cseq:
            oc._last_cseq = last
            _m, oc._last_sseq, oc._last_pending, oc._last_ts = out[-1]
        if gap:
            self.reset()

    def reset(self) -> None:
        """Replace the server-side consumer on a helper thread (consuming thread only)."""
        if self._in_batch:
            self._reset_due = True  # after the batch's messages are recorded
            return
        if self.resetting or self.stopped:
            return
        self.resetting = True
        feed = self.feed
        self.feed = None
        if feed is not None:
            feed.stop()
        threading.Thread(
            target=self._reset_run, name=f"jsclient-ordered-reset-{self.oc._prefix}", daemon=True
        ).start()

    def _reset_run(self) -> None:
        try:
            engine = self.oc._reset(self._wake)
            if not self.stopped:
                self._start_feed(engine)
        except Stopped:
            pass
        except BaseException as exc:
            self.q.put((_RESET_FAILED, exc))
        finally:
            self.resetting = False

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self._wake.set()
        feed = self.feed
        if feed is not None:
            feed.stop()
        self.oc._release()
