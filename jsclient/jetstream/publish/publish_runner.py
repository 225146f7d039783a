"""The managed publisher's publish runner: queued messages into the window, in batches.

:class:`PublishRunner` is the half of :class:`~jsclient.jetstream.publish.publisher.Publisher`
that takes queued messages in batches, registers and encodes them (while the
window is full, ahead of the lift) and writes each batch in one write, the
flights' ack clocks (the engine's sweep) running from before the write. See
the publisher's module docstring for the hold, the refill and the interrupt
rules.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from itertools import repeat
from typing import TYPE_CHECKING

from jsclient import errors
from jsclient.jetstream._wire import pub_headers as _pub_headers
from jsclient.jetstream.publish.flight import Flight, _call
from jsclient.jetstream.publish.state import PublisherState
from jsclient.protocol.headers import encode as encode_headers

if TYPE_CHECKING:
    from jsclient._mux import RequestBatch

_MSG_ID = "Nats-Msg-Id"
_BATCH = 128  # queued messages the publish runner takes per lock acquisition


class PublishRunner(PublisherState):
    """The publish runner of a :class:`Publisher` (see the module docstring)."""

    # Set by Publisher.__init__ (see there).
    max_in_flight: int
    refill_allowed_at: int
    hold_pause_time: float
    _on_paused: Callable[..., None] | None
    _on_resumed: Callable[..., None] | None
    _batch_sent: bool
    _pub_waiting: bool

    def publish_runner(self) -> None:
        """Publish queued messages until stopped or drained (run it on any thread).

        Safe to interrupt (KeyboardInterrupt): what it had taken and not sent
        goes back to the queue, and it may be run again.
        """
        self._enter("publish")
        try:
            self._recover_batch()  # an earlier run's, if its own recovery was cut short
            self._publish_loop()
        except BaseException as exc:
            self._runner_error = exc
            raise
        finally:
            try:
                self._recover_batch()
            finally:
                self._leave("publish")

    def _publish_loop(self) -> None:
        lock, queue, in_flight, window = self._lock, self._queue, self._pending, self._window
        taken, qwindow, popleft = self._batch, self._queue_window, deque.popleft
        holding = False  # paused() was reported and resumed() not yet
        # The next batch, registered and encoded while the window was full, so
        # that the lift only has to write it (the server's turn is our spare time).
        # Its flights are in self._batch.
        ahead: RequestBatch | None = None
        while True:
            resumed_at = paused_at = take = -1
            prepare = 0
            lift_wait = pub_wait = 0.0
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
                            self._batch_sent = False
                            # One C call: the flights are never only on the stack.
                            taken.extend(map(popleft, repeat(queue, prepare)))
                        else:
                            self._lift_waiting = True
                            lift_wait = self.hold_pause_time
                    else:
                        # The flights runner's signal and this check cannot both miss.
                        self._lift()
                if not prepare and not lift_wait:
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
                        self._batch_sent = False
                        taken.extend(map(popleft, repeat(queue, take)))
                    else:
                        self._pub_waiting = True
                        pub_wait = self.poll_time
            if lift_wait:
                self._work.wait(lift_wait)  # an ack lifting the hold, or stop/drain
                self._lift_waiting = False
                continue
            if pub_wait:
                self._work.wait(pub_wait)  # publish_async wakes it
                self._pub_waiting = False
            if prepare or take > 0:
                qwindow.released()  # publish_async calls waiting for room
            if prepare:
                ahead = self._prepare(list(taken))
                continue
            if resumed_at >= 0 and self._on_resumed is not None:
                _call(self._on_resumed, resumed_at, self.max_in_flight, self.refill_allowed_at)
            if ahead is not None:
                pending, ahead = ahead, None
                self._send_prepared(pending)
            elif take > 0:
                self._send_prepared(self._prepare(list(taken)))
            else:
                if self._flights_waiting and self._done:
                    self._wake_flights()  # acks that came while the window was full
                if paused_at >= 0 and self._on_paused is not None:
                    _call(self._on_paused, paused_at, self.max_in_flight, self.refill_allowed_at)
                continue
            with lock:
                if taken:  # stopped before the write: put back (and failed) by the caller
                    return
                self._publishing = False
                if not self._stopped and not self._held and window.full():
                    self._held = holding = True
                    paused_at = len(in_flight)
                self._check_drained()
            if self._flights_waiting and self._done:
                self._wake_flights()  # acks that came while the window was full
            if paused_at >= 0 and self._on_paused is not None:
                _call(self._on_paused, paused_at, self.max_in_flight, self.refill_allowed_at)

    def _recover_batch(self) -> None:
        """The publish runner ended (stopped, drained, or interrupted anywhere):
        put what it took and did not send back at the queue's front, its reply
        tokens forgotten (stop() then fails them); what it sent keeps its clock."""
        taken = self._batch
        if taken and not self._batch_sent:
            mux = self._client._mux
            back: list[Flight] = []
            for flight in taken:
                if flight._settled:
                    continue  # stop() failed it
                if flight.error is not None and flight.attempts:
                    # Refused before sending (_fail_unsent): the flights runner
                    # settles it; hand it over again in case the interrupt came
                    # first (a second delivery is skipped once it is settled).
                    flight.deliver(flight.error)
                    continue
                if flight._token is not None:
                    mux.cancel(flight._token)
                    flight._token = None
                self._pending.pop(flight, None)
                flight.attempts = flight._gen = 0
                flight.publish_time = flight._first_time = flight.deadline = 0.0
                back.append(flight)
            with self._lock:
                self._queue.extendleft(reversed(back))
                taken.clear()
        with self._lock:
            taken.clear()
            self._batch_sent = False
            self._publishing = False
            self._pub_waiting = self._lift_waiting = False
            self._check_drained()

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
        # (error first: _recover_batch tells these apart by it.)
        flight.error = exc
        flight.attempts = 1
        flight._first_time = flight.publish_time = time.monotonic()
        self._pending[flight] = None
        flight.deliver(exc)

    def _send_prepared(self, prepared: RequestBatch) -> None:
        """Write a prepared batch of first sends and start their ack clocks.

        The batch leaves self._batch only once it is in the window with its
        clocks running; from ``_batch_sent`` on, an interrupt leaves it there
        (a flight not written after all times out, or is retried).
        """
        flights: list[Flight] = prepared.sent
        if self._stopped:
            return  # the caller returns; _recover_batch puts the batch back
        if flights:
            self._pending.update(dict.fromkeys(flights))
            now = time.monotonic()
            due = now + self.wait_timeout
            for flight in flights:
                flight.attempts = flight._gen = 1
                flight._first_time = flight.publish_time = now
                flight.deadline = due  # the engine's ack clock (see settle.py)
            self._arm(self.wait_timeout)  # before the write: the ack may come first
            self._batch_sent = True
            failed = self._client._mux.write(prepared)
        else:
            failed = []
        self._batch.clear()
        self._batch_sent = False
        if flights:
            self._sent(flights, failed)

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
