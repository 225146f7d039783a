"""The managed publisher's settling side: the flights runner and the state it shares.

:class:`FlightsRunner` is the half of :class:`~jsclient.jetstream.publisher.Publisher`
that settles flights (acks, failures, timeouts, retries, stall probes) and the
bookkeeping both runners share (the hold, idling, draining, stopping); the
publisher subclasses it and adds the public API and the publish runner. The
attributes below are set by ``Publisher.__init__``.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.jetstream._flight import (
    Flight,
    PublisherClosedError,
    PublisherError,
    RetryConfig,
    _call,
    _Future,
    _is_expectation,
    _set,
)
from jsclient.jetstream._window import Window
from jsclient.jetstream._wire import (
    PUBLISH_RETRY_WAIT,
    _pub_ack_fields,
    may_resend,
    status_reply_error,
)
from jsclient.jetstream._wire import parse_pub_ack as _parse_pub_ack

if TYPE_CHECKING:
    from jsclient._core import Core

_FAILED, _TIMED_OUT = 1, 2


class FlightsRunner:
    """Settling and the shared bookkeeping of a :class:`Publisher` (see the module docstring)."""

    # Set by Publisher.__init__ (see there).
    _client: Core
    retry: RetryConfig | None
    poll_time: float
    wait_timeout: float
    _on_published: Callable[..., None] | None
    _on_acked: Callable[..., None] | None
    _on_failed: Callable[..., None] | None
    _on_timeout: Callable[..., None] | None
    _on_retrying: Callable[..., None] | None
    _lock: threading.Lock
    _work: threading.Condition
    _flights: threading.Condition
    _idle: threading.Condition
    _queue: deque[Flight]
    _in_flight: set[Flight]
    _window: Window
    _done: deque[Flight]
    _timeline: deque[Flight]
    _retry_timeline: list[tuple[float, int, Flight, int]]
    _retries: list[tuple[float, int, Flight, bool]]
    _retry_ids: Iterator[int]
    _probe_after: float | None
    _last_reply: float
    _probe: Flight | None
    _probe_time: float
    _publishing: bool
    _settling: int
    _processing: bool
    _held: bool
    _lifted_at: int
    _lift_waiting: bool
    _flights_waiting: bool
    _draining: bool
    _stopped: bool
    _drained: bool
    _runners: set[str]
    _runner_idents: set[int]
    _threads: list[threading.Thread]
    _acked: int
    _failed: int
    _timed_out: int
    _retried: int

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
            if self._held and self._window.resumable():
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
        # Events thread: the acks of attempts sent before a disconnect are
        # lost with the connection. Fail each attempt whose token we take back
        # (a reply that got there first wins); a retry resends it with its id.
        # An attempt sent after the socket was lost sits in the reconnect
        # buffer and goes out on reconnect: it is left alone (the event may
        # come after such sends, and even after the reconnect).
        if event != "disconnected":
            return
        mux, lost_at = self._client._mux, self._client._lost_at
        for flight in list(self._in_flight):
            if flight.publish_time <= lost_at and mux.cancel(flight._token):
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
            if self._held and self._window.resumable():
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
    return hdr is not None and hdr.lower().find(b"nats-msg-id:") >= 0
