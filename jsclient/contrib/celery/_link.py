"""The NATS side of one kombu connection: the client, the queues' streams, the keep-alive.

A kombu ``Connection`` makes one transport, which makes one :class:`Link`
when it connects: one :class:`jsclient.Client` (reader and flusher threads,
reconnects of its own), its JetStream context, the shared exchange tables
(:mod:`._bindings`), the ready buffer ``drain_events`` waits on, and one
:class:`~jsclient.jetstream.consume.keepalive.KeepAlive` for every message
the connection holds: pulled and buffered, in a worker's hands, or waiting
for its ETA. The keep-alive sends ``+WPI`` every third of ``ack_wait`` from
the connection's timer thread, never behind a task, so a message is not
redelivered while its worker lives, however long it holds it.

Each durable queue is a work-queue stream (file storage) with one durable
pull consumer, ``workers``, shared by every worker (explicit acks,
``ack_wait`` as the visibility timeout). Both are made (or updated) the
first time this connection needs them, and made again if they were deleted.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import jsclient
from jsclient import errors
from jsclient.client import Client
from jsclient.contrib.celery._bindings import Bindings
from jsclient.contrib.celery._config import TransportOptions
from jsclient.contrib.celery._corequeue import CoreQueue
from jsclient.contrib.celery._flow import Ready
from jsclient.jetstream.consume.consumer import Consumer
from jsclient.jetstream.consume.keepalive import PER_ACK_WAIT, KeepAlive
from jsclient.msg import Msg

log = logging.getLogger("jsclient.contrib.celery")

#: The one durable consumer of each queue's stream.
CONSUMER = "workers"
#: Seconds ``close`` lets open pulls and buffered acks finish.
DRAIN_TIMEOUT = 5.0


@dataclass
class QueueInfo:
    """What this connection knows of a queue it declared."""

    durable: bool = True
    auto_delete: bool = False
    exclusive: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def transient(self) -> bool:
        """Not durable and gone with its consumer: fed by core NATS, never a stream."""
        return not self.durable and (self.auto_delete or self.exclusive)


def connect_kwargs(client: Any, opts: TransportOptions) -> dict[str, Any]:
    """``jsclient.connect`` arguments from a kombu connection's URL parts and options."""
    host = client.hostname or "127.0.0.1"
    port = client.port or 4222
    scheme = "tls" if client.ssl else "nats"
    kwargs: dict[str, Any] = {
        "servers": f"{scheme}://{host}:{port}",
        "name": f"celery-{os.getpid()}",
        "connect_timeout": float(client.connect_timeout or 2.0),
    }
    user, password = client.userid, client.password
    if user and password:
        kwargs.update(user=user, password=password)
    elif user:
        kwargs["token"] = user
    kwargs.update(opts.connect_options)
    return kwargs


class Link:
    """One connection's client, streams, consumers, subscriptions and keep-alive."""

    def __init__(self, nc: Client, opts: TransportOptions) -> None:
        self.nc = nc
        self.opts = opts
        self.pid = os.getpid()
        self.js = nc.jetstream()
        self.ready = Ready()
        self.bindings = Bindings(self.js, opts)
        self.keepalive = KeepAlive(nc, max(0.05, opts.ack_wait / PER_ACK_WAIT))
        self.keepalive.start()
        self.queues: dict[str, QueueInfo] = {}
        self.core: dict[str, CoreQueue] = {}
        self._lock = threading.Lock()
        self._streams: set[str] = set()
        self._subjects: dict[str, str] = {}
        self._consumers: dict[str, Consumer] = {}
        self._dlq_ready = False

    @classmethod
    def open(cls, client: Any, opts: TransportOptions) -> Link:
        """Connect for the kombu connection ``client``."""
        nc = jsclient.connect(**connect_kwargs(client, opts))
        try:
            return cls(nc, opts)
        except BaseException:
            nc.close()
            raise

    # -- streams and consumers -----------------------------------------------

    def ensure_queue(self, queue: str) -> str:
        """The stream of ``queue``, made or updated the first time."""
        name = self.opts.stream(queue)
        if queue in self._streams:
            return name
        self.js.create_or_update_stream(
            name=name,
            subjects=[self.opts.subject(queue)],
            retention="workqueue",
            storage="file",
            num_replicas=self.opts.replicas,
            duplicate_window=self.opts.duplicate_window,
            description=f"Celery queue {queue!r} (jsclient.contrib.celery)",
        )
        with self._lock:
            self._streams.add(queue)
        return name

    def consumer(self, queue: str) -> Consumer:
        """The ``workers`` consumer of ``queue``'s stream, made or updated the first time."""
        c = self._consumers.get(queue)
        if c is not None:
            return c
        stream = self.ensure_queue(queue)
        c = self.js.create_or_update_consumer(
            stream,
            durable_name=CONSUMER,
            ack_policy="explicit",
            ack_wait=self.opts.ack_wait,
            max_deliver=-1,  # max_deliver is counted here: past it, the dead-letter subject
            # Unlimited by default: ETA tasks are held until they are due, and
            # each worker's prefetch already bounds what it holds.
            max_ack_pending=self.opts.max_ack_pending,
            description="Celery workers (jsclient.contrib.celery)",
        )
        with self._lock:
            self._consumers[queue] = c
        return c

    def forget_queue(self, queue: str) -> None:
        """Make the stream and consumer again on next use (they were deleted)."""
        with self._lock:
            self._streams.discard(queue)
            self._consumers.pop(queue, None)

    def has_queue(self, queue: str) -> bool:
        """Whether ``queue`` exists (its stream, or this connection's core queue)."""
        if queue in self.core:
            return True
        try:
            self.js.stream(self.opts.stream(queue))
        except errors.StreamNotFoundError:
            return False
        return True

    def size(self, queue: str) -> int:
        """Messages of ``queue`` not yet delivered (the consumer's pending count)."""
        try:
            info = self.js.consumer(self.opts.stream(queue), CONSUMER).info()
        except errors.ConsumerNotFoundError:
            try:  # no worker consumed it yet: everything stored is pending
                return int(self.js.stream(self.opts.stream(queue)).info().state.messages)
            except errors.StreamNotFoundError:
                return 0
        except errors.StreamNotFoundError:
            return 0
        return int(info.num_pending or 0)

    def purge(self, queue: str) -> int:
        """Remove the stored messages of ``queue`` (a purge filtered by its subject)."""
        try:
            stream = self.js.stream(self.opts.stream(queue))
        except errors.StreamNotFoundError:
            return 0
        return int(stream.purge(subject=self.opts.subject(queue)))

    def delete_queue(self, queue: str) -> None:
        """Delete ``queue``: its stream (and consumer), or its core subscriptions."""
        core = self.core.pop(queue, None)
        if core is not None:
            core.close()
        info = self.queues.pop(queue, None)
        self.forget_queue(queue)
        if info is not None and info.transient:
            return
        try:
            self.js.delete_stream(self.opts.stream(queue))
        except errors.StreamNotFoundError:
            pass

    # -- publishing ----------------------------------------------------------

    def publish(self, queue: str, data: bytes, msg_id: str | None) -> None:
        """Store a message in ``queue``; ``msg_id`` makes a re-send a duplicate, not a copy."""
        if queue not in self._streams:
            self.ensure_queue(queue)
        subject = self._subjects.get(queue)
        if subject is None:
            subject = self._subjects[queue] = self.opts.subject(queue)
        try:
            self.js.publish(subject, data, msg_id=msg_id)
        except (errors.NoStreamResponseError, errors.NoRespondersError):
            self.forget_queue(queue)  # deleted meanwhile: made again, then sent again
            self.ensure_queue(queue)
            self.js.publish(subject, data, msg_id=msg_id)

    def publish_core(self, subject: str, data: bytes) -> None:
        """Send to core-fed queues (broadcast, transient): no ack, nobody listening drops it."""
        self.nc.publish(subject, data)

    def core_queue(self, queue: str) -> CoreQueue:
        """The core-fed side of ``queue`` on this connection (made on first use)."""
        with self._lock:
            cq = self.core.get(queue)
            if cq is None:
                cq = self.core[queue] = CoreQueue(self, queue)
        return cq

    # -- settling ----------------------------------------------------------------

    def settle(self, msg: Msg, how: str, delay: float | None = None) -> None:
        """``+ACK``, ``NAK`` (``delay``) or ``TERM`` one message, and stop keeping it alive."""
        if self.pid != os.getpid():
            return  # a forked child's copy (kombu's finalizers): the parent settles it
        self.keepalive.release(msg)
        try:
            if how == "ack":
                msg.ack()
            elif how == "nak":
                msg.nak(delay)
            else:
                msg.term()
        except errors.Error as exc:  # closed: the server redelivers it after ack_wait
            log.warning("could not %s message %s: %s", how, msg.reply, exc)

    def dead_letter(self, queue: str, msg: Msg) -> None:
        """Move a message past ``max_deliver`` to ``<stream_prefix>.dlq.<queue>``."""
        meta = msg.metadata
        if not self._dlq_ready:
            self.js.create_or_update_stream(
                name=self.opts.dlq_stream,
                subjects=[f"{self.opts.stream_prefix}.dlq.>"],
                storage="file",
                num_replicas=self.opts.replicas,
                description="Celery dead letters (jsclient.contrib.celery)",
            )
            self._dlq_ready = True
        headers = {
            "Celery-Queue": queue,
            "Celery-Stream": meta.stream,
            "Celery-Stream-Seq": str(meta.sequence.stream),
            "Celery-Deliveries": str(meta.num_delivered - 1),
        }
        # The id makes a retry after a crash between publish and term one copy.
        self.js.publish(
            self.opts.dlq_subject(queue),
            msg.data,
            headers=headers,
            msg_id=f"dlq-{meta.stream}-{meta.sequence.stream}",
        )
        log.warning(
            "queue %r: message %d delivered %d times; moved to %s",
            queue,
            meta.sequence.stream,
            meta.num_delivered - 1,
            self.opts.dlq_subject(queue),
        )
        self.settle(msg, "term")

    # -- lifecycle -----------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """This process's connection, not closed."""
        return self.pid == os.getpid() and not self.nc.is_closed

    def close(self) -> None:
        """Stop keeping messages alive, let open pulls end and acks go out, close."""
        if self.pid != os.getpid():
            # A parent's connection (its locks may be held by threads that are
            # not in this process): only the parent may touch or close it.
            return
        self.keepalive.close()
        for cq in list(self.core.values()):
            cq.close()
        self.core.clear()
        try:
            self.nc.drain(timeout=DRAIN_TIMEOUT)
        except errors.Error as exc:
            log.debug("drain on close: %s", exc)
            try:
                self.nc.close()
            except errors.Error:
                pass
