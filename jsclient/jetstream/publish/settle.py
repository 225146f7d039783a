"""The managed publisher's settling side: the flights runner.

:class:`FlightsRunner` is the half of :class:`~jsclient.jetstream.publish.publisher.Publisher`
that settles flights: replies handed over by the reader, ack timeouts, the
engine's 503 rule on the publisher's own heap, retries, stall probes. It runs
with the engine's disconnect listener registered. The state it shares with the
publish runner is :class:`~jsclient.jetstream.publish.state.PublisherState`.

Ack timeouts are the engine's sweep (:meth:`PublishEngine._arm`): every send
(first, retry, 503 re-send) sets ``flight.deadline = publish_time +
wait_timeout`` and joins the end of the engine's pending dict (a re-send is
popped and inserted again), so with one ``wait_timeout`` for all the dict stays
in deadline order; a stall probe and the re-sends after it keep their attempt's
deadline and their place. The sweep, on the timer thread, settles nothing: its
:meth:`FlightsRunner._expired` hands ``(flight, send generation)`` to the
flights runner the way replies are handed over, and the runner decides there
(:meth:`FlightsRunner._clocks`: the token taken back, or one re-check a wait
later, then retry or ``listener.timeout``). The rescue clocks of an interrupted
runner and those re-checks stay on the runner's own heap.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from itertools import repeat
from typing import Any

from jsclient import errors
from jsclient.jetstream._wire import PUBLISH_RETRY_WAIT, may_resend
from jsclient.jetstream._wire import _pub_ack_fields as _plain_ack
from jsclient.jetstream.publish.engine import ack_timeout_error, decode_reply
from jsclient.jetstream.publish.flight import _NOTHING, Flight, _call, _Future, _is_expectation
from jsclient.jetstream.publish.state import _FAILED, _TIMED_OUT, PublisherState
from jsclient.msg import Msg


class FlightsRunner(PublisherState):
    """Settling the flights of a :class:`Publisher` (see the module docstring)."""

    def _resend(self, flights: list[Flight], due: float) -> None:
        """Publish retries and 503 re-sends in one write; their ack clocks run to ``due``."""
        if flights:
            self._resend_same([(flight, due) for flight in flights])

    def _resend_same(self, pairs: list[tuple[Flight, float]]) -> None:
        """Send flights again in one write, each with its own ack deadline (retries,
        503 re-sends, stall probes and the re-sends after a probe was acked)."""
        flights = [f for f, _ in pairs]
        pending = self._pending
        # Back in the window (a flight whose reply looked like an ack but was
        # not may have left it), at its end with a new deadline: the engine's
        # sweep needs the dict in deadline order. Under the lock: the publish
        # runner must not see the window one short in between.
        with self._lock:
            try:
                for flight, due in pairs:
                    if flight.deadline != due or flight not in pending:
                        pending.pop(flight, None)
                        pending[flight] = None
                    flight.deadline = due  # first: a sweep never pairs a past one with the new send
                    flight._wend = 0  # not written yet: the old send's place is not the new one's
                    flight._gen += 1
            finally:
                pending.update(dict.fromkeys(flights))  # an interrupt mid-move loses none
        # before the write: the ack may come first
        self._arm(min(due for _, due in pairs) - time.monotonic())
        self._sent(flights, self._client._mux.send_batch(flights))

    def _expired(self, flight: Flight) -> None:
        # Timer thread (the engine's sweep): hand the overdue send to the
        # flights runner, as Flight.deliver hands replies over; settle nothing.
        if self._stopped:
            return
        self._expiring.append((flight, flight._gen))
        if self._flights_waiting:
            self._wake_flights()

    # -- flights runner ------------------------------------------------------

    def flights_runner(self) -> None:
        """Settle published messages until stopped or drained (run it on any thread).

        Safe to interrupt (KeyboardInterrupt): what it had decided is settled,
        what it had not looked at is handed back, and it may be run again.
        """
        self._enter("flights")
        self._client._add_listener(self._on_conn_event)
        try:
            if self._rescue:
                self._rearm()
            self._flights_loop()
        except BaseException as exc:
            self._runner_error = exc
            raise
        finally:
            try:
                self._client._remove_listener(self._on_conn_event)
                with self._lock:
                    self._retries.clear()
                    self._processing = self._flights_waiting = False
            finally:
                self._leave("flights")

    def _flights_loop(self) -> None:
        lock, done, expiring = self._lock, self._done, self._expiring
        while not self._stopped:
            if not done and not expiring:
                with lock:
                    if self._stopped or self._check_drained():
                        return
                    self._flights_waiting = True
                    wait = self._next_wake() - time.monotonic()
                # re-check: acks and timeouts are appended without the lock
                if wait > 0 and not done and not expiring:
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
        if self._retry_timeline:
            wake = min(wake, self._retry_timeline[0][0])
        if self._retries:
            wake = min(wake, self._retries[0][0])
        return wake

    def _rearm(self) -> None:
        """The flights runner was interrupted: a flight it was handling may have
        lost its ack clock or its reply. Give every flight in the window a clock
        at its deadline; one found then with no reply coming is timed out."""
        self._rescue = False
        with self._lock:
            flights = list(self._pending)
        timeline, ids, wait = self._retry_timeline, self._retry_ids, self.wait_timeout
        for f in flights:
            # A negative generation marks a rescue clock (see _process).
            heapq.heappush(timeline, (f.publish_time + wait, next(ids), f, -f._gen - 1))

    def _process(self) -> None:
        now = time.monotonic()
        acked: list[Flight] = []
        settled: list[tuple[Flight, int]] = []  # the failed and timed out
        replied: list[Flight] = []
        again: list[Flight] = []
        done, work = self._done, self._handling
        resume = False
        try:
            if done:
                self._last_reply = now
                # One C call: a flight is in _done or in _handling, never only on the stack.
                work.extend(map(deque.popleft, repeat(done, len(done))))
            for flight in work:
                reply = flight._reply
                if flight._settled:
                    flight._reply = _NOTHING
                    continue  # abandoned by stop()
                if reply is _NOTHING:
                    # Left by an interrupted run that had decided it: only an
                    # ack needs settling here (a failure kept its window place,
                    # and the rescue clocks find it).
                    if flight._ack is not None:
                        acked.append(flight)
                        if not flight._lz_done:
                            replied.append(flight)
                    continue
                flight._token = None
                r: Any  # the ack (PubAck, or (stream, seq) of a plain one) or the error
                if type(reply) is Msg:
                    if not flight._lz_done:
                        replied.append(flight)  # the reply beat the publish runner's report
                    # The engine's ack matching; its first step (the plain ack) inline.
                    data = reply.data
                    r = _plain_ack(data) if data else None
                    if r is None:
                        r = decode_reply(flight.subject, reply)
                else:  # an error handed over (a disconnect), or None: the connection closed
                    r = reply if reply is not None else errors.ConnectionClosedError()
                if type(r) is tuple or not isinstance(r, BaseException):
                    flight._ack = r  # a plain ack's (stream, seq): the PubAck is made when read
                    if flight.error is not None:
                        flight.error = None  # of an earlier attempt
                    if flight is self._probe:
                        resume = True
                    acked.append(flight)
                elif not self._resent_503(flight, r, reply, now):
                    self._attempt_failed(flight, r, now, settled)
                # Decided (and recorded) first, marked after: an interrupt in
                # between decides it twice, which settles or sends it once.
                flight._reply = _NOTHING
            work.clear()
            self._clocks(now, settled)
            probe_after = self._probe_after
            if probe_after is not None and not self._stopped:
                if resume:
                    self._resume_stalled()
                elif (
                    now - self._last_reply >= probe_after and now - self._probe_time >= probe_after
                ):
                    self._send_probe(now, probe_after)
            heap = self._retries
            if heap and heap[0][0] <= now and not self._stopped:
                seen: set[Flight] = set()
                while True:  # the test inside: see tests/unit/test_interrupt_cover.py
                    if not heap or heap[0][0] > now:
                        break
                    _, _, flight, new_attempt, gen = heapq.heappop(heap)
                    # Stale: settled, sent since, or a second entry for one send.
                    if flight._settled or flight._gen != gen or flight in seen:
                        continue
                    seen.add(flight)
                    if new_attempt:
                        flight.attempts += 1
                        flight._resends = 0
                    flight.publish_time = now
                    again.append(flight)
                self._resend(again, now + self.wait_timeout)
                again = []
            if replied:
                # Published, whatever the reply says: report it before settling.
                if self._on_published is None:
                    _Future.complete_all(replied)
                else:
                    for flight in replied:
                        self._announce(flight)
            if acked or settled:
                self._settle(acked, settled)
        except BaseException:
            self._interrupted(acked, settled, replied, again, now)
            raise

    def _interrupted(
        self,
        acked: list[Flight],
        settled: list[tuple[Flight, int]],
        replied: list[Flight],
        again: list[Flight],
        now: float,
    ) -> None:
        """An exception (an interrupt) went through _process: lose nothing. What
        was not looked at goes back to _done, what was decided is settled, a
        retry taken and not sent is scheduled again; the restarted runner
        re-arms every ack clock (_rearm)."""
        self._rescue = True
        work, done = self._handling, self._done
        rest = [f for f in work if f._reply is not _NOTHING and not f._settled]
        done.extendleft(reversed(rest))
        work.clear()
        ids = self._retry_ids
        for flight in again:
            if flight._token is None and not flight._settled:
                # (its attempt was counted already: not a new attempt)
                heapq.heappush(self._retries, (now, next(ids), flight, False, flight._gen))
        _Future.complete_all(replied)
        if acked or settled:
            self._settle(acked, settled)

    def _clocks(self, now: float, settled: list[tuple[Flight, int]]) -> None:
        """Time out the sends whose ack is overdue: those the engine's sweep
        handed over, then the re-checks and rescue clocks on the own heap."""
        expiring = self._expiring
        n = len(expiring)  # then the time: these were all due by then
        at = time.monotonic() if n else 0.0
        for _ in range(n):
            flight, gen = expiring[0]
            # Stale (settled, or sent since: a sweep that read the old deadline
            # may pair it with the new send), or handed over twice (a later
            # sweep came first): deadline 0.0 marks the clock as used.
            if flight._gen == gen and not flight._settled and 0.0 < flight.deadline <= at:
                flight.deadline = 0.0
                if flight._token is not None:  # else its reply is being handled
                    self._expire(flight, now, settled)
            expiring.popleft()  # after: an interrupt before it leaves the rescue clocks
        later = self._retry_timeline
        while later:
            deadline, _, flight, gen = later[0]
            rescue = gen < 0
            if rescue:
                gen = -gen - 1
            if flight._gen != gen or flight._settled or (flight._token is None and not rescue):
                heapq.heappop(later)
            elif deadline > now:
                break
            else:
                heapq.heappop(later)
                if flight._token is None:
                    self._orphaned(flight, now, settled)
                else:
                    self._expire(flight, now, settled)

    def _orphaned(self, flight: Flight, now: float, settled: list[tuple[Flight, int]]) -> None:
        """A rescue clock found a flight with no reply to wait for: unless it is
        on its way (in _done, or a retry is due), its handling was lost to an
        interrupt: time it out like a lost ack."""
        if flight._ack is not None:
            return  # acked in this round, settled at its end
        if flight in self._done or flight in self._handling:
            return
        if any(e[2] is flight for e in self._retries):
            return
        self._time_out(flight, now, settled)

    def _waiting(self) -> list[tuple[Flight, float]]:
        """Every send still waiting for its reply, with its ack deadline."""
        return [(f, f.deadline) for f in list(self._pending) if f.deadline and f._token is not None]

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

    def _resent_503(self, flight: Flight, exc: BaseException, reply: Any, now: float) -> bool:
        """The engine's 503 rule, on the flights runner's own heap: True if the
        reply was a 503 that the flight is sent again for."""
        if (
            self._stopped
            or not isinstance(exc, errors.NoStreamResponseError)
            or not self._counts_503(flight, getattr(reply, "status", None))
        ):
            return False
        entry = (now + PUBLISH_RETRY_WAIT, next(self._retry_ids), flight, False, flight._gen)
        heapq.heappush(self._retries, entry)
        return True

    def _expire(self, flight: Flight, now: float, settled: list[tuple[Flight, int]]) -> None:
        """The send's ack is overdue: time it out, unless its reply just came."""
        claimed = self._claim([flight])  # the token back, the frame withdrawn if queued
        # The reply is on its way here when the token is gone (or the send
        # failed and is being handed over). Look again one wait later: a token
        # taken by a thread that an interrupt stopped before it handed the
        # flight over never delivers, and the flight then times out.
        if not claimed and flight._overdue != flight._gen:
            flight._overdue = flight._gen
            heapq.heappush(
                self._retry_timeline,
                (now + self.wait_timeout, next(self._retry_ids), flight, flight._gen),
            )
            return
        flight._token = None
        self._time_out(flight, now, settled, bool(claimed) and claimed[0][1])

    def _time_out(
        self, flight: Flight, now: float, settled: list[tuple[Flight, int]], gone: bool = False
    ) -> None:
        """No reply will come for the flight's send: retry it, or time it out.
        ``gone``: the send was withdrawn from the queue (never sent), so the
        error is true: never sent, or sent with an unknown outcome."""
        sent = flight._maybe = flight._maybe or not gone
        error = ack_timeout_error(flight.subject, self.wait_timeout, sent)
        # A send that never left is retried like a 503; with a Nats-Msg-Id a
        # retry is safe too (the stream drops a second copy).
        if (not sent or _has_msg_id(flight)) and self._retried_later(flight, error, now):
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
        elif self._retried_later(flight, exc, now) or self._send_again(flight, exc, now):
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
        heapq.heappush(self._retries, (due, next(self._retry_ids), flight, True, flight._gen))
        self._retried += 1
        if self._on_retrying is not None:
            _call(self._on_retrying, flight)
        return True

    def _send_again(self, flight: Flight, exc: BaseException, now: float) -> bool:
        """A send lost with its connection, no retry left or none configured: a
        flight with a Nats-Msg-Id goes out again in the same attempt (twice at
        most, as 503s), since the stream's duplicate window makes that safe."""
        if (
            self._stopped
            or not isinstance(exc, errors.PublishDisconnectedError)
            or not _has_msg_id(flight)
            or not may_resend(flight._resends)
        ):
            return False
        flight._resends += 1
        heapq.heappush(self._retries, (now, next(self._retry_ids), flight, False, flight._gen))
        return True


def _has_msg_id(flight: Flight) -> bool:
    hdr = flight._hdr
    return hdr is not None and hdr.lower().find(b"nats-msg-id:") >= 0
