"""The one pull engine (ADR-37, ADR-13): tagged pulls, pending accounting, statuses, heartbeats.

Every pull request is published to ``<prefix>.CONSUMER.MSG.NEXT.<stream>.<consumer>``
with its own reply subject ``<inbox>.<token>`` on a wildcard inbox subscription
(``<inbox>.*``). User messages arrive with the stream's subject (routed to the
subscription by sid), but status messages (an ``HMSG`` with an empty payload and
a ``NATS/1.0 <code>`` line) come on the pull's reply subject, so the token tells
which pull a status ends: a status of an earlier pull can never end or skew a
later one.

Two kinds of session share this machinery:

- ``FetchBatch`` (in :mod:`jsclient.jetstream.consume.fetch`; ``fetch``, ``fetch_bytes``,
  ``fetch_no_wait``, ``next``): one pull. Its small state machine runs on the
  reader thread (count, compare, queue put); the caller iterates the messages
  off a ``SimpleQueue``. Fetches borrow an idle inbox from the consumer's pool,
  so a steady stream of fetches costs no SUB/UNSUB, and concurrent fetches on
  one consumer instance each get an inbox of their own (user messages carry no
  token, so a shared inbox could not keep them apart).
- ``Feed`` (in :mod:`jsclient.jetstream.consume.feed`; ``consume``, ``messages``):
  continuous pulling on a dedicated inbox. The reader thread runs no code of
  its own per message: it queues what it routed from one read as one batch (see
  :class:`Inbox`); the consuming thread (the consume dispatcher, or the caller
  of ``messages().next``) does the ADR-37 pending accounting, status handling
  and re-pulls. All counter changes thus happen on one thread and need no lock, and
  the buffer stays bounded by ``max_messages``/``max_bytes`` because pending falls
  only as the consumer takes messages. The heartbeat watchdog (on the connection's
  timer thread) and the reconnect listener (on its callback thread) talk to that
  thread through the same queue.
"""

from __future__ import annotations

import json
import queue
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jsclient import _impl, errors
from jsclient.msg import ACK_NONE_POLICY, Msg

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.consume.priority import Priority

_status = _impl.status
_status_of = _status.status_of
_classify = _status.classify

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
#: 423: the pull's pin id is not the pinned client's (ADR-42).
PIN_MISMATCH = 423

#: Queued by stop()/drain() to wake the consuming thread.
STOP = object()


class Inbox(queue.SimpleQueue[Any]):
    """What a continuous pull hands its consuming thread: batches of messages
    as the reader routed them (``(messages, payload bytes)``, one put per read),
    control items, and :data:`STOP`.

    The consuming thread moves a batch into ``local`` and takes the messages
    from there one by one (``held``: what an interrupted wait took, see
    :func:`~jsclient._handoff.next_item`), so ``empty()`` is true only when
    nothing at all is waiting (the heartbeat watchdog asks it).
    """

    def __init__(self) -> None:
        super().__init__()
        self.local: deque[Any] = deque()
        self.held: deque[Any] = deque()

    def empty(self) -> bool:
        return not self.local and not self.held and super().empty()

    def clear_taken(self) -> None:
        """Forget what was taken and not handed out (the iterator closed)."""
        self.local.clear()
        self.held.clear()


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
    if code == PIN_MISMATCH:
        return errors.PinIdMismatchError(code, description)
    return errors.StatusError(code, description)


def _not_found(description: str, cause: BaseException) -> errors.ConsumerNotFoundError:
    err = errors.ConsumerNotFoundError(code=404, description=description, err_code=10014)
    err.__cause__ = cause
    return err


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
    (for RESET a StatusError; a 423 is a PinIdMismatchError and makes the engine
    forget its pin id, so that the next pull is an unpinned client's).
    """
    kind = _classify(code, description)
    if kind in _PULL_GOES_ON or kind in _PULL_ENDS_NORMALLY:
        return kind, None
    if code == PIN_MISMATCH:
        engine.pin_id = None
    return kind, status_error(code, description, kind)


_PULL_GOES_ON = frozenset((HEARTBEAT, FLOW_CONTROL))
_PULL_ENDS_NORMALLY = frozenset((NO_MESSAGES, REQUEST_TIMEOUT, PULL_ENDED))


@dataclass(frozen=True, slots=True)
class PullOptions:
    """Validated settings of a continuous pull (consume / messages)."""

    max_messages: int
    max_bytes: int
    expires: float
    heartbeat: float
    threshold_messages: int
    threshold_bytes: int
    prio: Priority | None = None
    err_on_missing_heartbeat: bool = False
    #: Pulls by messages (``max_bytes`` 0) that each carry this ``max_bytes``
    #: too (the library's readers): with the threshold at half of
    #: ``max_messages`` at most two pulls are open, so at most twice this is
    #: buffered, and the next pull is on its way before the last one ends.
    pull_bytes: int = 0


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
    prio: Priority | None = None,
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
            BYTES_MODE_BATCH, mb, expires, heartbeat, 0, tb, prio, err_on_missing_heartbeat
        )
    mm = 500 if max_messages is None else positive_int("max_messages", max_messages)
    if threshold_bytes is not None:
        raise ValueError("threshold_bytes applies to max_bytes, not max_messages")
    tm = mm // 2 if threshold_messages is None else threshold_messages
    if not isinstance(tm, int) or not 0 <= tm <= mm:
        raise ValueError(f"threshold_messages must be an int in [0, max_messages], got {tm!r}")
    return PullOptions(mm, 0, expires, heartbeat, tm, 0, prio, err_on_missing_heartbeat)


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
    """An idle-able wildcard inbox subscription, lent to one fetch at a time.

    The fetch's message handler is the subscription's own handler while it
    is lent (``lend``), so the reader calls it with no frame in between; an
    idle inbox's handler drops what still arrives (a late status)."""

    __slots__ = ("__weakref__", "_sub", "prefix", "sid")

    def __init__(self, client: Core) -> None:
        self.prefix = client.new_inbox() + "."
        self.sid = client._subscribe_internal(self.prefix + "*", _drop)
        self._sub = client._subs[self.sid]

    def lend(self, target: Callable[[Msg], None]) -> None:
        self._sub._handler = target  # one attribute store: the reader reads it per message

    def give_back(self) -> None:
        self._sub._handler = _drop


def _drop(msg: Msg) -> None:  # reader thread: what reaches an idle inbox
    return None


def _release_sids(client: Core, sids: list[int]) -> None:
    # Also the finalizer: no lock here (see SubTable.release_later); the UNSUBs
    # go out with the connection's next subscribe or unsubscribe.
    client._release_internal_later(sids)
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
        self._pin_id: str | None = None
        self._pin_line: bytes | None = None
        self.tokens: Iterator[int] = _impl.writer.Counter(1)
        self.free: list[_Inbox] = []
        self._sids: list[int] = []
        self.fetch_delivered = 0
        self.fetches_open = 0
        self.feed: Any = None  # the Feed of a running consume/messages, if any
        self._finalizer = weakref.finalize(self, _release_sids, self.client, self._sids)

    def close(self) -> None:
        """Unsubscribe every inbox of this engine (also done when it is collected).

        A fetch still running on one then ends at its guard."""
        self._finalizer()
        self.client._reap_internal()  # their UNSUBs now, not at the next subscribe

    @property
    def pin_id(self) -> str | None:
        """The ``Nats-Pin-Id`` the server gave this client for a ``pinned_client``
        priority group; sent as ``"id"`` with every pull of the group (ADR-42)."""
        return self._pin_id

    @pin_id.setter
    def pin_id(self, pin: str | None) -> None:
        self._pin_id = pin
        # The header line as the server writes it: messages that carry the pin we
        # know already are recognised by one substring search, without parsing.
        self._pin_line = None if pin is None else f"{PIN_HDR.decode()}: {pin}\r\n".encode()

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
        prio: Priority | None = None,
    ) -> None:
        """Publish one ``CONSUMER.MSG.NEXT`` request (times in seconds, sent in ns).

        A pull of a priority group carries ``prio``'s fields and, once the
        server pinned this client, its pin id.
        """
        req: dict[str, Any] = {"batch": batch}
        if no_wait:
            req["no_wait"] = True
        else:
            req["expires"] = int(expires * 1e9)
        if max_bytes > 0:
            req["max_bytes"] = max_bytes
        if heartbeat > 0:
            req["idle_heartbeat"] = int(heartbeat * 1e9)
        if prio is not None:
            prio.add_to(req)
            pin = self._pin_id
            if pin:
                req["id"] = pin
        body = json.dumps(req, separators=(",", ":")).encode()
        data = b"PUB %s %s %d\r\n%s\r\n" % (self.next_subject, reply.encode(), len(body), body)
        self.client._publish_raw(data, len(body))

    def missing(self) -> errors.ConsumerNotFoundError | None:
        """A pull was answered 503 (nothing answers the consumer's pull subject):
        ask the server whether the consumer exists. Its ConsumerNotFoundError
        (also when the stream is gone), or None when it exists or the server
        cannot tell now (JetStream not answering yet: a transient 503).
        Not on the reader thread: an API request."""
        what = f"consumer {self.name!r} of stream {self.stream!r}"
        try:
            self.js._api_request(f"CONSUMER.INFO.{self.stream}.{self.name}")
        except errors.ConsumerNotFoundError as exc:
            return _not_found(f"{what} not found", exc)
        except errors.StreamNotFoundError as exc:
            return _not_found(f"{what} not found: the stream does not exist", exc)
        except errors.Error:
            return None
        return None

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
            if hdr.find(PIN_HDR) >= 0:  # find: cheaper than bytes `in` (see _feed)
                self.remember_pin(hdr)
        if self.ack_none:
            msg._ackd = ACK_NONE_POLICY
        return None

    def remember_pin(self, hdr: bytes) -> None:
        line = self._pin_line
        if line is not None and hdr.find(line) >= 0:
            return  # the pin we have (every message of a pinned client carries it)
        pin = _impl.jsheaders.header_value(hdr, "Nats-Pin-Id")
        if pin:
            self.pin_id = pin

    def stats(self) -> dict[str, Any]:
        feed = self.feed
        if feed is not None:
            live: dict[str, Any] = feed.stats()
            return live
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
