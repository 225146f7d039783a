"""What :class:`~jsclient.contrib.django.worker.Worker` runs: :class:`ConsumerRunner`
(one registered consumer and its handler threads) and :class:`ServiceRunner`
(the registered endpoints of one service). The worker module's docstring says
how each behaves, stops and fails.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any

from django.db import close_old_connections, connections, reset_queries

from jsclient import errors
from jsclient.contrib.django.connection import get_connection
from jsclient.contrib.django.consumers import ConsumerSpec
from jsclient.contrib.django.endpoints import EndpointSpec
from jsclient.jetstream.consume.consumer import Consumer
from jsclient.jetstream.consume.keepalive import KeepAlive
from jsclient.jetstream.consume.keepalive import resolve as keepalive_interval
from jsclient.jetstream.consume.pull import ConsumeContext
from jsclient.jetstream.context import JetStream
from jsclient.micro import Request, Service
from jsclient.msg import Msg

log = logging.getLogger("jsclient.contrib.django.worker")  # the worker's log

_POLL = 0.1  # how often waiting loops look at their flags (and let signal handlers run)
_STOP = object()


class WorkerError(Exception):
    """A consumer could not be started (missing stream, bind to a missing consumer...)."""


class ConsumerRunner:
    """One registered consumer: a ``consume()`` buffer feeding ``threads`` handler threads."""

    def __init__(self, spec: ConsumerSpec, js: JetStream, threads: int | None = None) -> None:
        self.spec = spec
        self.js = js
        self.threads = threads or spec.threads
        self._work: queue.Queue[Any] = queue.Queue(maxsize=self.threads)
        self._stopping = False
        self._cc: ConsumeContext | None = None
        self._handlers: list[threading.Thread] = []
        self._ka: KeepAlive | None = None
        self._finished = False
        self._count_lock = threading.Lock()
        self.acked = 0
        self.nakd = 0  # handler raised
        self.returned = 0  # not started when the worker stopped: nak'd without delay

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        consumer = self._declare()
        interval = keepalive_interval(self.spec.keepalive, consumer.cached_info)
        if interval is not None:
            self._ka = KeepAlive(get_connection(), interval, on_deadline=self._past_deadline)
            self._ka.start(lambda: self._finished)
        for i in range(self.threads):
            t = threading.Thread(
                target=self._handler_loop, name=f"jsclient-django-{self.spec.name}-{i}", daemon=True
            )
            t.start()
            self._handlers.append(t)
        try:
            # The library keeps the buffered messages alive (from their arrival
            # until _dispatch returns); self._ka those the worker has taken.
            self._cc = consumer.consume(
                self._dispatch,
                max_messages=self.spec.max_messages,
                error_cb=self._warn,
                keepalive=interval,
            )
        except BaseException:
            self._stopping = True
            self.stopped()  # the handler threads get their stop marks
            raise
        spec = self.spec
        log.info(
            "consumer %s: stream %s, durable %s, filter %s, %d thread(s), buffer %d, "
            "keep-alive %s -> %s",
            spec.name,
            spec.stream,
            spec.durable,
            spec.filter_subject or "(none)",
            self.threads,
            spec.max_messages,
            "off" if interval is None else f"every {interval:.2f} s",
            spec.handler_path,
        )

    def _declare(self) -> Consumer:
        spec = self.spec
        if spec.bind:
            try:
                return self.js.consumer(spec.stream, spec.durable)
            except errors.NotFoundError as exc:
                raise WorkerError(
                    f"consumer {spec.name}: durable {spec.durable!r} of stream {spec.stream!r} "
                    f"does not exist (bind=True uses an existing consumer): {exc}"
                ) from None
        fields: dict[str, Any] = dict(spec.config)
        fields["durable_name"] = spec.durable
        fields["ack_policy"] = "explicit"
        if spec.filter_subject:
            fields["filter_subject"] = spec.filter_subject
        try:
            return self.js.create_or_update_consumer(spec.stream, **fields)
        except errors.StreamNotFoundError:
            raise WorkerError(
                f"consumer {spec.name}: stream {spec.stream!r} does not exist; "
                "create it before starting the worker"
            ) from None
        except errors.APIError as exc:
            raise WorkerError(
                f"consumer {spec.name}: cannot create or update durable {spec.durable!r} "
                f"on stream {spec.stream!r}: {exc}"
            ) from None

    @property
    def failed(self) -> BaseException | None:
        """Why the consume ended on its own (consumer deleted, connection closed), or None."""
        cc = self._cc
        if cc is None or self._stopping or not cc.closed:
            return None
        return cc.error or errors.Error("nats: consume ended")

    @property
    def dead_handlers(self) -> list[str]:
        """Handler threads that ended while the worker runs (none when all is well)."""
        if self._stopping:
            return []
        return [t.name for t in self._handlers if not t.is_alive()]

    def begin_stop(self) -> None:
        """Stop pulling; buffered messages go back to the server, messages in hand finish."""
        self._stopping = True
        cc = self._cc
        if cc is not None:
            cc.drain()  # the dispatcher sees the buffered rest and nak's it (_dispatch)

    def stopped(self) -> bool:
        """Poll after ``begin_stop``: True once every handler thread has finished."""
        cc = self._cc
        if cc is not None and not cc.closed:
            return False
        if any(t.is_alive() for t in self._handlers):
            # The dispatcher is done: no more puts, so the stop marks go in behind
            # whatever is queued (nak'd by the handler threads, see _handler_loop).
            while True:
                try:
                    self._work.put_nowait(_STOP)
                except queue.Full:
                    break
        if any(t.is_alive() for t in self._handlers):
            return False
        self._finished = True
        if self._ka is not None:
            self._ka.close()
        return True

    # -- consume's dispatcher thread ---------------------------------------

    def _dispatch(self, msg: Msg) -> None:
        if self._ka is not None:
            self._ka.hold(msg)  # until a handler thread settles it
        while not self._stopping:
            try:
                self._work.put(msg, timeout=_POLL)
                return
            except queue.Full:
                continue
        self._give_back(msg)

    def _warn(self, exc: BaseException) -> None:
        log.warning("consumer %s: %s", self.spec.name, exc)

    # -- handler threads ----------------------------------------------------

    def _handler_loop(self) -> None:
        msg: Any = None
        try:
            while True:
                try:
                    # Bounded only so no wait is unbounded: the exit is the _STOP mark.
                    msg = self._work.get(timeout=_POLL)
                except queue.Empty:
                    continue
                if msg is _STOP:
                    return
                if self._stopping:
                    self._give_back(msg)
                else:
                    self._handle(msg)
                msg = None
        except BaseException:
            # _handle catches everything the handler raises: this is a bug of the
            # worker itself. The thread ends; serve() sees it and exits with 1.
            log.critical(
                "consumer %s: handler thread %s failed and ends; the worker stops",
                self.spec.name,
                threading.current_thread().name,
                exc_info=True,
            )
            if msg is not None and msg is not _STOP:
                with contextlib.suppress(BaseException):
                    self._give_back(msg)
        finally:
            # This thread's database connections (Django keeps one per thread).
            with contextlib.suppress(BaseException):
                connections.close_all()

    def _handle(self, msg: Msg) -> None:
        spec = self.spec
        ka = self._ka
        if ka is not None and spec.deadline is not None:
            ka.hold(msg, time.monotonic() + spec.deadline)
        try:
            # What Django does at request_started / request_finished.
            reset_queries()
            close_old_connections()
            spec.handler(msg)
        except BaseException:
            # BaseException too: SystemExit, or asyncio.CancelledError from
            # async_to_sync code, would otherwise end this thread with the
            # message neither acked nor nak'd.
            self._on_failure(msg)
        else:
            try:
                msg.ack()
            except errors.Error as exc:
                log.warning("consumer %s: could not ack %s: %s", spec.name, _where(msg), exc)
            with self._count_lock:
                self.acked += 1
        finally:
            if ka is not None:
                ka.release(msg)
            try:
                close_old_connections()
            except Exception:
                log.warning("consumer %s: could not close database connections", spec.name)

    def _on_failure(self, msg: Msg) -> None:
        spec = self.spec
        delay = spec.nak_delay
        log.exception(
            "consumer %s: handler %s raised on %s; nak, redelivery in %.1f s",
            spec.name,
            spec.handler_path,
            _where(msg),
            delay,
        )
        try:
            msg.nak(delay=delay if delay > 0 else None)
        except errors.Error as exc:
            log.warning("consumer %s: could not nak %s: %s", spec.name, _where(msg), exc)
        with self._count_lock:
            self.nakd += 1

    def _past_deadline(self, msg: Msg) -> None:
        # On the connection's timer thread: log only.
        log.warning(
            "consumer %s: handler %s still runs on %s after its deadline of %.1f s; "
            "no more keep-alive: the server redelivers it after ack_wait",
            self.spec.name,
            self.spec.handler_path,
            _where(msg),
            self.spec.deadline or 0.0,
        )

    def _give_back(self, msg: Msg) -> None:
        if self._ka is not None:
            self._ka.release(msg)
        try:
            msg.nak()
        except errors.Error as exc:
            log.debug("consumer %s: could not return %s: %s", self.spec.name, _where(msg), exc)
        with self._count_lock:
            self.returned += 1


def _where(msg: Msg) -> str:
    try:
        meta = msg.metadata
    except errors.Error:
        return f"message on {msg.subject}"
    return (
        f"stream {meta.stream} sequence {meta.sequence.stream} "
        f"(delivery {meta.num_delivered}, subject {msg.subject})"
    )


class ServiceRunner:
    """The registered endpoints of one service name and version, as one service."""

    def __init__(self, specs: Sequence[EndpointSpec], threads: int | None = None) -> None:
        self.specs = list(specs)
        self.name = specs[0].service
        self.version = specs[0].version
        self.threads = threads
        self.service: Service | None = None
        self._stopping = False
        self._stopper: threading.Thread | None = None

    def start(self) -> None:
        description = next((s.description for s in self.specs if s.description), None)
        svc = get_connection().add_service(self.name, self.version, description=description)
        self.service = svc
        try:
            for spec in self.specs:
                ep = svc.add_endpoint(
                    spec.name,
                    self._wrap(spec),
                    subject=spec.subject,
                    queue_group=spec.queue_group,
                    metadata=spec.metadata,
                    threads=self.threads or spec.threads,
                )
                log.info(
                    "endpoint %s: service %s %s, subject %s, queue %s, %d thread(s) -> %s",
                    spec.key,
                    self.name,
                    self.version,
                    ep.subject,
                    ep.queue_group or "(none)",
                    ep.threads,
                    spec.handler_path,
                )
        except BaseException:
            self._stopping = True
            with contextlib.suppress(BaseException):
                svc.stop(timeout=5.0)
            raise

    @staticmethod
    def _wrap(spec: EndpointSpec) -> Any:
        handler = spec.handler

        def handle(req: Request) -> None:
            # What Django does at request_started / request_finished.
            reset_queries()
            close_old_connections()
            try:
                handler(req)
            finally:
                try:
                    close_old_connections()
                except Exception:
                    log.warning("endpoint %s: could not close database connections", spec.key)

        return handle

    @property
    def failed(self) -> bool:
        """True when the service stopped on its own (the connection closed)."""
        svc = self.service
        return svc is not None and not self._stopping and svc.stopped

    def begin_stop(self) -> None:
        """Drain the service on a thread of its own: requests received are answered."""
        self._stopping = True
        svc = self.service
        if svc is None or self._stopper is not None:
            return
        t = threading.Thread(
            target=self._stop, args=(svc,), name=f"jsclient-django-stop-{self.name}", daemon=True
        )
        self._stopper = t
        t.start()

    def _stop(self, svc: Service) -> None:
        try:
            svc.stop(timeout=None)
        except BaseException:
            log.exception("service %s: could not stop cleanly", self.name)

    def stopped(self) -> bool:
        """Poll after ``begin_stop``: True once the requests in hand are answered."""
        return self._stopper is None or not self._stopper.is_alive()

    def report(self) -> None:
        if self.service is None:
            return
        for es in self.service.stats().endpoints:
            log.info(
                "endpoint %s.%s: %d request(s), %d error(s)",
                self.name,
                es.name,
                es.num_requests,
                es.num_errors,
            )
