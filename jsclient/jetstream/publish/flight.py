"""The managed publisher's data: Flight, RetryConfig, the listener, its errors.

Split from :mod:`jsclient.jetstream.publish.publisher` (which re-exports the public
names) so that both modules stay small; nothing here starts a thread.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from jsclient import errors
from jsclient._future import LazyFuture
from jsclient.api import PubAck
from jsclient.msg import Msg

if TYPE_CHECKING:
    import threading
    from collections import deque

    from jsclient.jetstream.publish.window import Window
    from jsclient.protocol.headers import HeadersIn

__all__ = [
    "DEFAULT_RETRY_ON",
    "Flight",
    "PublisherClosedError",
    "PublisherError",
    "PublisherListener",
    "PublisherNotRunningError",
    "RetryConfig",
]

log = logging.getLogger("jsclient")

_EXPECTATION_ERRORS = (
    errors.WrongLastSequenceError,
    errors.WrongLastMsgIDError,
    errors.StreamNotMatchError,
)
_EXPECTATION_CODES = frozenset((10060, 10070, 10071))
T = TypeVar("T")
_ACK_HEAD = b'{"stream":"'  # how every successful publish reply starts


class _Nothing:
    """A flight's ``_reply`` when there is none to handle (None is a reply: closed)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<no reply>"


_NOTHING: Any = _Nothing()


class PublisherError(errors.JetStreamError):
    """Base of the managed publisher's own errors."""

    default_message = "nats: publisher error"


class PublisherClosedError(PublisherError):
    """``publish_async`` after ``drain()``/``stop()``, or a message ``stop()`` abandoned."""

    default_message = "nats: the publisher is closed"


class PublisherNotRunningError(PublisherError):
    """``drain()`` found work left and a runner it needs not running (never
    started, or ended by an exception: see ``__cause__``)."""

    default_message = "nats: the publisher's runners are not running"


DEFAULT_RETRY_ON: tuple[type[BaseException], ...] = (
    errors.PublishDisconnectedError,
    errors.NoStreamResponseError,
    errors.NoRespondersError,
    errors.ServiceUnavailableError,
    errors.OutboundBufferLimitError,
    errors.ConnectionReconnectingError,
    # An ack that never came (a stream leader stepping down drops publishes):
    # retried for an attempt that was never sent (withdrawn), or for a flight
    # carrying a Nats-Msg-Id, which every flight does when retries are on, so
    # a message that was stored after all is dropped by the stream's duplicate
    # window instead of stored twice.
    errors.TimeoutError,
)


@dataclass(frozen=True)
class RetryConfig:
    """How a failed publish is retried.

    ``attempts`` counts every publish of a message, the first included.
    ``backoff`` is the wait before the 1st, 2nd, ... retry in seconds (the last
    value repeats); each wait is shortened by a random part of up to
    ``jitter`` of it, so retries of many messages spread out. The waits are
    short and capped (0.1, 0.25, then 0.5 s) so that a stream that becomes
    writable again (a new leader elected) is found within half a second.
    ``deadline`` (seconds from the first attempt) stops new retries; to ride
    out a leader election (4 to 9 s) give enough ``attempts`` or a deadline.
    ``retry_on`` lists the retryable errors (503 / no responders / connection
    loss, and ack timeouts, by default). An ack timeout is retried when the
    attempt was never sent (withdrawn from the reconnect buffer:
    ``PublishAckTimeoutError.sent`` is False) or the flight carries a
    Nats-Msg-Id (every flight does when retries are on).

    ``probe_after``: when messages wait for acks and no reply at all has come
    for this many seconds (a stream leader died or stepped down and dropped
    them), the oldest is sent again with its Nats-Msg-Id as a probe, once per
    ``probe_after``; as soon as a probe is acked, every message still waiting
    is sent again at once, instead of each waiting out its ``wait_timeout``.
    Re-sends keep the attempt's ack deadline. None turns probing off.
    """

    attempts: int = 2
    backoff: tuple[float, ...] = (0.1, 0.25, 0.5)
    deadline: float | None = None
    retry_on: tuple[type[BaseException], ...] = DEFAULT_RETRY_ON
    jitter: float = 0.2
    probe_after: float | None = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "backoff", tuple(float(b) for b in self.backoff))
        object.__setattr__(self, "retry_on", tuple(self.retry_on))
        if self.attempts < 1:
            raise ValueError("RetryConfig.attempts must be at least 1")
        if not self.backoff or min(self.backoff) < 0:
            raise ValueError("RetryConfig.backoff needs one or more non-negative delays")
        if self.deadline is not None and self.deadline <= 0:
            raise ValueError("RetryConfig.deadline must be positive")
        if not 0 <= self.jitter <= 1:
            raise ValueError("RetryConfig.jitter must be between 0 and 1")
        if self.probe_after is not None and self.probe_after <= 0:
            raise ValueError("RetryConfig.probe_after must be positive (or None)")

    def delay(self, attempts_made: int) -> float:
        """The wait before the next publish once ``attempts_made`` attempts failed."""
        backoff = self.backoff
        base = backoff[min(attempts_made, len(backoff)) - 1]
        if self.jitter:
            base -= base * self.jitter * random.random()
        return base

    def retry_at(self, flight: Flight, exc: BaseException, now: float) -> float | None:
        """When to publish ``flight`` again after ``exc``, or None for no retry."""
        if flight.attempts >= self.attempts or not isinstance(exc, self.retry_on):
            return None
        due = now + self.delay(flight.attempts)
        if self.deadline is not None and due > flight._first_time + self.deadline:
            return None
        return due


class _Owner(Protocol):
    """What a flight reads of its publisher (:class:`~.publisher.Publisher`)."""

    _id_base: str  # <id_prefix>-<nuid>, or <nuid>
    _window: Window  # the publish paths' one window (its resume mark is refill_allowed_at)
    _lock: threading.Lock
    _done: deque[Flight]
    _pending: dict[Flight, None]  # the engine's: in flight, in publish order
    _held: bool
    _draining: bool
    _flights_waiting: bool

    def _lift_on_ack(self) -> None: ...
    def _wake_flights(self) -> None: ...


def _guarded(_call: Callable[..., None], fn: Callable[[Any], object], fut: Any) -> None:
    # The futures' done-callback runner: a callback runs on a publisher runner,
    # which must survive whatever it raises (a BaseException too).
    try:
        fn(fut)
    except BaseException:
        log.exception("jsclient: a done callback of a publisher future raised")


class _Future(LazyFuture[T]):
    """The publisher's futures: no Condition until someone waits, and not cancellable
    (the message's fate is the publisher's to decide, as with ``JetStream.publish_async``).

    They complete on the publisher's runners (the user's threads, or its own),
    so their done callbacks run there, guarded: an exception from one is logged.
    """

    def __init__(self) -> None:
        super().__init__(_guarded)


class Flight(_Future["Flight"]):
    """One message on its way through the publisher, and the future
    ``Publisher.publish_async`` returns: done (with the flight itself as its
    result) once the message is published, failed if it never was.

    ``publish_time`` is the ``time.monotonic()`` of the latest publish attempt
    (0.0 before the first); ``publish_ack_future`` completes with the PubAck or
    the final error (it is made on first access: a caller that only uses the
    listener never pays for it, nor keeps one alive per queued message). Once
    settled, exactly one of ``ack`` / ``error`` is set; ``timed_out`` and
    ``expectation_failed`` tell the failures apart.

    Being its own future saves an object per queued message, which matters
    when many are queued: fewer allocations and fewer objects for the garbage
    collector to scan. A flight is also its own reply waiter on the connection's request mux
    (``deliver``): each attempt registers it under a fresh token, and whoever
    takes that token back (the reader with the reply, the close, the
    publisher on a disconnect or a timeout) decides the attempt.
    """

    __slots__ = (
        "_ack",
        "_ack_future",
        "_closed_by",
        "_first_time",
        "_gen",
        "_hdr",
        "_id",
        "_maybe",
        "_n",
        "_overdue",
        "_owner",
        "_reply",
        "_resends",
        "_settled",
        "_token",
        "_wend",
        "_wlen",
        "attempts",
        "body",
        "deadline",
        "error",
        "expectation_failed",
        "headers",
        "options",
        "publish_time",
        "subject",
        "timed_out",
    )

    def __init__(
        self,
        owner: _Owner,
        n: int,
        subject: str,
        body: bytes,
        headers: HeadersIn | None,
        options: dict[str, Any],
    ) -> None:
        # LazyFuture's fields, inline (this runs once per message on the caller's thread).
        self._lz_done = False
        self._lz_value = None  # never the flight itself: result() returns self, no cycle
        self._lz_exc = None
        self._lz_cbs = None
        self._lz_real = False
        self._lz_runner = _guarded
        self._owner = owner
        self._n = n
        self._id: str | None = None
        self.subject = subject
        self.body = body
        self.headers = headers
        self.options = options
        self.publish_time = 0.0
        self.attempts = 0
        # The PubAck, or the (stream, seq) of a plain ack until ``ack`` is read.
        self._ack: PubAck | tuple[str, int] | None = None
        self.error: BaseException | None = None
        # The PublisherClosedError stop() failed it with: its outcome, whatever a
        # runner still racing stop() writes into the fields above.
        self._closed_by: BaseException | None = None
        self.expectation_failed = False
        self.timed_out = False
        self._ack_future: _Future[PubAck] | None = None
        self._hdr: bytes | None = None  # the encoded header block, made on the first attempt
        self._token: str | None = None  # the reply token of the attempt being waited for
        # That attempt's outcome: a reply Msg, an error, None (closed); _NOTHING
        # once the flights runner has decided on it.
        self._reply: Any = _NOTHING
        self._resends = 0  # 503 and disconnect re-sends within the current attempt
        self._wend = 0  # where the current send's frame ends in the write stream
        self._wlen = 0  # (the engine's disconnect rule and withdrawals)
        self._maybe = False  # a send of it was written and may be stored (lost socket, timeout)
        self._gen = 0  # counts sends (attempts and re-sends): tells stale clocks apart
        self._overdue = -1  # the send (_gen) whose overdue ack was looked for once
        # The engine's ack clock of the current send (0.0: none running): the
        # Publisher keeps its pending dict in deadline order (see settle.py).
        self.deadline = 0.0
        self._first_time = 0.0
        self._settled = False  # claimed by the flights runner or by stop(), under the lock

    def result(self, timeout: float | None = None) -> Flight:
        """The flight itself, once published (blocks up to ``timeout`` seconds)."""
        exc = self.exception(timeout)
        if exc is not None:
            raise exc
        return self

    @property
    def id(self) -> str:
        """``<id_prefix>-<nuid>-<number>`` (``<nuid>-<number>`` without a prefix;
        the NUID is the publisher's own); the Nats-Msg-Id when retries are on."""
        fid = self._id
        if fid is None:
            fid = self._id = f"{self._owner._id_base}-{self._n}"
        return fid

    @property
    def ack(self) -> PubAck | None:
        """The PubAck once acked (None before, and after a failure)."""
        if self._closed_by is not None:
            return None
        ack = self._ack
        if type(ack) is tuple:
            # Made on first read: most acks are only counted, never looked at.
            ack = self._ack = PubAck(stream=ack[0], seq=ack[1])
        return ack  # type: ignore[return-value]

    @property
    def publish_ack_future(self) -> Future[PubAck]:
        """Completes with the PubAck, or fails with the flight's final error."""
        fut = self._ack_future
        if fut is not None:
            return fut
        with self._owner._lock:  # the lock _settle() and _abandon() claim flights under
            fut = self._ack_future
            if fut is not None:
                return fut
            fut = self._ack_future = _Future()
            settled = self._settled  # else _settle()/_abandon() will complete it
            closed = self._closed_by
        if closed is not None:
            _set(fut, exc=closed)
        elif settled:
            _set(fut, self.ack, None if self.ack is not None else self.error)
        return fut

    def deliver(self, reply: Any) -> None:
        """The request multiplexer's hook (internal): hand this attempt its reply.

        Called on the socket reader thread with the reply, ``None`` when the
        connection closed, or an error; it never blocks. Not for user code.
        """
        # The request mux's waiter protocol: the reply to the current attempt
        # (socket reader thread), None when the connection closed, or an error
        # (the publisher itself). Hand over, never block.
        self._reply = reply
        owner = self._owner
        owner._done.append(self)  # first: drain() must always find the flight somewhere
        if type(reply) is Msg and reply.data[:11] == _ACK_HEAD:
            # A PubAck (errors start {"error":): the message is no longer in
            # flight, whatever settling it takes. Failures keep their place
            # until the flights runner has decided on a retry.
            in_flight = owner._pending
            in_flight.pop(self, None)
            if owner._held and not owner._draining:
                # The window is full: let the publish runner write the next
                # batch first; it wakes the flights runner after that (or the
                # flights runner's own clock does), so settling these acks
                # overlaps the server's work on the next batch.
                if len(in_flight) <= owner._window.resume_at:
                    owner._lift_on_ack()
                return
        if owner._flights_waiting:
            owner._wake_flights()

    def __repr__(self) -> str:
        return f"<Flight {self.id} subject={self.subject!r} attempts={self.attempts}>"


class PublisherListener:
    """Callbacks from the publisher; subclass and override what you need.

    ``published``, ``paused``, ``resumed`` run on the publish runner; the
    others on the flights runner (``published`` too, for a message whose first
    publish only succeeded on a retry, or whose reply came before the publish
    runner reported it). Keep them short.
    """

    def published(self, flight: Flight) -> None:
        """The message was handed to the connection (once per flight)."""

    def acked(self, flight: Flight) -> None:
        """The stream acknowledged the message (``flight.ack``)."""

    def completed_exceptionally(self, flight: Flight) -> None:
        """The publish failed for good (``flight.error``, ``flight.expectation_failed``)."""

    def timeout(self, flight: Flight) -> None:
        """No ack came within ``wait_timeout`` of the flight's publish."""

    def retrying(self, flight: Flight) -> None:
        """An attempt failed (``flight.error``) and the message will be published again."""

    def paused(self, in_flight: int, max_in_flight: int, refill_allowed_at: int) -> None:
        """The window is full: publishing holds."""

    def resumed(self, in_flight: int, max_in_flight: int, refill_allowed_at: int) -> None:
        """In-flight dropped to ``refill_allowed_at``: publishing goes on."""


def _hook(listener: object, name: str) -> Callable[..., None] | None:
    # None when absent or not overridden: the hot loops then skip the call.
    if listener is None:
        return None
    fn: Callable[..., None] | None = getattr(listener, name, None)
    if fn is None or getattr(type(listener), name, None) is getattr(PublisherListener, name):
        return None
    return fn


def _call(fn: Callable[..., None], *args: Any) -> None:
    # A BaseException too: the runners must outlive the listener (and a
    # KeyboardInterrupt that lands in it ends up here, logged).
    try:
        fn(*args)
    except BaseException:
        log.exception("jsclient: publisher listener %s raised", getattr(fn, "__name__", fn))


def _set(fut: _Future[Any], result: Any = None, exc: BaseException | None = None) -> None:
    # stop() may have settled it first.
    if exc is None:
        fut.try_set_result(result)
    else:
        fut.try_set_exception(exc)


def _is_expectation(exc: BaseException) -> bool:
    return isinstance(exc, _EXPECTATION_ERRORS) or (
        isinstance(exc, errors.APIError) and exc.err_code in _EXPECTATION_CODES
    )
