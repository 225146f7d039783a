"""The one pull engine (ADR-37, ADR-13): tagged pulls, pending accounting, statuses, heartbeats.

Every pull request is published to ``<prefix>.CONSUMER.MSG.NEXT.<stream>.<consumer>``
with its own reply subject ``<inbox>.<token>`` on a wildcard inbox subscription
(``<inbox>.*``). User messages arrive with the stream's subject (routed to the
subscription by sid), but status messages (an ``HMSG`` with an empty payload and
a ``NATS/1.0 <code>`` line) come on the pull's reply subject, so the token tells
which pull a status ends: a status of an earlier pull can never end or skew a
later one.

Two kinds of session share this machinery:

- ``FetchBatch`` (in :mod:`jsclient.jetstream.pull`; ``fetch``, ``fetch_bytes``,
  ``fetch_no_wait``, ``next``): one pull. Its small state machine runs on the
  reader thread (count, compare, queue put); the caller iterates the messages
  off a ``SimpleQueue``. Fetches borrow an idle inbox from the consumer's pool,
  so a steady stream of fetches costs no SUB/UNSUB, and concurrent fetches on
  one consumer instance each get an inbox of their own (user messages carry no
  token, so a shared inbox could not keep them apart).
- :class:`Feed` (``consume``, ``messages``): continuous pulling on a dedicated
  inbox. The reader thread only stamps the time and queues each message; the
  consuming thread (the consume dispatcher, or the caller of ``messages().next``)
  does the ADR-37 pending accounting, status handling and re-pulls. All counter
  changes thus happen on one thread and need no lock, and the buffer stays
  bounded by ``max_messages``/``max_bytes`` because pending falls only as the
  consumer takes messages. The heartbeat watchdog (on the connection's timer
  thread) and the reconnect listener (on its callback thread) talk to that
  thread through the same queue.
"""

from __future__ import annotations

import itertools
import json
import queue
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jsclient import _impl, errors
from jsclient._threads import TimerHandle
from jsclient.msg import ACK_NONE_POLICY, Msg

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.jetstream._ctx import Context

_status = _impl.status
_status_of = _status.status_of
_classify = _status.classify
_js_headers = _status.js_headers
_mono = time.monotonic

HEARTBEAT = _status.HEARTBEAT
FLOW_CONTROL = _status.FLOW_CONTROL
NO_MESSAGES = _status.NO_MESSAGES
REQUEST_TIMEOUT = _status.REQUEST_TIMEOUT
PULL_ENDED = _status.PULL_ENDED
WARNING = _status.WARNING
RESET = _status.RESET
TERMINAL = _status.TERMINAL
NO_RESPONDERS = _status.NO_RESPONDERS

#: Batch size of a pull limited by bytes only (ADR-37: "a large number").
BYTES_MODE_BATCH = 1_000_000
#: How long blocking waits sleep before they look at closed/stopped flags again.
WAIT_SLICE = 1.0
#: Core-side guard beyond a pull's server-side expiry (ADR-37: always larger).
EXPIRY_GUARD = 1.0
#: A missed heartbeat is declared after this many intervals without a message.
HEARTBEAT_FACTOR = 2.0
PIN_HDR = b"Nats-Pin-Id"

# Control items handed to the consuming thread: (kind, feed).
_RECONNECTED = 1
_HB_MISSED = 2
_CLOSED = 3
#: Queued by stop()/drain() to wake the consuming thread.
STOP = object()


class Terminal(Exception):
    """Raised out of :meth:`Feed.process`: the continuous pull is over with ``error``."""

    def __init__(self, error: BaseException, report: bool = True) -> None:
        super().__init__(str(error))
        self.error = error
        self.report = report


def status_error(code: int, description: str, kind: int) -> errors.Error:
    """The typed error for a status that must be telegraphed."""
    if kind == TERMINAL:
        if code == 400:
            return errors.BadPullRequestError(code, description)
        if description.lower() == "consumer deleted":
            return errors.ConsumerDeletedError(code, description)
        return errors.ConsumerIsPushBasedError(code, description)
    if kind == NO_RESPONDERS:
        return errors.NoRespondersError()
    return errors.StatusError(code, description)


def ack_none(info: Any) -> bool:
    """Whether a consumer (its ConsumerInfo) has ack policy none."""
    policy = getattr(getattr(info, "config", None), "ack_policy", None)
    return str(getattr(policy, "value", policy)) == "none"


def pull_status(engine: Engine, code: int, description: str) -> tuple[int, errors.Error | None]:
    """What a status on a pull's own reply subject means for that one pull.

    Shared by ``fetch`` (ADR-37) and ``pull_subscribe().fetch`` (ADR-13), so both
    read statuses from one table. Returns ``(kind, error)``: for HEARTBEAT and
    FLOW_CONTROL the pull goes on; NO_MESSAGES, REQUEST_TIMEOUT and PULL_ENDED
    end it normally (``error`` None); any other kind ends it with ``error``
    (for RESET a StatusError, and a 423 makes the engine forget its pin id).
    """
    kind = _classify(code, description)
    if kind in _PULL_GOES_ON or kind in _PULL_ENDS_NORMALLY:
        return kind, None
    if kind == RESET and code == 423:
        engine.pin_id = None
    return kind, status_error(code, description, kind)


_PULL_GOES_ON = frozenset((HEARTBEAT, FLOW_CONTROL))
_PULL_ENDS_NORMALLY = frozenset((NO_MESSAGES, REQUEST_TIMEOUT, PULL_ENDED))


def _token(subject: str, prefix: str) -> int:
    """The pull token in a status subject ``<prefix><token>``, or -1."""
    tok = subject[len(prefix) :]
    return int(tok) if subject.startswith(prefix) and tok.isdigit() and tok.isascii() else -1


@dataclass(frozen=True, slots=True)
class PullOptions:
    """Validated settings of a continuous pull (consume / messages)."""

    max_messages: int
    max_bytes: int
    expires: float
    heartbeat: float
    threshold_messages: int
    threshold_bytes: int
    group: str | None = None
    err_on_missing_heartbeat: bool = False


def positive_int(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def continuous_options(
    max_messages: int | None,
    max_bytes: int | None,
    expires: float,
    heartbeat: float | None,
    threshold_messages: int | None,
    threshold_bytes: int | None,
    group: str | None = None,
    err_on_missing_heartbeat: bool = False,
) -> PullOptions:
    """ADR-37 defaults and checks for consume/messages (500 msgs, 30 s, hb expires/2 <= 30 s)."""
    if max_messages is not None and max_bytes is not None:
        raise ValueError("max_messages and max_bytes are exclusive: set one of them")
    if expires < 1.0:
        raise ValueError(f"expires must be at least 1 s, got {expires!r}")
    if heartbeat is None:
        heartbeat = min(expires / 2, 30.0)
    elif not 0.5 <= heartbeat <= 30.0:
        raise ValueError(f"heartbeat must be between 0.5 s and 30 s, got {heartbeat!r}")
    elif heartbeat > expires / 2:
        raise ValueError(f"heartbeat {heartbeat!r} s must be at most half of expires {expires!r} s")
    if max_bytes is not None:
        mb = positive_int("max_bytes", max_bytes)
        if threshold_messages is not None:
            raise ValueError("threshold_messages applies to max_messages, not max_bytes")
        tb = mb // 2 if threshold_bytes is None else threshold_bytes
        if not isinstance(tb, int) or not 0 <= tb <= mb:
            raise ValueError(f"threshold_bytes must be an int in [0, max_bytes], got {tb!r}")
        return PullOptions(
            BYTES_MODE_BATCH, mb, expires, heartbeat, 0, tb, group, err_on_missing_heartbeat
        )
    mm = 500 if max_messages is None else positive_int("max_messages", max_messages)
    if threshold_bytes is not None:
        raise ValueError("threshold_bytes applies to max_bytes, not max_messages")
    tm = mm // 2 if threshold_messages is None else threshold_messages
    if not isinstance(tm, int) or not 0 <= tm <= mm:
        raise ValueError(f"threshold_messages must be an int in [0, max_messages], got {tm!r}")
    return PullOptions(mm, 0, expires, heartbeat, tm, 0, group, err_on_missing_heartbeat)


def fetch_heartbeat(expires: float, heartbeat: float | None) -> float:
    """Fetch heartbeat: 5 s by default when ``expires >= 10`` s; at most ``expires / 2``."""
    if expires <= 0:
        raise ValueError(f"expires must be positive, got {expires!r}")
    if heartbeat is None:
        return 5.0 if expires >= 10.0 else 0.0
    if heartbeat < 0:
        raise ValueError(f"heartbeat must not be negative, got {heartbeat!r}")
    if heartbeat > expires / 2:
        raise ValueError(f"heartbeat {heartbeat!r} s must be at most half of expires {expires!r} s")
    return float(heartbeat)


class _Inbox:
    """An idle-able wildcard inbox subscription, lent to one fetch at a time."""

    __slots__ = ("__weakref__", "prefix", "sid", "target")

    def __init__(self, client: Core) -> None:
        self.prefix = client.new_inbox() + "."
        self.target: Any = None
        self.sid = client._subscribe_internal(self.prefix + "*", self._route)

    def _route(self, msg: Msg) -> None:  # reader thread
        target = self.target
        if target is not None:
            target(msg)


def _release_sids(client: Core, sids: list[int]) -> None:
    for sid in sids:
        client._unsubscribe_internal(sid)
    sids.clear()


class Engine:
    """Pulls for one server-side consumer: pull publishing, the fetch inbox pool, pin id."""

    def __init__(self, js: Context, stream: str, name: str, ack_none: bool) -> None:
        self.js = js
        self.client = js._client
        self.stream = stream
        self.name = name
        self.ack_none = ack_none
        self.next_subject = f"{js._prefix}.CONSUMER.MSG.NEXT.{stream}.{name}".encode()
        #: Nats-Pin-Id of the last message of a pinned priority group (sent as "id").
        self.pin_id: str | None = None
        self.tokens = itertools.count(1)
        self.free: list[_Inbox] = []
        self._sids: list[int] = []
        self.fetch_delivered = 0
        self.fetches_open = 0
        self.feed: Feed | None = None
        self._finalizer = weakref.finalize(self, _release_sids, self.client, self._sids)

    def close(self) -> None:
        """Unsubscribe every inbox of this engine (also done when it is collected).

        A fetch still running on one then ends at its guard."""
        self._finalizer()

    def take_inbox(self) -> _Inbox:
        try:
            return self.free.pop()
        except IndexError:
            inbox = _Inbox(self.client)
            self._sids.append(inbox.sid)
            return inbox

    def publish_pull(
        self,
        reply: str,
        batch: int,
        max_bytes: int,
        expires: float,
        heartbeat: float,
        no_wait: bool = False,
        group: str | None = None,
    ) -> None:
        """Publish one ``CONSUMER.MSG.NEXT`` request (times in seconds, sent in ns)."""
        req: dict[str, Any] = {"batch": batch}
        if no_wait:
            req["no_wait"] = True
        else:
            req["expires"] = int(expires * 1e9)
        if max_bytes > 0:
            req["max_bytes"] = max_bytes
        if heartbeat > 0:
            req["idle_heartbeat"] = int(heartbeat * 1e9)
        if group is not None:
            req["group"] = group
        pin = self.pin_id
        if pin:
            req["id"] = pin
        body = json.dumps(req, separators=(",", ":")).encode()
        data = b"PUB %s %s %d\r\n%s\r\n" % (self.next_subject, reply.encode(), len(body), body)
        self.client._publish_raw(data, len(body))

    def read(self, msg: Msg) -> tuple[int, str] | None:
        """The one reading of what arrives on a pull's inbox, for every pull loop
        (fetch, legacy fetch, consume and messages): a status line ``(code,
        description)`` for the loop to act on, or None for a message, made
        ready for the user here (its pin id remembered, AckNone marked)."""
        hdr = msg._hdr
        if hdr is not None:
            if not msg.data:
                st: tuple[int, str] | None = _status_of(hdr)
                if st is not None:
                    return st
            if PIN_HDR in hdr:
                self.remember_pin(hdr)
        if self.ack_none:
            msg._ackd = ACK_NONE_POLICY
        return None

    def remember_pin(self, hdr: bytes) -> None:
        pin = _status.header_value(hdr, "Nats-Pin-Id")
        if pin:
            self.pin_id = pin

    def stats(self) -> dict[str, Any]:
        feed = self.feed
        if feed is not None:
            return feed.stats()
        return self.idle_stats(self.fetches_open, self.fetch_delivered)

    @staticmethod
    def idle_stats(pulls: int = 0, delivered: int = 0) -> dict[str, Any]:
        """Stats when no consume/messages has run: fetches only."""
        return {
            "pending_messages": 0,
            "pending_bytes": 0,
            "pulls_outstanding": pulls,
            "last_heartbeat_age": None,
            "reconnects": 0,
            "delivered": delivered,
        }


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
        q: queue.SimpleQueue[Any],
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
        self.first_token = 0
        self.last_token = 0
        self.open: deque[tuple[int, int]] = deque(maxlen=64)
        self.delivered = 0
        self.reconnects = 0
        self.prefix = ""
        self.sid = 0
        self._timer: TimerHandle | None = None

    # -- lifecycle (caller's thread) -----------------------------------------

    def start(self) -> None:
        client = self.engine.client
        self.prefix = client.new_inbox() + "."
        self.sid = client._subscribe_internal(self.prefix + "*", self._on_msg)
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

    # -- reader thread -----------------------------------------------------

    def _on_msg(self, msg: Msg) -> None:
        self.last = _mono()
        self.q.put(msg)

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
                    self._pull(req[0], req[1])
            return msg
        return self._on_control(item[0])

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

    def _restart(self) -> None:
        """Forget every open pull (they are gone) and pull afresh."""
        self.counter.reset()
        self.open.clear()
        self.first_token = self.last_token + 1
        self._maybe_pull()

    def _on_status(self, msg: Msg, code: int, description: str, hdr: bytes) -> None:
        kind = _classify(code, description)
        if kind in (HEARTBEAT, FLOW_CONTROL):
            return
        # Statuses of pulls made before the last restart carry stale pending counts.
        fresh = _token(msg.subject, self.prefix) >= self.first_token
        if kind in (NO_MESSAGES, REQUEST_TIMEOUT, PULL_ENDED):
            if fresh:
                pm, pb = _js_headers(hdr)[:2]
                self.counter.on_status(pm, pb)
        elif kind == RESET:
            if code == 423:
                self.engine.pin_id = None
            self.report(errors.StatusError(code, description))
            if fresh:
                self.counter.reset()
                self.open.clear()
                self.first_token = self.last_token + 1
        else:
            self.on_status_error(kind, status_error(code, description, kind))
            if fresh:
                pm, pb = _js_headers(hdr)[:2]
                self.counter.on_status(pm, pb)
        self._maybe_pull()

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
                opts.group,
            )
        except errors.ConnectionClosedError:
            raise Terminal(errors.ConnectionClosedError(), report=False)
        except errors.Error as exc:
            self.report(exc)

    # -- any thread ----------------------------------------------------------

    def stats(self) -> dict[str, Any]:
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
