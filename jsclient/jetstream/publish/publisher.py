"""The managed async publisher (draft ADR "Managed Async Publisher"; Orbit-J's AsyncJsPublisher).

The Publisher is a client of the async-publish engine
(:mod:`jsclient.jetstream.publish.engine`), which owns what every publish path
shares: the window of messages waiting for acks, ack matching, the ack-timeout
claim (token back, frame withdrawn if still queued), the 503 rule and the
disconnect rule. What the Publisher adds is the seed's: the bounded queue,
hold and refill, the listener, retries and stall probes, and two runners.

``Publisher.publish_async`` only queues a message (a full queue waits up to
``stall_wait``, 60 s by default: the publisher rides out outages). Then:

- ``publish_runner`` (:mod:`.publish_runner`) takes queued messages in batches
  and writes each batch at once, at most ``max_in_flight`` unacknowledged.
  When the window is full it holds until ``refill_allowed_at`` remain, and
  meanwhile encodes the next batch so that the lift only has to write it.
- ``flights_runner`` (:mod:`.settle`) settles flights: each flight is its own
  reply waiter, handed its reply by the socket reader; the runner decodes it,
  retries (``retry=RetryConfig(...)``, after a backoff, with the flight id as
  ``Nats-Msg-Id`` so the stream drops a second copy), probes a stall, or
  times the flight out ``wait_timeout`` after its publish. Expectation
  failures (API errors 10060, 10070, 10071) are never retried.

Both are plain loops for threads the caller owns; ``start()`` runs them on two
named threads of the publisher's own. Flight ids are ``<id_prefix>-<nuid>-<n>``
with a NUID per Publisher, so two processes, or a restart within the stream's
duplicate window, never reuse an id; pass a stable ``msg_id=`` to de-duplicate
across restarts (kept on every retry).

``drain()`` refuses new messages and returns once everything is published and
settled (PublisherNotRunningError when a runner it needs is not running);
``stop()`` fails what is left with PublisherClosedError, withdrawing what is
still queued on the connection. Listener hooks and done callbacks run on the
runners, outside every lock; whatever they raise is logged. No lock is held
across a publish, every wait has a timeout, and the runners are safe to
interrupt: what a runner takes from a queue it moves into a list the publisher
owns in one C call and leaves there until the flight is in the window with its
ack clock running, so an interrupted flight ends up queued again, in flight, or
failed, and a restarted runner (which re-arms every ack clock) goes on.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from nats.nuid import NUID

from jsclient import _impl, errors
from jsclient._threads import Signal, Wake
from jsclient.jetstream._wire import ttl_value as _ttl_value
from jsclient.jetstream.publish.flight import (
    DEFAULT_RETRY_ON,
    Flight,
    PublisherClosedError,
    PublisherError,
    PublisherListener,
    PublisherNotRunningError,
    RetryConfig,
    _hook,
)
from jsclient.jetstream.publish.publish_runner import PublishRunner
from jsclient.jetstream.publish.settle import FlightsRunner
from jsclient.jetstream.publish.window import Window

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.jetstream.context import JetStream
    from jsclient.protocol.headers import HeadersIn

__all__ = [
    "DEFAULT_RETRY_ON",
    "Flight",
    "Publisher",
    "PublisherClosedError",
    "PublisherError",
    "PublisherListener",
    "PublisherNotRunningError",
    "RetryConfig",
]

# Options passed through to JetStream.publish_async; the publisher owns the ack wait.
_PUBLISH_OPTIONS = frozenset(
    ("msg_id", "expected_stream", "expected_last_seq", "expected_last_subject_seq")
) | {"expected_last_msg_id", "ttl"}
# The default queue bound: nats.go's async publish window (4000), and never
# less than four windows, so that a burst keeps the window refilled while the
# caller waits; 4000 messages of 100 bytes hold about 1.5 MiB.
_MIN_QUEUED = 4000
# drain(): how long a runner it needs may be missing (a runner being restarted
# after an interrupt, or a thread that has not entered it yet) before it raises.
_RUNNER_GRACE = 1.0


class Publisher(PublishRunner, FlightsRunner):
    """A managed async publisher on a JetStream context.

    ``publish_async`` only queues a message and returns its ``Flight`` (a
    future, done once published; ``flight.publish_ack_future`` completes with
    the ``PubAck`` or the final error). ``publish_runner`` and
    ``flights_runner`` publish and settle; run them on threads you own, or on
    the publisher's own (``start()``, or ``with Publisher(js) as pub:``, which
    drains on exit). At most ``max_in_flight`` messages wait for acks; each
    times out ``wait_timeout`` seconds after its publish; with ``retry`` every
    flight id goes out as ``Nats-Msg-Id``, so a retry cannot duplicate. The
    ``listener``'s methods run on the runners' threads. A full queue raises
    ``TooManyStalledMsgsError`` after ``stall_wait``; ``drain()`` raises
    ``DrainTimeoutError`` or ``PublisherNotRunningError``.
    """

    def __init__(
        self,
        js: JetStream,
        *,
        id_prefix: str | None = None,
        max_in_flight: int = 50,
        refill_allowed_at: int = 0,
        retry: RetryConfig | None = None,
        poll_time: float = 0.1,
        hold_pause_time: float = 0.1,
        wait_timeout: float = 5.0,
        listener: PublisherListener | None = None,
        max_queued: int | None = None,
        stall_wait: float = 60.0,
    ) -> None:
        """See the module docstring. ``max_queued``: how many messages may wait
        for the publish runner (None: ``max(4000, 4 * max_in_flight)``; 0: no
        bound); ``stall_wait``: how long ``publish_async`` waits for room in a
        full queue before it raises TooManyStalledMsgsError (0: at once; 60 s by
        default, Kafka's ``max.block.ms``: the publisher exists to ride out an
        outage, so a producer feeding it through a server restart waits)."""
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        if not 0 <= refill_allowed_at < max_in_flight:
            raise ValueError("refill_allowed_at must be >= 0 and below max_in_flight")
        if not min(poll_time, hold_pause_time, wait_timeout) > 0:
            raise ValueError("poll_time, hold_pause_time and wait_timeout must be positive")
        if max_queued is None:
            max_queued = max(_MIN_QUEUED, 4 * max_in_flight)
        if max_queued < 0 or stall_wait < 0:
            raise ValueError("max_queued and stall_wait must not be negative")
        self._js = js
        self._client: Core = js._client
        # Flight ids (Nats-Msg-Ids with retries on) carry a NUID drawn for this
        # publisher: a restart or a second process with the same prefix never
        # reuses one (the stream would drop the new message as a duplicate).
        nuid = NUID().next().decode()
        self.id_prefix: str = id_prefix or nuid
        self._id_base = nuid if id_prefix is None else f"{id_prefix}-{nuid}"
        self.max_queued = int(max_queued)
        self.stall_wait = float(stall_wait)
        self.max_in_flight = int(max_in_flight)
        self.refill_allowed_at = int(refill_allowed_at)
        self.retry = retry
        self.poll_time = float(poll_time)
        self.hold_pause_time = float(hold_pause_time)
        self.wait_timeout = float(wait_timeout)
        self.listener = listener
        self._on_published = _hook(listener, "published")
        self._on_acked = _hook(listener, "acked")
        self._on_failed = _hook(listener, "completed_exceptionally")
        self._on_timeout = _hook(listener, "timeout")
        self._on_retrying = _hook(listener, "retrying")
        self._on_paused = _hook(listener, "paused")
        self._on_resumed = _hook(listener, "resumed")

        self._lock = threading.Lock()
        # The runners wait on signals, not on Conditions: a wait holds no data
        # and no lock, so an interrupt in it leaves nothing to restore.
        self._work = Wake()  # publish runner: queue, hold lift, stop
        self._flights = Wake()  # flights runner: acks, stop, drain
        self._idle = Signal(self._lock)  # drain() waiters (entered through _lock)
        self._ids: Iterator[int] = _impl.writer.Counter(1)
        self._queue: deque[Flight] = deque()
        # Every flight queued and not yet settled, changed only under _lock: what
        # stop() fails, whatever container (or runner's stack) a flight is in as
        # the runners move it without the lock.
        self._unsettled: dict[Flight, None] = {}
        # Back-pressure on publish_async; resumes once a quarter of the queue is free.
        limit = self.max_queued
        self._queue_window = Window(
            limit, limit - max(1, limit // 4) if limit else 0, self._queue.__len__
        )
        # What the publish runner took from the queue and has not yet sent with
        # its ack clock running (see the module docstring on interrupts), and
        # whether the batch in it is being written (its clocks run: not put back).
        self._batch: list[Flight] = []
        self._batch_sent = False
        # The engine's pending set (published, or being published, and no PubAck
        # yet; a failed attempt stays until it is settled or retried) and its
        # window: holds at max_in_flight, lifts at refill_allowed_at.
        self._init_engine(self._client, self.max_in_flight, self.refill_allowed_at)
        self._done: deque[Flight] = deque()  # flights whose current attempt finished
        # Ack clocks: the engine's sweep over _pending (flight.deadline), which
        # hands an overdue send over as (flight, send generation) to the flights
        # runner (see settle.py). The runner's own heap of (due, tie-breaker,
        # flight, send generation): the re-check of an overdue send whose reply
        # is on its way, and the rescue clocks after an interrupt.
        self._expiring: deque[tuple[Flight, int]] = deque()
        self._retry_timeline: list[tuple[float, int, Flight, int]] = []
        # (due, tie-breaker, flight, is a new attempt, send generation): retries
        # and 503 re-sends, a heap the flights runner alone touches (an entry
        # whose flight was sent since is stale: one taken twice sends once).
        self._retries: list[tuple[float, int, Flight, bool, int]] = []
        # What the flights runner took from _done and has not finished with.
        self._handling: list[Flight] = []
        self._rescue = False  # the flights runner was interrupted: re-arm every ack clock
        self._retry_ids: Iterator[int] = _impl.writer.Counter(0)
        # Stall probing (see RetryConfig.probe_after): when a reply last came,
        # the probe in flight and when it was sent.
        self._probe_after = None if retry is None else retry.probe_after
        self._last_reply = 0.0
        self._probe: Flight | None = None
        self._probe_time = 0.0
        self._publishing = False  # the publish runner holds a taken, unfinished batch
        self._settling = 0  # settled flights whose futures and hooks are still running
        self._processing = False  # the flights runner is taking flights from _done
        self._held = False
        self._lifted_at = 0
        self._pub_waiting = False  # the publish runner waits for messages (publish_async wakes it)
        self._lift_waiting = False  # the publish runner waits for the hold to lift (acks wake it)
        self._flights_waiting = False
        self._closed = False
        self._draining = False
        self._stopped = False
        self._drained = False  # draining and idle was seen: runners take nothing more
        # Runner kind -> the thread running it (a thread interrupted out of a
        # runner may run it again; a dead one does not count).
        self._runners: dict[str, threading.Thread] = {}
        self._runner_idents: frozenset[int | None] = frozenset()
        self._runner_error: BaseException | None = None  # what ended a runner last
        self._threads: list[threading.Thread] = []
        self._acked = self._failed = self._timed_out = self._retried = 0

    def __repr__(self) -> str:
        return (
            f"<Publisher {self.id_prefix} in_flight={self.in_flight} queued={self.queued} "
            f"held={self._held}>"
        )

    # -- observability -------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Messages published with no ack yet and not failed / timed out (retries included)."""
        return len(self._pending)

    @property
    def queued(self) -> int:
        """Messages waiting for the publish runner."""
        return len(self._queue)

    @property
    def held(self) -> bool:
        """True while publishing holds because the window was full."""
        return self._held

    @property
    def acked_count(self) -> int:
        """How many messages were acked by their stream so far."""
        return self._acked

    @property
    def failed_count(self) -> int:
        """How many messages failed for good (retries used up, or not retryable)."""
        return self._failed

    @property
    def timed_out_count(self) -> int:
        """How many messages got no ack within ``wait_timeout`` on their last attempt."""
        return self._timed_out

    @property
    def retried_count(self) -> int:
        """How many retries were scheduled."""
        return self._retried

    @property
    def is_closed(self) -> bool:
        """True once ``drain()`` or ``stop()`` was called: no new messages."""
        return self._closed

    # -- user API ------------------------------------------------------------

    def publish_async(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: HeadersIn | None = None,
        **publish_options: Any,
    ) -> Flight:
        """Queue a message; returns its Flight, a Future[Flight] done once it is published.

        ``publish_options`` are ``JetStream.publish_async``'s ``msg_id``,
        ``expected_*`` and ``ttl`` options; a ``msg_id`` is sent on every
        attempt (the stream keeps one copy per id within its duplicate window).
        Raises PublisherClosedError after drain()/stop(), and
        TooManyStalledMsgsError when the queue stayed full for ``stall_wait``.
        """
        if publish_options:
            if not _PUBLISH_OPTIONS.issuperset(publish_options):
                bad = sorted(set(publish_options) - _PUBLISH_OPTIONS)
                raise TypeError(f"Publisher.publish_async() got unexpected options {bad}")
            if publish_options.get("ttl") is not None:
                _ttl_value(publish_options["ttl"])  # bad input raises here, not on a runner
                self._js._require_api_level(1, "per-message TTL")
        if self._closed:
            raise PublisherClosedError("nats: cannot publish once the publisher is closed")
        if 0 < self.max_queued <= len(self._queue):  # _queue_window.full(), inline
            self._wait_for_room()
        # Ids must be unique (with retries they are Nats-Msg-Ids): a Counter
        # never gives one twice, whatever the threads.
        flight = Flight(
            self,
            next(self._ids),
            subject,
            payload if type(payload) is bytes else bytes(payload),
            headers,
            publish_options,
        )
        # Queued and the runner's flag read under the runners' lock (held by
        # them for a few steps at a time, never across I/O): either the runner
        # sees the message when it looks, or we see that it waits and wake it.
        with self._lock:
            self._queue.append(flight)
            self._unsettled[flight] = None
            if self._pub_waiting:
                self._pub_waiting = False
                self._work.set()
        if self._closed:
            self._refuse_late(flight)
        return flight

    def _wait_for_room(self) -> None:
        # Never on a runner's own thread (a listener publishing): the publish
        # runner would wait for itself.
        window = self._queue_window
        if threading.get_ident() not in self._runner_idents and self.stall_wait > 0:
            window.wait_below(window.resume_at, time.monotonic() + self.stall_wait, self.__closed)
        if self._closed:
            raise PublisherClosedError("nats: cannot publish once the publisher is closed")
        if window.full():
            raise errors.TooManyStalledMsgsError(
                f"nats: the publisher's queue stayed full ({self.max_queued} messages) "
                f"for {self.stall_wait} s"
            )

    def __closed(self) -> bool:
        return self._closed

    def _refuse_late(self, flight: Flight) -> None:
        # drain()/stop() raced with publish_async(): take the message back unless
        # the publish runner already took it (it only takes before the drain ends).
        with self._lock:
            try:
                self._queue.remove(flight)
            except ValueError:
                return
            del self._unsettled[flight]
        raise PublisherClosedError("nats: cannot publish once the publisher is closed")

    def start(self) -> Publisher:
        """Run both loops on threads of the publisher's own (daemon, named).

        Allowed while draining (the loops finish the drain), not after stop().
        """
        with self._lock:
            if self._stopped:
                raise PublisherClosedError("nats: cannot start a stopped publisher")
            if self._threads or self._live_runners():
                raise PublisherError("nats: the publisher's runners are already running")
            self._threads = [
                threading.Thread(target=run, name=f"jsclient-{kind}-{self.id_prefix}", daemon=True)
                for kind, run in (
                    ("publisher", self.publish_runner),
                    ("flights", self.flights_runner),
                )
            ]
        for t in self._threads:
            t.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop both loops before their next iteration.

        Messages not yet settled are abandoned: their futures fail with
        PublisherClosedError (the listener is not called for them). Joins the
        publisher's own threads for up to ``timeout`` seconds.
        """
        with self._lock:
            self._stopped = self._closed = True
            self._work.set()
            self._flights.set()
            self._idle.notify_locked()
        self._queue_window.wake_all()
        self._join(timeout)
        self._abandon()

    def drain(self, timeout: float | None = None) -> None:
        """Refuse new messages; return once everything queued is published and settled.

        The loops then return. DrainTimeoutError if that takes longer than
        ``timeout`` seconds; PublisherNotRunningError when there is something to
        publish or settle and a runner is not running (none was started, or one
        died; a runner may be missing for a moment, e.g. while it is restarted).
        Either way the publisher keeps draining: start (or restart) the runners
        and call ``drain()`` again, or ``stop()`` it.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        missing_since: float | None = None
        with self._lock:
            self._closed = True
            if not self._draining:
                self._draining = True
                self._work.set()
                self._flights.set()
        self._queue_window.wake_all()
        with self._lock:
            if threading.get_ident() in self._runner_idents:
                return  # called from a listener: the loops finish the drain themselves
            while True:  # the test inside: see tests/unit/test_interrupt_cover.py
                if self._stopped or self._check_drained():
                    break
                now = time.monotonic()
                left = 1.0 if deadline is None else deadline - now
                if left <= 0:
                    raise errors.DrainTimeoutError(
                        f"nats: publisher drain timed out with {len(self._queue)} queued "
                        f"and {len(self._pending)} in flight"
                    )
                missing = self._missing_runner()
                if missing is None:
                    missing_since = None
                elif missing_since is None:
                    missing_since = now
                elif now - missing_since >= _RUNNER_GRACE:
                    raise PublisherNotRunningError(
                        f"nats: cannot drain the publisher: its {missing} runner is not "
                        f"running ({len(self._queue)} queued, {len(self._pending)} in "
                        "flight); start() it or run publish_runner/flights_runner"
                    ) from self._runner_error
                self._idle.wait_locked(min(left, 1.0 if missing is None else 0.05))
        self._join(5.0 if deadline is None else max(0.1, deadline - time.monotonic()))

    def _missing_runner(self) -> str | None:
        # With the lock held: a runner kind that has work left and is not
        # running (the publish runner ends its part of a drain on its own).
        live = self._live_runners()
        if "publish" not in live and (self._queue or self._batch or self._publishing):
            return "publish"
        if "flights" not in live and (self._pending or self._done or self._handling):
            return "flights"
        return None

    def __enter__(self) -> Publisher:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and not issubclass(exc_type, Exception):
            self.stop()  # KeyboardInterrupt and friends: do not wait for acks
        else:
            self.drain()
