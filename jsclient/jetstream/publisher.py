"""The managed async publisher (draft ADR "Managed Async Publisher"; Orbit-J's AsyncJsPublisher).

``Publisher.publish_async`` only queues a message. Two loops move it on:

- ``publish_runner`` takes queued messages in batches and publishes them as
  requests on the connection's reply mux (one write per batch), at most
  ``max_in_flight`` unacknowledged at a time. When the window is full it holds
  until ``refill_allowed_at`` or fewer remain, and meanwhile encodes the next
  batch so that the lift only has to write it. The hold is a Condition
  signalled when acks free the window; ``hold_pause_time`` only bounds one wait.
- ``flights_runner`` settles flights. Each flight is its own reply waiter: the
  socket reader hands it its reply and appends it to a deque, so an ack is
  seen whatever the order of the acks before it. A PubAck takes the flight
  out of the window right there (failures keep their place until the flights
  runner has decided on a retry), and the ack that frees the window lifts the
  hold; while the window is full, settling waits until the publish runner has
  written the next batch, so it overlaps the server's work. Timeouts are per
  flight: attempts sit in deques in publish order, the earliest deadline
  bounds each wait, and a flight still without an ack ``wait_timeout`` after
  its own publish times out (``listener.timeout``, and its
  ``publish_ack_future`` fails with TimeoutError).

Both are plain loops for threads the caller owns (a web worker, an executor);
``start()`` runs them on two named threads of the publisher's own.

Like ``JetStream.publish_async``, a 503 (no stream yet, e.g. just after a
restart) is re-sent twice, 250 ms apart, before the attempt fails with
NoStreamResponseError; a disconnect fails every attempt waiting for its ack
with PublishDisconnectedError.

Retries (``retry=RetryConfig(...)``) are re-published by the flights runner
once their backoff has passed, so a failing flight never blocks the publish
runner; a retried message may therefore land after messages queued later. The
flight id goes out as ``Nats-Msg-Id`` (unless the caller gave one), so the
stream's duplicate window drops a retry of a message that was in fact stored.
A retried flight keeps its place in the window until it is settled. With
retries on, an ack timeout is retried too (the Nats-Msg-Id makes it safe), and
a stall (messages waiting, no reply at all for ``RetryConfig.probe_after``,
as when a stream leader dies or steps down and drops what it was sent) is
probed: the oldest waiting message is sent again, and once that probe is
acked everything still waiting is sent again at once, so publishing resumes
within a probe interval of the stream answering instead of after
``wait_timeout``.
Expectation failures (API errors 10060, 10070, 10071) are never retried and set
``flight.expectation_failed``.

``drain()`` refuses new messages and returns once every queued message is
published and settled; ``stop()`` ends the loops before their next iteration
and fails what is left with PublisherClosedError. The futures handed out cannot
be cancelled. Listener hooks run on the runner threads, outside every lock; an
exception from one is logged, never propagated. No lock is held across a
publish, and every wait has a timeout.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from types import TracebackType
from typing import TYPE_CHECKING, Any

from nats.nuid import NUID

from jsclient import errors
from jsclient.jetstream._flight import (
    DEFAULT_RETRY_ON,
    Flight,
    PublisherClosedError,
    PublisherError,
    PublisherListener,
    RetryConfig,
    _call,
    _hook,
)
from jsclient.jetstream._settle import FlightsRunner
from jsclient.jetstream._window import Window
from jsclient.jetstream._wire import pub_headers as _pub_headers
from jsclient.jetstream._wire import ttl_value as _ttl_value
from jsclient.protocol.headers import encode as encode_headers

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient._mux import RequestBatch
    from jsclient.jetstream.context import JetStream
    from jsclient.protocol.headers import HeadersIn

__all__ = [
    "DEFAULT_RETRY_ON",
    "Flight",
    "Publisher",
    "PublisherClosedError",
    "PublisherError",
    "PublisherListener",
    "RetryConfig",
]

# Options passed through to JetStream.publish_async; the publisher owns the ack wait.
_PUBLISH_OPTIONS = frozenset(
    ("msg_id", "expected_stream", "expected_last_seq", "expected_last_subject_seq")
) | {"expected_last_msg_id", "ttl"}
_MSG_ID = "Nats-Msg-Id"
_BATCH = 128  # queued messages the publish runner takes per lock acquisition


class Publisher(FlightsRunner):
    """A managed async publisher on a JetStream context; see the module docstring."""

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
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        if not 0 <= refill_allowed_at < max_in_flight:
            raise ValueError("refill_allowed_at must be >= 0 and below max_in_flight")
        if not min(poll_time, hold_pause_time, wait_timeout) > 0:
            raise ValueError("poll_time, hold_pause_time and wait_timeout must be positive")
        self._js = js
        self._client: Core = js._client
        self.id_prefix: str = id_prefix or NUID().next().decode()
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
        self._work = threading.Condition(self._lock)  # publish runner: queue, hold lift, stop
        self._flights = threading.Condition(self._lock)  # flights runner: acks, stop, drain
        self._idle = threading.Condition(self._lock)  # drain() waiters
        self._ids = itertools.count(1)
        self._queue: deque[Flight] = deque()
        # The window: published (or being published) and no PubAck yet; a failed
        # attempt stays until it is settled or retried.
        self._in_flight: set[Flight] = set()
        # The publish paths' one window: holds at max_in_flight, lifts at refill_allowed_at.
        self._window = Window(self.max_in_flight, self.refill_allowed_at, self._in_flight.__len__)
        self._done: deque[Flight] = deque()  # flights whose current attempt finished
        # Ack clocks. First sends, by the publish runner, in publish order: the
        # flight itself (due at publish_time + wait_timeout while it is on its
        # first send). Retries and re-sends, by the flights runner: a heap of
        # (due, tie-breaker, flight, send generation) (a probe re-send keeps its
        # attempt's earlier deadline, so these are not in publish order).
        self._timeline: deque[Flight] = deque()
        self._retry_timeline: list[tuple[float, int, Flight, int]] = []
        # (due, tie-breaker, flight, is a new attempt): retries and 503 re-sends,
        # a heap the flights runner alone touches.
        self._retries: list[tuple[float, int, Flight, bool]] = []
        self._retry_ids = itertools.count()
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
        self._runners: set[str] = set()
        self._runner_idents: set[int] = set()
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
        return len(self._in_flight)

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
        return self._acked

    @property
    def failed_count(self) -> int:
        return self._failed

    @property
    def timed_out_count(self) -> int:
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
        ``expected_*`` and ``ttl`` options. Raises PublisherClosedError after
        drain()/stop().
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
        # Ids must be unique (with retries they are Nats-Msg-Ids); next() on an
        # itertools.count is one C call, atomic under the GIL: no lock needed.
        flight = Flight(
            self,
            next(self._ids),
            subject,
            payload if type(payload) is bytes else bytes(payload),
            headers,
            publish_options,
        )
        # Not under self._lock (the runners take it): deque.append() is atomic,
        # and the runner re-checks the queue after announcing that it waits, so
        # either it sees the message or we see the flag and wake it.
        self._queue.append(flight)
        if self._closed:
            self._refuse_late(flight)
        if self._pub_waiting:
            with self._lock:
                if self._pub_waiting:
                    self._pub_waiting = False
                    self._work.notify()
        return flight

    def _refuse_late(self, flight: Flight) -> None:
        # drain()/stop() raced with publish_async(): take the message back unless
        # the publish runner already took it (it only takes before the drain ends).
        with self._lock:
            try:
                self._queue.remove(flight)
            except ValueError:
                return
        raise PublisherClosedError("nats: cannot publish once the publisher is closed")

    def start(self) -> Publisher:
        """Run both loops on threads of the publisher's own (daemon, named).

        Allowed while draining (the loops finish the drain), not after stop().
        """
        with self._lock:
            if self._stopped:
                raise PublisherClosedError("nats: cannot start a stopped publisher")
            if self._threads or self._runners:
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
            self._work.notify_all()
            self._flights.notify_all()
            self._idle.notify_all()
        self._join(timeout)
        self._abandon()

    def drain(self, timeout: float | None = None) -> None:
        """Refuse new messages; return once everything queued is published and settled.

        The loops then return. DrainTimeoutError if that takes longer than
        ``timeout`` seconds; the publisher keeps draining (``stop()`` ends it).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._closed = True
            if not self._draining:
                self._draining = True
                self._work.notify_all()
                self._flights.notify_all()
            if threading.get_ident() in self._runner_idents:
                return  # called from a listener: the loops finish the drain themselves
            while not self._stopped and not self._check_drained():
                left = 1.0 if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    raise errors.DrainTimeoutError(
                        f"nats: publisher drain timed out with {len(self._queue)} queued "
                        f"and {len(self._in_flight)} in flight"
                    )
                self._idle.wait(min(left, 1.0))
        self._join(5.0 if deadline is None else max(0.1, deadline - time.monotonic()))

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

    # -- publish runner ------------------------------------------------------

    def publish_runner(self) -> None:
        """Publish queued messages until stopped or drained (run it on any thread)."""
        self._enter("publish")
        try:
            self._publish_loop()
        finally:
            self._leave("publish")

    def _publish_loop(self) -> None:
        lock, queue, in_flight, window = self._lock, self._queue, self._in_flight, self._window
        holding = False  # paused() was reported and resumed() not yet
        # The next batch, registered and encoded while the window was full, so
        # that the lift only has to write it (the server's turn is our spare time).
        ahead: RequestBatch | None = None
        try:
            while True:
                batch: list[Flight] = []
                resumed_at = paused_at = take = -1
                prepare = 0
                with lock:
                    if (
                        self._stopped
                        or self._drained
                        or (self._draining and not queue and ahead is None)
                    ):
                        return
                    if self._held:
                        if not window.resumable():
                            if ahead is None and queue:
                                room = self.max_in_flight - self.refill_allowed_at
                                prepare = min(room, len(queue), _BATCH)
                                self._publishing = True  # drain() must wait for these
                            else:
                                self._lift_waiting = True
                                self._work.wait(self.hold_pause_time)
                                self._lift_waiting = False
                                continue
                        else:
                            # The flights runner's signal and this check cannot both miss.
                            self._lift()
                    if not prepare:
                        if holding:
                            holding = False
                            resumed_at = self._lifted_at
                        room = self.max_in_flight - len(in_flight)
                        take = 0 if ahead is not None else min(room, len(queue), _BATCH)
                        if ahead is not None:
                            pass  # write it first
                        elif queue and room <= 0:
                            self._held = holding = True  # defensive: a full window always holds
                            paused_at = len(in_flight)
                        elif take:
                            self._publishing = True  # drain() must not see an empty queue as idle
                        else:
                            self._pub_waiting = True
                            if not queue:  # re-check: publish_async appends without the lock
                                self._work.wait(self.poll_time)
                            self._pub_waiting = False
                if prepare:
                    ahead = self._prepare(self._take(prepare))
                    continue
                if take > 0:
                    batch = self._take(take)
                if resumed_at >= 0 and self._on_resumed is not None:
                    _call(self._on_resumed, resumed_at, self.max_in_flight, self.refill_allowed_at)
                if ahead is not None:
                    pending, ahead = ahead, None
                    self._send_prepared(pending)
                elif batch:
                    self._send_prepared(self._prepare(batch))
                else:
                    if self._flights_waiting and self._done:
                        self._wake_flights()  # acks that came while the window was full
                    if take > 0:
                        with lock:
                            self._publishing = False
                    if paused_at >= 0 and self._on_paused is not None:
                        _call(
                            self._on_paused, paused_at, self.max_in_flight, self.refill_allowed_at
                        )
                    continue
                with lock:
                    self._publishing = False
                    if not self._stopped and not self._held and window.full():
                        self._held = holding = True
                        paused_at = len(in_flight)
                    self._check_drained()
                if self._flights_waiting and self._done:
                    self._wake_flights()  # acks that came while the window was full
                if paused_at >= 0 and self._on_paused is not None:
                    _call(self._on_paused, paused_at, self.max_in_flight, self.refill_allowed_at)
        finally:
            if ahead is not None:
                self._put_back(ahead.sent)

    def _take(self, n: int) -> list[Flight]:
        queue = self._queue
        batch: list[Flight] = []
        try:
            for _ in range(n):
                batch.append(queue.popleft())  # the only consumer; stop() may clear
        except IndexError:
            pass
        return batch

    def _put_back(self, flights: list[Flight]) -> None:
        # Stopped with a batch taken but not written: back to the queue's front,
        # its reply tokens forgotten; stop() settles them.
        mux = self._client._mux
        for flight in flights:
            if flight._token is not None:
                mux.cancel(flight._token)
                flight._token = None
        with self._lock:
            self._queue.extendleft(reversed(flights))
            self._publishing = False

    def _prepare(self, batch: list[Flight]) -> RequestBatch:
        """Register and encode a batch; ``_send_prepared`` writes it (at once, or
        once the window has room)."""
        if self.retry is not None or any(f.headers is not None or f.options for f in batch):
            batch = [f for f in batch if self._encode_headers(f)]
        prepared = self._client._mux.prepare(batch)
        for flight, exc in prepared.failed:
            self._fail_unsent(flight, exc)
        return prepared

    def _fail_unsent(self, flight: Flight, exc: BaseException) -> None:
        # A first attempt that could not be sent (bad header, subject or size):
        # settled as failed by the flights runner, like any other attempt.
        flight.attempts = 1
        flight._first_time = flight.publish_time = time.monotonic()
        self._in_flight.add(flight)
        flight.deliver(exc)

    def _send_prepared(self, prepared: RequestBatch) -> None:
        """Write a prepared batch of first sends and start their ack clocks."""
        flights: list[Flight] = prepared.sent
        if not flights:
            return
        if self._stopped:
            self._put_back(flights)
            return
        self._in_flight.update(flights)
        now = time.monotonic()
        for flight in flights:
            flight.attempts = flight._gen = 1
            flight._first_time = flight.publish_time = now
        self._timeline.extend(flights)  # before the write: the ack may come first
        self._sent(flights, self._client._mux.write(prepared))

    def _encode_headers(self, flight: Flight) -> bool:
        """Make the flight's header block once; False (and the failure queued) if it is bad."""
        opts = flight.options
        msg_id = opts.get("msg_id")
        hdrs = flight.headers
        if self.retry is not None and msg_id is None and not (hdrs and _MSG_ID in hdrs):
            msg_id = flight.id
        try:
            merged = _pub_headers(
                hdrs,
                msg_id,
                opts.get("expected_stream"),
                opts.get("expected_last_seq"),
                opts.get("expected_last_subject_seq"),
                opts.get("expected_last_msg_id"),
                opts.get("ttl"),
            )
            flight._hdr = encode_headers(merged) if merged else None
        except (errors.Error, TypeError, ValueError) as exc:
            self._fail_unsent(flight, exc)
            return False
        return True
