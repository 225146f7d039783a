"""The managed publisher's shared state: what its two runners and its API all use.

:class:`PublisherState` is the base of :class:`~jsclient.jetstream.publish.publisher.Publisher`:
the async-publish engine (:class:`~jsclient.jetstream.publish.engine.PublishEngine`:
the window of flights in flight, in deadline order, its ack-timeout sweep and
its disconnect rule),
the bookkeeping both runners share (the hold, idling, draining, stopping, the
runner registry) and settling (counting, futures, listener calls). The
publish runner is :mod:`.publish_runner`, the flights runner :mod:`.settle`.
The attributes below are set by ``Publisher.__init__``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from jsclient._threads import Signal, Wake
from jsclient.jetstream.publish.engine import PublishEngine
from jsclient.jetstream.publish.flight import (
    Flight,
    PublisherClosedError,
    PublisherError,
    RetryConfig,
    _call,
    _Future,
    _set,
)

if TYPE_CHECKING:
    from jsclient.api import PubAck
    from jsclient.jetstream.publish.window import Window

_FAILED, _TIMED_OUT = 1, 2


class PublisherState(PublishEngine[Flight]):
    """The shared state and bookkeeping of a :class:`Publisher` (see the module docstring)."""

    # Set by Publisher.__init__ (see there); the engine's _client, _pending
    # (the flights published, or being published, with no PubAck yet; a failed
    # attempt stays until it is settled or retried) and _window too.
    retry: RetryConfig | None
    poll_time: float
    wait_timeout: float
    _on_published: Callable[..., None] | None
    _on_acked: Callable[..., None] | None
    _on_failed: Callable[..., None] | None
    _on_timeout: Callable[..., None] | None
    _on_retrying: Callable[..., None] | None
    _lock: threading.Lock
    _work: Wake
    _flights: Wake
    _idle: Signal  # drain() waiters, on _lock
    _queue: deque[Flight]
    _unsettled: dict[Flight, None]  # queued and not settled (changed under _lock)
    _queue_window: Window
    _done: deque[Flight]
    _expiring: deque[tuple[Flight, int]]
    _retry_timeline: list[tuple[float, int, Flight, int]]
    _retries: list[tuple[float, int, Flight, bool, int]]
    _handling: list[Flight]
    _batch: list[Flight]
    _rescue: bool
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
    _runners: dict[str, threading.Thread]
    _runner_idents: frozenset[int | None]
    _runner_error: BaseException | None
    _threads: list[threading.Thread]
    _acked: int
    _failed: int
    _timed_out: int
    _retried: int

    def _sent(self, flights: list[Flight], failed: list[tuple[Flight, BaseException]]) -> None:
        """After a write: fail what could not be sent, report the rest published."""
        if failed:
            i = 0
            try:
                for flight, exc in failed:
                    flight.deliver(exc)
                    i += 1
            finally:
                # An interrupt: the rest must reach the flights runner too (a
                # flight handed over twice is settled once).
                for flight, exc in failed[i:]:
                    flight.deliver(exc)
            lost = {id(f) for f, _ in failed}
            flights = [f for f in flights if id(f) not in lost]
        if flights and flights[-1]._wend <= self._conn.lost_written:
            # The socket was lost during the write: the disconnect event may
            # have looked before these knew their place.
            for flight in flights:
                self._check_sent(flight)
        # Report them published, claiming the whole batch at once (the flights
        # runner may claim one whose ack came first).
        claimed = _Future.complete_all(flights)
        if self._on_published is not None:
            for flight in claimed:
                _call(self._on_published, flight)

    def _settle(self, acked: list[Flight], settled: list[tuple[Flight, int]]) -> None:
        """Settle acked flights and failed / timed out ones: count them, free
        their window places, complete their futures and call the listener."""
        lock, pending, unsettled = self._lock, self._pending, self._unsettled
        mine: list[Flight] = []
        failed: list[tuple[Flight, int]] = []
        busy = 0
        # Counted in locals as each is marked, added to the totals in one step
        # (no call between, so no interrupt): after an interrupt part-way the
        # finally adds what was marked, so the totals still add up.
        n_acked = n_failed = n_timed_out = 0
        counted = False
        try:
            with lock:
                # Listed before marked: an interrupt leaves no flight marked
                # settled (which stop() skips) without its futures completing.
                # (Each loop's body ends with a plain statement: see
                # tests/unit/test_interrupt_cover.py.)
                for flight in acked:
                    if flight._settled:  # stop() got there first
                        continue
                    mine.append(flight)
                    flight._settled = True
                    n_acked += 1
                    pending.pop(flight, None)
                    unsettled.pop(flight, None)
                for flight, kind in settled:
                    if flight._settled:
                        continue
                    failed.append((flight, kind))
                    flight._settled = True
                    if kind == _FAILED:
                        n_failed += 1
                    else:
                        n_timed_out += 1
                    pending.pop(flight, None)
                    unsettled.pop(flight, None)
                self._acked += n_acked
                self._failed += n_failed
                self._timed_out += n_timed_out
                counted = True
                n = len(mine) + len(failed)
                self._settling += n
                busy = n
                if self._held and self._window.resumable():
                    self._lift()
            # A flight's _ack_future is read after _settled was set under the lock:
            # one made later completes itself (see Flight.publish_ack_future).
            self._complete(mine, failed)
        except BaseException:
            # An interrupt part-way: every future still completes (no hooks).
            for flight in mine:
                fut = flight._ack_future
                if fut is not None:
                    _set(fut, flight.ack)
                if not flight._lz_done:
                    _set(flight)
            for flight, _ in failed:
                fut = flight._ack_future
                if fut is not None:
                    _set(fut, exc=flight.error)
                if not flight._lz_done:
                    _set(flight, exc=flight.error)
            raise
        finally:
            with lock:
                if not counted:
                    self._acked += n_acked
                    self._failed += n_failed
                    self._timed_out += n_timed_out
                self._settling -= busy
                self._check_drained()

    def _complete(self, mine: list[Flight], failed: list[tuple[Flight, int]]) -> None:
        """Complete the settled flights' futures and call the listener."""
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

    # -- shared internals ----------------------------------------------------

    def _wake_flights(self) -> None:
        # Any thread, after appending to _done (Flight.deliver): the flights
        # runner re-checks the deque after announcing that it waits (see
        # publish_async), so either it sees the flight or we see the flag.
        with self._lock:
            if self._flights_waiting:
                self._flights_waiting = False
                self._flights.set()

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
        self._lifted_at = len(self._pending)
        if self._lift_waiting:
            self._lift_waiting = False
            self._work.set()

    def _is_idle(self) -> bool:
        # With the lock held.
        return not (
            self._queue
            or self._publishing
            or self._pending
            or self._done
            or self._retries
            or self._processing
            or self._settling
            or self._batch
            or self._handling
        )

    def _check_drained(self) -> bool:
        # With the lock held: True (and drain() woken) once a drain has finished.
        if not self._drained and self._draining and self._is_idle():
            self._drained = True
            self._idle.notify_locked()
            self._work.set()
            self._flights.set()
        return self._drained

    def _enter(self, runner: str) -> None:
        me = threading.current_thread()
        with self._lock:
            other = self._runners.get(runner)
            # The same thread again (an interrupt cut its run short before it
            # left) or a thread that died in it does not count.
            if other is not None and other is not me and other.is_alive():
                raise PublisherError(f"nats: the {runner} runner is already running")
            self._runners[runner] = me
            self._runner_idents = frozenset(t.ident for t in self._runners.values())

    def _leave(self, runner: str) -> None:
        with self._lock:
            if self._runners.get(runner) is threading.current_thread():
                del self._runners[runner]
            self._runner_idents = frozenset(t.ident for t in self._runners.values())
            self._check_drained()
            self._idle.notify_locked()  # drain() checks that the runners it needs run
        if self._stopped:
            self._abandon()

    def _live_runners(self) -> set[str]:
        # With the lock held: the runner kinds some live thread runs.
        return {kind for kind, t in self._runners.items() if t.is_alive()}

    def _join(self, timeout: float) -> None:
        me = threading.current_thread()
        for t in self._threads:
            if t is not me:
                t.join(timeout)

    def _abandon(self) -> None:
        """After stop(): fail every message not settled yet."""
        with self._lock:
            # The registry, not the containers: the runners and the reader move
            # flights between those without the lock (and a runner may hold some
            # only on its stack for a moment), so a look at them could miss one.
            flights = list(self._unsettled)
            self._unsettled.clear()
            self._queue.clear()
            self._pending.clear()
            victims = [(f, f._ack_future) for f in flights if not f._settled]
            mux = self._client._mux
            queued: list[Flight] = []
            for f, _ in victims:
                f._settled = True
                if f._token is None or not mux.cancel(f._token):  # a late reply finds no waiter
                    continue
                queued.append(f)  # last, not an if: see tests/unit/test_interrupt_cover.py
            # What is still in the reconnect buffer or the write queue is not sent
            # after the publisher failed it.
            self._withdraw(queued)
            for f, _ in victims:
                f._ack = None
                f.error = f._closed_by = PublisherClosedError(
                    "nats: the publisher stopped before the message was acked"
                )
            self._failed += len(victims)
            self._idle.notify_locked()
        self._queue_window.wake_all()
        i = 0
        try:
            for i, (f, fut) in enumerate(victims):  # noqa: B007
                _fail(f, fut)
        finally:
            for f, fut in victims[i:]:  # an interrupt part-way: complete the rest
                _fail(f, fut)

    def _lost(self, flight: Flight, exc: BaseException) -> None:
        # The engine's disconnect rule took the attempt's token back (events
        # thread): the flights runner decides (a flight with a Nats-Msg-Id is
        # sent again; see FlightsRunner._attempt_failed).
        flight._maybe = True
        flight.deliver(exc)


def _fail(flight: Flight, fut: _Future[PubAck] | None) -> None:
    """Complete ``flight`` and its ack future with its error. A function of its
    own: a loop inside a ``try`` whose body ends with an if is an interrupt past
    the ``finally`` on 3.13+ (tests/unit/test_interrupt_cover.py)."""
    exc = flight._closed_by  # not flight.error: a runner racing stop() may clear that
    if fut is not None:
        _set(fut, exc=exc)
    if not flight._lz_done:
        _set(flight, exc=exc)
