"""Continuous pulling for ``consume()`` and ``messages()``: :class:`Feed`, one
session on a dedicated inbox, driven by the consuming thread (see
:mod:`jsclient.jetstream.consume.engine` for the engine it pulls through)."""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from jsclient import _impl, errors
from jsclient._threads import TimerHandle, log
from jsclient.msg import ACK_NONE_POLICY, Msg

if TYPE_CHECKING:
    pass
from jsclient.jetstream.consume.engine import (
    BYTES_MODE_BATCH,
    FLOW_CONTROL,
    HEARTBEAT,
    HEARTBEAT_FACTOR,
    NO_MESSAGES,
    NO_RESPONDERS,
    PIN_HDR,
    PIN_MISMATCH,
    PULL_ENDED,
    REQUEST_TIMEOUT,
    RESET,
    TERMINAL,
    Engine,
    Inbox,
    PullOptions,
    Terminal,
    status_error,
)

_status = _impl.status
_classify = _status.classify
_js_headers = _impl.jsheaders.js_headers
_parse_jsack = _impl.jsack.parse_jsack
_mono = time.monotonic

_PLAIN_HDR = b"NATS/1.0\r\n"

# Control items handed to the consuming thread: (kind, feed).
_RECONNECTED = 1
_HB_MISSED = 2
_CLOSED = 3
_REPULL = 4
#: After a 503 on a pull of a consumer that exists (JetStream not answering
#: yet: a restart, a leader election), the feed pulls again this much later.
NO_RESPONDERS_WAIT = 1.0


def _token(subject: str, prefix: str) -> int:
    """The pull token in a status subject ``<prefix><token>``, or -1."""
    tok = subject[len(prefix) :]
    return int(tok) if subject.startswith(prefix) and tok.isdigit() and tok.isascii() else -1


class Feed:
    """One continuous pull session (consume / messages) on a dedicated inbox.

    ``process(item)`` runs on the consuming thread for every queued item and
    returns the message to hand to the user, or ``None``. It raises
    :class:`Terminal` when the session is over, and ``NoHeartbeatError`` for a
    missed heartbeat when ``err_on_missing_heartbeat`` is set.
    """

    def __init__(
        self,
        engine: Engine,
        opts: PullOptions,
        q: Inbox,
        report: Any,
    ) -> None:
        self.engine = engine
        self.opts = opts
        self.q = q
        self.report = report
        self.counter = _impl.sizes.PendingCounter(
            opts.max_messages, opts.max_bytes, opts.threshold_messages, opts.threshold_bytes
        )
        self.bytes_mode = opts.max_bytes > 0
        self.ack_none = engine.ack_none
        self.last = _mono()
        self.paused = False
        self.stopped = False
        self.hb_queued = False
        self.outage_warned = False
        self.repull_due = False  # a pull after a transient 503 is scheduled
        self.first_token = 0
        self.last_token = 0
        self.open: deque[tuple[int, int]] = deque(maxlen=64)
        self.delivered = 0
        self.reconnects = 0
        self.prefix = ""
        self.sid = 0
        self._sub: Any = None
        self._seen = 0  # messages the inbox had received at the last heartbeat check
        self._timer: TimerHandle | None = None
        # Resets made elsewhere (ADR-60): the consumer sequence of a message
        # sampled at each re-pull and the last one of each heartbeat; one going
        # back means the server-side consumer was reset. The ordered feed
        # checks every message itself and turns this off.
        self.watch_resets = True
        self.last_cseq = 0

    # -- lifecycle (caller's thread) -----------------------------------------

    def start(self) -> None:
        client = self.engine.client
        self.prefix = client.new_inbox() + "."
        self._sub = client._subscribe_batched(self.prefix + "*", self.q)
        self.sid = self._sub.sid
        client._add_listener(self._on_conn)
        self._timer = client._scheduler.call_later(self.opts.heartbeat, self._watch)
        self.engine.feed = self
        try:
            self._maybe_pull()
        except Terminal as t:
            self.stop()
            raise t.error from None
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """No more pulls; the inbox is unsubscribed (in-flight messages are dropped)."""
        if self.stopped:
            return
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
        client = self.engine.client
        client._remove_listener(self._on_conn)
        client._unsubscribe_internal(self.sid)

    # -- callback / timer threads ------------------------------------------------

    def _on_conn(self, event: str) -> None:
        if self.stopped:
            return
        if event == "disconnected":
            self.paused = True  # no pulls until the consuming thread sees _RECONNECTED
        elif event == "reconnected":
            self.last = _mono()
            self.q.put((_RECONNECTED, self))
        elif event == "closed":
            self.q.put((_CLOSED, self))

    def _watch(self) -> None:
        if self.stopped:
            return
        hb = self.opts.heartbeat
        self._touch()
        # Only a caught-up consumer can miss a heartbeat: with items still queued
        # the silence may be ours (a status not yet processed, so no re-pull yet).
        # While disconnected the timer is paused (no re-pulls), except for one
        # warning per outage, so that error_cb learns the consume is stalled.
        if (
            not self.hb_queued
            and not (self.paused and self.outage_warned)
            and self.q.empty()
            and _mono() - self.last > HEARTBEAT_FACTOR * hb
        ):
            self.last = _mono()
            self.outage_warned = self.paused
            self.hb_queued = True
            if not self.opts.err_on_missing_heartbeat:
                self.report(errors.NoHeartbeatError())
            self.q.put((_HB_MISSED, self))
        self._timer = self.engine.client._scheduler.call_later(hb, self._watch)

    # -- consuming thread ----------------------------------------------------

    def process(self, item: Any) -> Msg | None:
        if item.__class__ is Msg:
            msg: Msg = item
            st = self.engine.read(msg)
            if st is not None:
                self._on_status(msg, st[0], st[1], msg._hdr or b"")  # a status has a header
                return None
            self.counter.on_message(msg.size)
            self.delivered += 1
            if not self.paused:
                req = self.counter.next_pull()
                if req is not None:
                    if self.watch_resets:
                        self._sample(msg)
                    self._pull(req[0], req[1])
            return msg
        return self._on_control(item[0])

    def process_batch(self, batch: list[Msg], out: list[Msg]) -> None:
        """``process`` for each message of a batch the reader routed, in order,
        appending the messages for the user to ``out``; plain messages (no
        status line, no pin id) take a short path in this one loop. Stops
        early when a status stopped this feed (the rest is moot)."""
        counter = self.counter
        on_message = counter.on_message
        next_pull = counter.next_pull
        ack_none = self.ack_none
        append = out.append
        delivered = 0
        try:
            for msg in batch:
                hdr = msg._hdr
                # A status has "NATS/1.0 <code>" as its first line; plain headers
                # (a headers-only consumer's) "NATS/1.0" alone. (find, not `in`:
                # bytes `in` first tries the operand as an integer, raising and
                # clearing a TypeError each time.)
                if hdr is None or (hdr.startswith(_PLAIN_HDR) and hdr.find(PIN_HDR) < 0):
                    if ack_none:
                        msg._ackd = ACK_NONE_POLICY
                    on_message(msg.size)
                    delivered += 1
                    if not self.paused:
                        req = next_pull()
                        if req is not None:
                            if self.watch_resets:
                                self._sample(msg)
                            self._pull(req[0], req[1])
                    append(msg)
                    continue
                m = self.process(msg)
                if m is None:
                    if self.stopped:
                        return
                    continue
                # The body ends with a plain statement: one ending with an if
                # is an interrupt past the finally on 3.13+
                # (tests/unit/test_interrupt_cover.py).
                append(m)
        finally:
            self.delivered += delivered

    def _on_control(self, kind: int) -> Msg | None:
        if self.stopped:
            return None
        if kind == _CLOSED:
            raise Terminal(errors.ConnectionClosedError(), report=False)
        if kind == _RECONNECTED:
            self.reconnects += 1
            self.paused = False
            self.outage_warned = False
            self.last = _mono()
            self._restart()
        elif kind == _REPULL:
            self.repull_due = False
            if not self.paused:
                self._restart()
        elif kind == _HB_MISSED:
            self.hb_queued = False
            if not self.paused:
                self.on_missed_heartbeat()
            elif self.opts.err_on_missing_heartbeat:
                raise errors.NoHeartbeatError()
        return None

    def on_missed_heartbeat(self) -> None:
        """Re-pull from scratch; raise for messages() if asked to."""
        self._restart()
        if self.opts.err_on_missing_heartbeat:
            raise errors.NoHeartbeatError()

    def _touch(self) -> None:
        """Note the time if the inbox received anything since the last look
        (the reader counts what it routes; it runs no code of ours per message)."""
        received = self._sub._received
        if received != self._seen:
            self._seen = received
            self.last = _mono()

    def _restart(self) -> None:
        """Forget every open pull (they are gone) and pull afresh."""
        self.counter.reset()
        self.open.clear()
        self.first_token = self.last_token + 1
        self._maybe_pull()

    def _on_status(self, msg: Msg, code: int, description: str, hdr: bytes) -> None:
        kind = _classify(code, description)
        if kind in (HEARTBEAT, FLOW_CONTROL):
            if kind == HEARTBEAT and self.watch_resets:
                self._seen_cseq(_js_headers(hdr)[2])
            return
        # Statuses of pulls made before the last restart carry stale pending counts.
        fresh = _token(msg.subject, self.prefix) >= self.first_token
        if kind in (NO_MESSAGES, REQUEST_TIMEOUT, PULL_ENDED):
            if fresh:
                pm, pb = _js_headers(hdr)[:2]
                self.counter.on_status(pm, pb)
        elif kind == RESET:
            if code == PIN_MISMATCH:
                self.engine.pin_id = None  # pull on as an unpinned client (ADR-42)
            self.report(status_error(code, description, kind))
            if fresh:
                self.counter.reset()
                self.open.clear()
                self.first_token = self.last_token + 1
        elif kind == NO_RESPONDERS:
            if fresh and not self.repull_due:
                self.on_no_responders()
            return  # (the pull is gone: nothing to count)
        else:
            self.on_status_error(kind, status_error(code, description, kind))
            if fresh:
                pm, pb = _js_headers(hdr)[:2]
                self.counter.on_status(pm, pb)
        self._maybe_pull()

    def on_no_responders(self) -> None:
        """Nothing answered a pull: the consumer does not exist (asked of the
        server: ConsumerNotFoundError ends the session, to ``consume``'s error
        callback or out of ``messages().next``), or JetStream is not answering
        yet: then the open pulls are forgotten and pulled afresh a moment later."""
        missing = self.engine.missing()
        if missing is not None:
            raise Terminal(missing)
        self.report(errors.NoRespondersError())
        self.repull_due = True
        self.engine.client._scheduler.call_later(NO_RESPONDERS_WAIT, self.q.put, (_REPULL, self))

    def _sample(self, msg: Msg) -> None:
        """Check one message's consumer sequence (once per re-pull: not on
        every message, which would cost the hot path a parse)."""
        engine = self.engine
        try:
            cseq = _parse_jsack(msg.reply, engine.stream, engine.name)[4]
        except errors.Error:
            return
        self._seen_cseq(cseq)

    def _seen_cseq(self, cseq: int) -> None:
        """A consumer sequence the server sent (a heartbeat's: the last it
        delivered). Going back comes from a reset this client did not make,
        or from a server restart that restored the consumer's state from
        before its last deliveries (a kill -9): one WARNING; the session goes
        on with what the server sends."""
        if cseq < 0:
            return
        last = self.last_cseq
        self.last_cseq = cseq
        if cseq < last:
            engine = self.engine
            log.warning(
                "jsclient: consumer %s on stream %s was reset elsewhere or restored "
                "by a server restart (consumer sequence %d after %d); going on with "
                "what the server delivers from there (redelivered or skipped)",
                engine.name,
                engine.stream,
                cseq,
                last,
            )

    def on_status_error(self, kind: int, error: errors.Error) -> None:
        """Terminal statuses end the session; warnings go to the error callback."""
        if kind == TERMINAL:
            raise Terminal(error)
        self.report(error)

    def _maybe_pull(self) -> None:
        if self.paused or self.stopped:
            return
        req = self.counter.next_pull()
        if req is not None:
            self._pull(req[0], req[1])

    def _pull(self, batch: int, max_bytes: int) -> None:
        if self.stopped:
            return
        if self.bytes_mode:
            if max_bytes <= 0:
                return
            batch = BYTES_MODE_BATCH
        elif batch <= 0:
            return
        else:
            max_bytes = self.opts.pull_bytes  # 0, or a reader's bound (PullOptions)
        token = next(self.engine.tokens)
        self.last_token = token
        self.open.append((batch, max_bytes))
        opts = self.opts
        try:
            self.engine.publish_pull(
                self.prefix + str(token),
                batch,
                max_bytes,
                opts.expires,
                opts.heartbeat,
                False,
                opts.prio,
            )
        except errors.ConnectionClosedError:
            raise Terminal(errors.ConnectionClosedError(), report=False)
        except errors.Error as exc:
            self.report(exc)

    # -- any thread ----------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        if self._sub is not None:
            self._touch()
        counter = self.counter
        pending = counter.bytes if self.bytes_mode else counter.msgs
        # Estimate: the server serves pulls roughly in order, so the newest pulls
        # whose sizes add up to what is still pending are the open ones.
        outstanding = 0
        covered = 0
        for batch, max_bytes in reversed(list(self.open)):
            if covered >= pending:
                break
            covered += max_bytes if self.bytes_mode else batch
            outstanding += 1
        return {
            "pending_messages": counter.msgs,
            "pending_bytes": counter.bytes,
            "pulls_outstanding": 0 if self.stopped else outstanding,
            "last_heartbeat_age": _mono() - self.last,
            "reconnects": self.reconnects,
            "delivered": self.delivered,
        }
