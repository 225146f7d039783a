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

import heapq
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
    _Future,
    _hook,
    _is_expectation,
    _set,
)
from jsclient.jetstream._wire import (
    PUBLISH_RETRY_WAIT,
    _pub_ack_fields,
    may_resend,
    status_reply_error,
)
from jsclient.jetstream._wire import parse_pub_ack as _parse_pub_ack
from jsclient.jetstream._wire import pub_headers as _pub_headers
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
) | {"expected_last_msg_id"}
_MSG_ID = "Nats-Msg-Id"
_BATCH = 128  # queued messages the publish runner takes per lock acquisition
_FAILED, _TIMED_OUT = 1, 2


class Publisher:
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

        ``publish_options`` are ``JetStream.publish_async``'s ``msg_id`` and
        ``expected_*`` options. Raises PublisherClosedError after drain()/stop().
        """
        if publish_options and not _PUBLISH_OPTIONS.issuperset(publish_options):
            bad = sorted(set(publish_options) - _PUBLISH_OPTIONS)
            raise TypeError(f"Publisher.publish_async() got unexpected options {bad}")
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
        lock, queue, in_flight = self._lock, self._queue, self._in_flight
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
                        if len(in_flight) > self.refill_allowed_at:
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
                    if (
                        not self._stopped
                        and not self._held
                        and len(in_flight) >= self.max_in_flight
                    ):
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
            )
            flight._hdr = encode_headers(merged) if merged else None
        except (errors.Error, TypeError, ValueError) as exc:
            self._fail_unsent(flight, exc)
            return False
        return True

    def _resend(self, flights: list[Flight], due: float) -> None:
        """Publish retries and 503 re-sends in one write; their ack clocks run to ``due``."""
        if flights:
            self._resend_same([(flight, due) for flight in flights])

    def _resend_same(self, pairs: list[tuple[Flight, float]]) -> None:
        """Send flights again in one write, each with its own ack deadline (retries,
        503 re-sends, stall probes and the re-sends after a probe was acked)."""
        flights = [f for f, _ in pairs]
        # Back in the window (a flight whose reply looked like an ack but was
        # not may have left it).
        self._in_flight.update(flights)
        timeline, ids = self._retry_timeline, self._retry_ids
        for flight, due in pairs:
            gen = flight._gen = flight._gen + 1
            # before the write: the ack may come first
            heapq.heappush(timeline, (due, next(ids), flight, gen))
        self._sent(flights, self._client._mux.send_batch(flights))

    def _sent(self, flights: list[Flight], failed: list[tuple[Flight, BaseException]]) -> None:
        """After a write: fail what could not be sent, report the rest published."""
        if failed:
            for flight, exc in failed:
                flight.deliver(exc)
            lost = {id(f) for f, _ in failed}
            flights = [f for f in flights if id(f) not in lost]
        # Report them published, claiming the whole batch at once (the flights
        # runner may claim one whose ack came first).
        claimed = _Future.complete_all(flights)
        if self._on_published is not None:
            for flight in claimed:
                _call(self._on_published, flight)

    # -- flights runner ------------------------------------------------------

    def flights_runner(self) -> None:
        """Settle published messages until stopped or drained (run it on any thread)."""
        self._enter("flights")
        self._client._add_listener(self._on_conn_event)
        try:
            self._flights_loop()
        finally:
            self._client._remove_listener(self._on_conn_event)
            with self._lock:
                self._retries.clear()
            self._leave("flights")

    def _flights_loop(self) -> None:
        lock, done = self._lock, self._done
        while not self._stopped:
            if not done:
                with lock:
                    if self._stopped or self._check_drained():
                        return
                    self._flights_waiting = True
                    wait = self._next_wake() - time.monotonic()
                    if wait > 0 and not done:  # re-check: acks are appended without the lock
                        self._flights.wait(wait)
                    self._flights_waiting = False
            self._processing = True  # before taking from _done: see _is_idle
            try:
                self._process()
            finally:
                self._processing = False
            if self._draining:
                with lock:
                    self._check_drained()

    def _next_wake(self) -> float:
        wake = time.monotonic() + self.poll_time
        if self._timeline:
            wake = min(wake, self._timeline[0].publish_time + self.wait_timeout)
        if self._retry_timeline:
            wake = min(wake, self._retry_timeline[0][0])
        if self._retries:
            wake = min(wake, self._retries[0][0])
        return wake

    def _process(self) -> None:
        now = time.monotonic()
        acked: list[Flight] = []
        settled: list[tuple[Flight, int]] = []  # the failed and timed out
        replied: list[Flight] = []
        done = self._done
        resume = False
        if done:
            self._last_reply = now
        for _ in range(len(done)):
            flight = done.popleft()
            reply = flight._reply
            flight._reply = None
            flight._token = None
            if flight._settled:
                continue  # abandoned by stop()
            data = getattr(reply, "data", None)  # None: an error, or the connection closed
            if data is not None and not flight._lz_done:
                replied.append(flight)  # the reply beat the publish runner's report
            if data:
                fields = _pub_ack_fields(data)
                if fields is not None:
                    flight._ack = fields  # a plain ack: the PubAck is made when read
                else:
                    try:
                        flight._ack = _parse_pub_ack(data)
                    except errors.Error as exc:
                        self._attempt_failed(flight, exc, now, settled)
                        continue
                if flight.error is not None:
                    flight.error = None  # of an earlier attempt
                if flight is self._probe:
                    resume = True
                acked.append(flight)
            else:
                failure = self._reply_error(flight, reply, now)
                if failure is not None:
                    self._attempt_failed(flight, failure, now, settled)
        first, wait = self._timeline, self.wait_timeout
        while first:
            flight = first[0]
            if flight._gen != 1 or flight._token is None:
                first.popleft()  # settled, or sent again since
            elif flight.publish_time + wait > now:
                break
            else:
                first.popleft()
                self._expire(flight, now, settled)
        later = self._retry_timeline
        while later:
            deadline, _, flight, gen = later[0]
            if flight._gen != gen or flight._token is None:
                heapq.heappop(later)
            elif deadline > now:
                break
            else:
                heapq.heappop(later)
                self._expire(flight, now, settled)
        probe_after = self._probe_after
        if probe_after is not None and not self._stopped:
            if resume:
                self._resume_stalled()
            elif now - self._last_reply >= probe_after and now - self._probe_time >= probe_after:
                self._send_probe(now, probe_after)
        heap = self._retries
        if heap and heap[0][0] <= now and not self._stopped:
            again: list[Flight] = []
            while heap and heap[0][0] <= now:
                _, _, flight, new_attempt = heapq.heappop(heap)
                if flight._settled:
                    continue
                if new_attempt:
                    flight.attempts += 1
                    flight._resends = 0
                flight.publish_time = now
                again.append(flight)
            self._resend(again, now + self.wait_timeout)
        if replied:
            # Published, whatever the reply says: report it before settling.
            if self._on_published is None:
                _Future.complete_all(replied)
            else:
                for flight in replied:
                    self._announce(flight)
        if acked or settled:
            self._settle(acked, settled)

    def _waiting(self) -> list[tuple[Flight, float]]:
        """Every send still waiting for its reply, with its ack deadline."""
        wait = self.wait_timeout
        out = [
            (f, f.publish_time + wait)
            for f in self._timeline
            if f._gen == 1 and f._token is not None
        ]
        out += [
            (f, due)
            for due, _, f, gen in self._retry_timeline
            if f._gen == gen and f._token is not None
        ]
        return out

    def _send_probe(self, now: float, probe_after: float) -> None:
        """No reply at all for ``probe_after``: send the oldest waiting flight again
        (same Nats-Msg-Id, same deadline) to find out when the stream answers again."""
        if not self._client.is_connected:
            return  # a disconnect fails the waiting attempts itself
        waiting = self._waiting()
        if not waiting:
            return
        flight, due = min(waiting, key=lambda p: p[1])
        if due - self.wait_timeout > now - probe_after:
            return  # the oldest has not waited that long yet
        token = flight._token
        if not self._client._mux.cancel(token):
            return  # its reply is on the way
        flight._token = None
        self._probe, self._probe_time = flight, now
        self._resend_same([(flight, due)])

    def _resume_stalled(self) -> None:
        """The probe was acked: the stream answers again, so what was sent before
        the probe and is still waiting was most likely dropped: send it all again."""
        since, self._probe = self._probe_time, None
        mux, wait = self._client._mux, self.wait_timeout
        again: list[tuple[Flight, float]] = []
        for flight, due in self._waiting():
            token = flight._token
            # (token None: taken back by an earlier entry of the same flight)
            if due - wait >= since or token is None:
                continue
            if mux.cancel(token):
                flight._token = None
                again.append((flight, due))
        if again:
            self._resend_same(again)

    def _reply_error(self, flight: Flight, reply: Any, now: float) -> BaseException | None:
        """The error an attempt ended with; None when a 503 is re-sent instead."""
        if reply is None:
            return errors.ConnectionClosedError()
        if isinstance(reply, BaseException):
            return reply
        st = reply.status
        if st is not None and st[0] == 503 and may_resend(flight._resends) and not self._stopped:
            # The publish paths' one 503 rule: the stream may not be up yet.
            flight._resends += 1
            due = now + PUBLISH_RETRY_WAIT
            heapq.heappush(self._retries, (due, next(self._retry_ids), flight, False))
            return None
        return status_reply_error(flight.subject, st)

    def _expire(self, flight: Flight, now: float, settled: list[tuple[Flight, int]]) -> None:
        """The send's ack is overdue: time it out, unless its reply just came."""
        token = flight._token
        if not self._client._mux.cancel(token):
            return  # the reply is on its way here (or the send failed)
        flight._token = None
        if not self._client.is_connected:
            # The ack was lost with the connection: retryable like a disconnect.
            cause = errors.PublishDisconnectedError(
                f"nats: no publish ack within {self.wait_timeout} s while disconnected"
            )
            if self._retried_later(flight, cause, now):
                return
        error = errors.TimeoutError(
            f"nats: no publish ack for {flight.id} within {self.wait_timeout} s"
        )
        # With a Nats-Msg-Id a retry is safe (the stream drops a second copy),
        # so a dropped publish is retried like a 503.
        if _has_msg_id(flight) and self._retried_later(flight, error, now):
            return
        flight.timed_out = True
        flight.error = error
        settled.append((flight, _TIMED_OUT))

    def _attempt_failed(
        self, flight: Flight, exc: BaseException, now: float, settled: list[tuple[Flight, int]]
    ) -> None:
        flight.error = exc
        if _is_expectation(exc):
            flight.expectation_failed = True
        elif self._retried_later(flight, exc, now):
            return
        elif isinstance(exc, errors.TimeoutError):
            flight.timed_out = True
            settled.append((flight, _TIMED_OUT))
            return
        settled.append((flight, _FAILED))

    def _retried_later(self, flight: Flight, exc: BaseException, now: float) -> bool:
        """Schedule another attempt if the retry config allows one."""
        due = None if self.retry is None or self._stopped else self.retry.retry_at(flight, exc, now)
        if due is None:
            return False
        flight.error = exc
        heapq.heappush(self._retries, (due, next(self._retry_ids), flight, True))
        self._retried += 1
        if self._on_retrying is not None:
            _call(self._on_retrying, flight)
        return True

    def _settle(self, acked: list[Flight], settled: list[tuple[Flight, int]]) -> None:
        """Settle acked flights and failed / timed out ones: count them, free
        their window places, complete their futures and call the listener."""
        lock, in_flight = self._lock, self._in_flight
        mine: list[Flight] = []
        failed: list[tuple[Flight, int]] = []
        with lock:
            for flight in acked:
                if not flight._settled:  # else stop() got there first
                    flight._settled = True
                    in_flight.discard(flight)
                    mine.append(flight)
            self._acked += len(mine)
            for flight, kind in settled:
                if not flight._settled:
                    flight._settled = True
                    in_flight.discard(flight)
                    failed.append((flight, kind))
                    if kind == _FAILED:
                        self._failed += 1
                    else:
                        self._timed_out += 1
            busy = len(mine) + len(failed)
            self._settling += busy
            if self._held and len(in_flight) <= self.refill_allowed_at:
                self._lift()
        # A flight's _ack_future is read after _settled was set under the lock:
        # one made later completes itself (see Flight.publish_ack_future).
        try:
            on_acked = self._on_acked
            for flight in mine:
                fut = flight._ack_future
                if fut is not None:
                    _set(fut, flight.ack)
                if on_acked is not None:
                    _call(on_acked, flight)
            for flight, kind in failed:
                fut = flight._ack_future
                if fut is not None:
                    _set(fut, exc=flight.error)
                if not flight._lz_done:
                    _set(flight, exc=flight.error)  # never published
                hook = self._on_failed if kind == _FAILED else self._on_timeout
                if hook is not None:
                    _call(hook, flight)
        finally:
            with lock:
                self._settling -= busy
                self._check_drained()

    # -- shared internals ----------------------------------------------------

    def _wake_flights(self) -> None:
        # Any thread, after appending to _done (Flight.deliver): the flights
        # runner re-checks the deque after announcing that it waits (see
        # publish_async), so either it sees the flight or we see the flag.
        with self._lock:
            if self._flights_waiting:
                self._flights_waiting = False
                self._flights.notify()

    def _on_conn_event(self, event: str) -> None:
        # Callback thread: the acks of attempts sent before a disconnect are
        # lost with the connection. Fail each attempt whose token we take back
        # (a reply that got there first wins); a retry resends it with its id.
        if event != "disconnected":
            return
        mux = self._client._mux
        for flight in list(self._in_flight):
            if mux.cancel(flight._token):
                flight.deliver(errors.PublishDisconnectedError())

    def _announce(self, flight: Flight) -> None:
        # Publish runner, or flights runner (a retry, or an ack that beat the
        # publish runner here): the future's own claim decides who reports it.
        if flight._complete(None, None) and self._on_published is not None:
            _call(self._on_published, flight)

    def _lift_on_ack(self) -> None:
        # Reader thread (Flight.deliver): a PubAck freed the window's last place
        # above refill_allowed_at. Lifting here, not after the flights runner
        # settled it, saves a thread hand-off per window.
        with self._lock:
            if self._held and len(self._in_flight) <= self.refill_allowed_at:
                self._lift()

    def _lift(self) -> None:
        # With the lock held.
        self._held = False
        self._lifted_at = len(self._in_flight)
        if self._lift_waiting:
            self._lift_waiting = False
            self._work.notify()

    def _is_idle(self) -> bool:
        # With the lock held.
        return not (
            self._queue
            or self._publishing
            or self._in_flight
            or self._done
            or self._retries
            or self._processing
            or self._settling
        )

    def _check_drained(self) -> bool:
        # With the lock held: True (and drain() woken) once a drain has finished.
        if not self._drained and self._draining and self._is_idle():
            self._drained = True
            self._idle.notify_all()
            self._work.notify_all()
            self._flights.notify_all()
        return self._drained

    def _enter(self, runner: str) -> None:
        with self._lock:
            if runner in self._runners:
                raise PublisherError(f"nats: the {runner} runner is already running")
            self._runners.add(runner)
            self._runner_idents.add(threading.get_ident())

    def _leave(self, runner: str) -> None:
        with self._lock:
            self._runners.discard(runner)
            self._runner_idents.discard(threading.get_ident())
            self._check_drained()
        if self._stopped:
            self._abandon()

    def _join(self, timeout: float) -> None:
        me = threading.current_thread()
        for t in self._threads:
            if t is not me:
                t.join(timeout)

    def _abandon(self) -> None:
        """After stop(): fail every message not settled yet."""
        with self._lock:
            # list() first: the publish runner may add to the set without the lock.
            # (An acked flight leaves _in_flight on the reader thread and waits
            # in _done until the flights runner settles it.)
            flights = set(self._queue) | set(self._in_flight) | set(self._done)
            self._queue.clear()
            self._in_flight.clear()
            victims = [(f, f._ack_future) for f in flights if not f._settled]
            mux = self._client._mux
            for f, _ in victims:
                f._settled = True
                if f._token is not None:
                    mux.cancel(f._token)  # a late reply finds no waiter
                f._ack = None
                f.error = PublisherClosedError(
                    "nats: the publisher stopped before the message was acked"
                )
            self._failed += len(victims)
            self._idle.notify_all()
        for f, fut in victims:
            if fut is not None:
                _set(fut, exc=f.error)
            if not f._lz_done:
                _set(f, exc=f.error)


def _has_msg_id(flight: Flight) -> bool:
    hdr = flight._hdr
    return hdr is not None and b"nats-msg-id:" in hdr.lower()
