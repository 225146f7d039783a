"""The worker behind ``manage.py jetstream_worker``: runs registered consumers and
service endpoints until told to stop.

Per consumer (:class:`ConsumerRunner`):

- the durable pull consumer is created, or updated to the registered
  configuration (ack policy explicit); with ``bind=True`` it must exist;
- ``consume()`` (ADR-37) keeps up to ``max_messages`` buffered and hands them,
  one at a time, to ``threads`` handler threads through a queue as long as
  the thread count, so the buffer is what decides how far the worker pulls
  ahead;
- around each message the handler thread closes stale database connections
  and resets the query log, as Django does around a request; a message is
  acked when the handler returns and nak'd with ``nak_delay`` when it raises
  (logged with its stream sequence) -- any ``BaseException`` too (``SystemExit``,
  ``asyncio.CancelledError`` from ``async_to_sync`` code): the thread goes on;
- keep-alive (``keepalive=True``, the default): every message the worker holds
  gets ``+WPI`` every third of the consumer's ``ack_wait`` -- in the consume
  buffer (``consume(keepalive=...)``), waiting for a thread, and in a handler --
  so no message is redelivered while it waits or is worked on; past the
  consumer's ``deadline`` a handler's message is no longer kept alive (logged)
  and the server redelivers it after ``ack_wait``.

:meth:`Worker.serve` exits with status 1 when a consumer ends on its own or
one of its handler threads has ended (a bug outside the handler: logged as
CRITICAL): a process manager restarts the worker, rather than it running on
with fewer threads than it was given.

Stopping (the first SIGTERM/SIGINT, or :meth:`Worker.request_stop`): no more
pulls; messages buffered but not started are nak'd without delay, so they are
redelivered at once (to another worker, or this one after a restart);
messages in hand finish and are acked; the acks are flushed to the server;
then the exit status is 0. A message the server had already sent when the
pull inbox closed is redelivered after the consumer's ``ack_wait``. A second
signal exits at once (status 128 + signal number): messages in hand are then
redelivered after ``ack_wait``.

Endpoints (``@endpoint``, :class:`ServiceRunner`): the endpoints of one
service name and version make one service (``nc.add_service``), each
endpoint with its own handler threads. Around each request the handler
thread resets the query log and closes stale database connections, as for a
message. A handler that raises (any ``BaseException``) is logged and
answers 500 (the service does that). Stopping drains the services beside
the consumers: no new requests, the requests already received are answered.
A service that stops on its own (the connection closed) makes
:meth:`Worker.serve` exit with status 1.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Iterator, Sequence
from types import FrameType

from jsclient import errors
from jsclient.contrib.django.connection import get_connection, get_jetstream
from jsclient.contrib.django.consumers import ConsumerSpec
from jsclient.contrib.django.endpoints import EndpointSpec
from jsclient.contrib.django.runners import _POLL, ConsumerRunner, ServiceRunner, WorkerError

log = logging.getLogger("jsclient.contrib.django.worker")

__all__ = ["ConsumerRunner", "ServiceRunner", "Worker", "WorkerError"]

_REPORT_EVERY = 10.0  # while stopping, how often to log the consumers still busy


class Worker:
    """Runs consumers and endpoints on this process's connection until :meth:`request_stop`
    or a signal."""

    def __init__(
        self,
        specs: Sequence[ConsumerSpec] = (),
        *,
        endpoints: Sequence[EndpointSpec] = (),
        threads: int | None = None,
    ) -> None:
        if not specs and not endpoints:
            raise WorkerError("no consumers or endpoints to run")
        self.specs = list(specs)
        self.endpoints = list(endpoints)
        self.threads = threads
        self.runners: list[ConsumerRunner] = []
        self.services: list[ServiceRunner] = []
        self._stop_requested = False
        self._signals = 0
        self._stop_signal: int | None = None  # set by the first signal, logged by serve()

    def start(self) -> None:
        """Declare every consumer and start consuming, start the services (all or none)."""
        groups: dict[tuple[str, str], list[EndpointSpec]] = {}
        for ep in self.endpoints:
            groups.setdefault((ep.service, ep.version), []).append(ep)
        try:
            if self.specs:
                js = get_jetstream()
                for spec in self.specs:
                    runner = ConsumerRunner(spec, js, self.threads)
                    runner.start()
                    self.runners.append(runner)
            for group in groups.values():
                service = ServiceRunner(group, self.threads)
                self.services.append(service)
                service.start()
        except BaseException:
            self._stop_all()
            raise
        log.info(
            "jetstream worker running %d consumer(s), %d endpoint(s) (pid %d)",
            len(self.runners),
            len(self.endpoints),
            os.getpid(),
        )

    def request_stop(self) -> None:
        """Ask :meth:`serve` to stop gracefully (any thread; it only sets a flag)."""
        self._stop_requested = True

    def serve(self) -> int:
        """Block until a stop is requested or a consumer fails; stop gracefully.

        Returns the exit status: 0 after a requested stop, 1 when a consumer
        ended by itself or a handler thread ended.
        """
        status = 0
        while not self._stop_requested:
            failed = [(r, exc) for r in self.runners if (exc := r.failed) is not None]
            if failed:
                for r, exc in failed:
                    log.error("consumer %s stopped by itself: %s", r.spec.name, exc)
                status = 1
                break
            dead = [(r, names) for r in self.runners if (names := r.dead_handlers)]
            if dead:
                for r, names in dead:
                    log.error(
                        "consumer %s: handler thread(s) %s ended; stopping the worker "
                        "(exit status 1) so that it is restarted",
                        r.spec.name,
                        ", ".join(names),
                    )
                status = 1
                break
            gone = [s for s in self.services if s.failed]
            if gone:
                for s in gone:
                    log.error("service %s stopped by itself (connection closed)", s.name)
                status = 1
                break
            time.sleep(_POLL)
        if self._stop_signal is not None:
            log.info(
                "%s: stopping gracefully (send it again to exit at once)",
                signal.Signals(self._stop_signal).name,
            )
        self._stop_all()
        return status

    def _stop_all(self) -> None:
        log.info(
            "jetstream worker stopping: no more pulls or requests, finishing the messages "
            "and requests in hand"
        )
        for r in self.runners:
            r.begin_stop()
        for s in self.services:
            s.begin_stop()
        # No deadline (messages in hand finish), but a hung handler shows in the log.
        started = time.monotonic()
        report_at = started + _REPORT_EVERY
        while busy := [r.spec.name for r in self.runners if not r.stopped()] + [
            f"service {s.name}" for s in self.services if not s.stopped()
        ]:
            now = time.monotonic()
            if now >= report_at:
                log.warning(
                    "jetstream worker still waiting after %.0f s for %s "
                    "to finish the messages and requests in hand",
                    now - started,
                    ", ".join(busy),
                )
                report_at = now + _REPORT_EVERY
            time.sleep(_POLL)
        try:
            get_connection().flush(timeout=5.0)  # the acks are on the server before we exit
        except errors.Error as exc:
            log.warning("could not confirm the last acks with the server: %s", exc)
        for r in self.runners:
            log.info(
                "consumer %s: %d acked, %d nak'd on errors, %d returned unstarted",
                r.spec.name,
                r.acked,
                r.nakd,
                r.returned,
            )
        for s in self.services:
            s.report()
        log.info("jetstream worker stopped")

    # -- signals -------------------------------------------------------------

    @contextlib.contextmanager
    def signal_handlers(self) -> Iterator[None]:
        """SIGTERM/SIGINT: the first stops gracefully, a second exits at once."""
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Runs in the main thread between two bytecodes: only flags here (the
        # main thread may hold any lock, be inside logging); serve() logs the
        # first signal. The second logs and exits at once, whatever the log does.
        self._signals += 1
        if self._signals > 1:
            try:
                log.warning("%s again: exiting at once", signal.Signals(signum).name)
            finally:
                os._exit(128 + signum)
        self._stop_signal = signum
        self.request_stop()
