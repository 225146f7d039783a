"""The kombu channel on JetStream: queues as streams, acks as ``+ACK``/``NAK``/``TERM``.

What maps to what (a :class:`Channel` is kombu's ``virtual.Channel``):

- ``queue_declare`` of a durable queue makes its work-queue stream (file
  storage, subject ``<prefix>.q.<queue>``); a transient queue (reply queues,
  event receivers, each worker's pidbox) is core NATS (:mod:`._corequeue`);
- ``basic_publish`` routes as every virtual transport does, through the
  exchange tables (shared in a KV bucket, :mod:`._bindings`), and ``_put``
  stores the message with ``js.publish(..., msg_id=...)``: the id is made once
  per publish and kept in the message properties kombu reuses when it retries
  the publish after a connection error, so a retry stores nothing twice;
- fanout exchanges (remote control, broadcast) publish on core NATS;
- ``basic_consume`` starts a puller (:mod:`._puller`) that fetches as many
  messages as the channel's QoS allows (``prefetch_count``: Celery's
  concurrency times ``worker_prefetch_multiplier``, raised for ETA tasks);
- ``basic_ack`` is ``+ACK``, a requeue (``basic_reject(requeue=True)``,
  ``basic_recover``, and every message still held when the channel closes,
  such as at worker shutdown) is ``NAK`` (with ``requeue_delay``, or kombu's
  ``delay=``), a reject is ``TERM``;
- ``_size`` is the consumer's pending count, ``_purge`` a purge filtered by
  the queue's subject.
"""

from __future__ import annotations

import logging
import threading
from queue import Empty
from typing import TYPE_CHECKING, Any

from kombu.utils.uuid import uuid

from jsclient.contrib.celery._flow import Credit, Item
from jsclient.contrib.celery._kombu import VirtualChannel, VirtualQoS, dumps
from jsclient.contrib.celery._link import QueueInfo
from jsclient.contrib.celery._puller import MSG_ID_PROP, Puller, decode
from jsclient.msg import Msg

if TYPE_CHECKING:
    from jsclient.contrib.celery._link import Link

log = logging.getLogger("jsclient.contrib.celery")

#: On a lookup that finds no queue, read the exchange table again if the copy
#: is older than this (seconds): a queue bound elsewhere a moment ago.
FRESH_READ_AFTER = 0.2
#: Seconds before the server redelivers what a closing channel held: its own
#: pulls may still be open for a moment, and an immediate ``NAK`` would be
#: redelivered into them, then lost with the connection until ``ack_wait``.
CLOSE_NAK_DELAY = 1.0


class QoS(VirtualQoS):  # type: ignore[misc]
    """kombu's QoS with the settling done on the server: ack, nak, term."""

    channel: Channel

    def ack(self, delivery_tag: str) -> None:
        """``+ACK``."""
        self.channel._settle(delivery_tag, "ack")
        super().ack(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        """``NAK`` when ``requeue`` (at once, or after ``requeue_delay``), else ``TERM``."""
        self.channel._settle(delivery_tag, "nak" if requeue else "term")
        self._quick_ack(delivery_tag)  # not kombu's restore: the server has the message

    def restore_unacked(self) -> list[Any]:
        """``NAK`` every message this channel holds (shutdown, ``basic_recover``)."""
        self._flush()
        self._delivered.clear()
        ch = self.channel
        ch._settle_all("nak", CLOSE_NAK_DELAY if ch._closing else None)
        return []


class Channel(VirtualChannel):  # type: ignore[misc]
    """A kombu channel whose queues are JetStream streams (see the module)."""

    QoS = QoS
    supports_fanout = True
    connection: Any  # the Transport

    def __init__(self, connection: Any, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self.credit = Credit()
        self._pullers: dict[str, Puller] = {}
        self._no_ack: dict[str, bool] = {}
        self._held: dict[str, Msg] = {}  # delivery tag -> message, until settled
        self._held_lock = threading.Lock()
        self._closing = False

    @property
    def link(self) -> Link:
        """The connection's NATS side."""
        link: Link = self.connection.link
        return link

    # -- declaring ---------------------------------------------------------------

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        info = QueueInfo(
            durable=bool(kwargs.get("durable", True)),
            auto_delete=bool(kwargs.get("auto_delete", False)),
            exclusive=bool(kwargs.get("exclusive", False)),
            arguments=dict(kwargs.get("arguments") or {}),
        )
        link = self.link
        link.queues[queue] = info
        if info.transient:
            link.core_queue(queue).listen(link.opts.transient_subject(queue))
        else:
            link.ensure_queue(queue)

    def _is_core(self, queue: str) -> bool:
        info = self.link.queues.get(queue)
        return info is not None and info.transient

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        return self.link.has_queue(queue)

    def _size(self, queue: str) -> int:
        if self._is_core(queue):
            return len(self.link.core_queue(queue))
        return self.link.size(queue)

    def _purge(self, queue: str) -> int:
        if self._is_core(queue):
            return self.link.core_queue(queue).purge()
        return self.link.purge(queue)

    def queue_delete(
        self, queue: str, if_unused: bool = False, if_empty: bool = False, **kwargs: Any
    ) -> None:
        """Delete ``queue`` and its bindings (its stream, or its core subscriptions)."""
        if if_empty and self._size(queue):
            return
        transient = self._is_core(queue)
        for exchange, routing_key, args in list(self.state.queue_bindings(queue)):
            kind = self.typeof(exchange)
            meta = kind.prepare_bind(queue, exchange, routing_key, args)
            table = self.state.exchanges.get(exchange, {}).get("table")
            if table is not None:
                table[:] = [m for m in table if tuple(m) != tuple(meta)]
            if not transient and kind.type != "fanout":
                self.link.bindings.remove(exchange, tuple(meta))
        self.state.queue_bindings_delete(queue)
        self.link.delete_queue(queue)

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str | None, queue: str) -> None:
        link = self.link
        kind = self.typeof(exchange).type
        if kind == "fanout":
            link.core_queue(queue).listen(link.opts.fanout_subject(exchange))
        elif self._is_core(queue):
            cq = link.core_queue(queue)
            subjects = link.opts.route_filters(exchange, routing_key, kind == "topic")
            exact = len(subjects) == 1 and not subjects[0].endswith(".>")
            for subject in subjects:
                cq.listen(subject, None if exact or kind != "topic" else pattern)
            link.bindings.mark_transient(exchange, kind)
        else:
            link.bindings.add(exchange, kind, (routing_key, pattern, queue))

    def get_table(self, exchange: str) -> list[tuple[str, str | None, str]]:
        """This process's bindings of ``exchange`` and those shared by every other."""
        local = [tuple(m) for m in self.state.exchanges.get(exchange, {}).get("table", ())]
        shared = self.link.bindings.get(exchange).table
        return local + [b for b in shared if b not in local]

    def _lookup(self, exchange: str, routing_key: str, default: Any = None) -> Any:
        found = super()._lookup(exchange, routing_key, default)
        if not found and exchange:
            age = self.link.bindings.cached_age(exchange)
            if age is None or age > FRESH_READ_AFTER:
                self.link.bindings.get(exchange, fresh=True)
                found = super()._lookup(exchange, routing_key, default)
        return found

    # -- publishing --------------------------------------------------------------

    def basic_publish(
        self, message: dict[str, Any], exchange: str, routing_key: str, **kwargs: Any
    ) -> None:
        """Publish: the message id is made here once and kept through kombu's retries."""
        props = message["properties"]
        msg_id = props.setdefault(MSG_ID_PROP, uuid())
        message["body"], encoding = self.encode_body(message["body"], self.body_encoding)
        # kombu's _inplace_augment_message, with the message id as the delivery
        # tag (a receiver sets its own): one uuid per publish, not two.
        props.update(body_encoding=encoding, delivery_tag=msg_id)
        props["delivery_info"].update(exchange=exchange, routing_key=routing_key)
        if not exchange:
            self._put(routing_key, message, **kwargs)
            return
        kind = self.typeof(exchange)
        if kind.type == "fanout":
            self._put_fanout(exchange, message, routing_key, **kwargs)
            return
        link = self.link
        if link.bindings.get(exchange).transient:
            link.publish_core(link.opts.route_subject(exchange, routing_key), _encode(message))
        kind.deliver(message, exchange, routing_key, **kwargs)

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        link = self.link
        if self._is_core(queue):
            link.publish_core(link.opts.transient_subject(queue), _encode(message))
            return
        link.publish(queue, _encode(message), message["properties"].get(MSG_ID_PROP))

    def _put_fanout(
        self, exchange: str, message: dict[str, Any], routing_key: str, **kwargs: Any
    ) -> None:
        self.link.publish_core(self.link.opts.fanout_subject(exchange), _encode(message))

    # -- consuming ---------------------------------------------------------------

    def basic_qos(
        self, prefetch_size: int = 0, prefetch_count: int = 0, apply_global: bool = False
    ) -> None:
        """Set how many messages this channel may pull and hold (``prefetch_count``)."""
        super().basic_qos(prefetch_size, prefetch_count, apply_global)
        self.credit.set_limit(prefetch_count)

    def basic_consume(
        self, queue: str, no_ack: bool, callback: Any, consumer_tag: str, **kwargs: Any
    ) -> Any:
        """Consume ``queue``: a puller for its stream, or its core subscriptions."""
        ret = super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)
        self._no_ack[queue] = no_ack
        link = self.link
        cq = link.core.get(queue)
        if cq is not None:
            cq.attach(self)
        if not self._is_core(queue) and queue not in self._pullers:
            puller = Puller(link, self, queue, self.credit, link.ready)
            self._pullers[queue] = puller
            puller.start()
        return ret

    def basic_cancel(self, consumer_tag: str) -> Any:
        """Stop consuming; what the queue's open pull still brings is nak'd."""
        queue = self._tag_to_queue.get(consumer_tag)
        ret = super().basic_cancel(consumer_tag)
        if queue is not None and queue not in self._active_queues:
            puller = self._pullers.pop(queue, None)
            if puller is not None:
                puller.stop()
            cq = self.link.core.get(queue)
            if cq is not None:
                cq.detach(self)
        return ret

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        """One message now, or None (a no-wait pull)."""
        if self._is_core(queue):
            payload = self.link.core_queue(queue).take()
            return None if payload is None else self.Message(payload, channel=self)
        for msg in self.link.consumer(queue).fetch_no_wait(1):
            payload = decode(msg)
            if payload is None:
                self.link.settle(msg, "term")
                return None
            message = self.Message(payload, channel=self)
            if no_ack:
                self.link.settle(msg, "ack")
            else:
                self.link.keepalive.hold(msg)
                self._hold(message.delivery_tag, msg)
                self.qos.append(message, message.delivery_tag)
            return message
        return None

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        raise Empty()  # consuming goes through the pullers and Transport.drain_events

    def deliver(self, item: Item) -> None:
        """Hand one received message to its consumer's callback (the draining thread)."""
        msg = item.msg
        callback = self.connection._callbacks.get(item.queue)
        if self.closed or callback is None:
            if msg is not None:  # nobody consumes it here any more: to another worker
                self.link.settle(msg, "nak", CLOSE_NAK_DELAY)
                self.credit.give(1)
            return
        if msg is not None:
            if self._no_ack.get(item.queue, False):
                self.link.settle(msg, "ack")
                self.credit.give(1)
            else:
                self._hold(item.payload["properties"]["delivery_tag"], msg)
        callback(item.payload)

    # -- settling ------------------------------------------------------------------

    def _hold(self, tag: str, msg: Msg) -> None:
        with self._held_lock:
            self._held[tag] = msg

    def _settle(self, tag: str, how: str) -> None:
        with self._held_lock:
            msg = self._held.pop(tag, None)
        if msg is None:
            return  # a core-fed message, or settled already
        delay = self.link.opts.requeue_delay if how == "nak" else None
        self.link.settle(msg, how, delay)
        self.credit.give(1)

    def _settle_all(self, how: str, delay: float | None = None) -> None:
        with self._held_lock:
            held = list(self._held.values())
            self._held.clear()
        for msg in held:
            self.link.settle(msg, how, delay)
        self.credit.give(len(held))

    def basic_reject(self, delivery_tag: str, requeue: bool = False, **kwargs: Any) -> None:
        """``NAK`` (``requeue``; ``delay=`` seconds overrides ``requeue_delay``) or ``TERM``."""
        delay = kwargs.get("delay")
        if requeue and delay is not None:
            with self._held_lock:
                msg = self._held.pop(delivery_tag, None)
            if msg is not None:
                self.link.settle(msg, "nak", float(delay))
                self.credit.give(1)
            self.qos._quick_ack(delivery_tag)
            return
        self.qos.reject(delivery_tag, requeue=requeue)

    # -- closing -------------------------------------------------------------------

    def close(self) -> None:
        """Stop pulling, ``NAK`` what this channel holds or has buffered, close."""
        if self.closed:
            return
        self._closing = True
        self.credit.close()
        for puller in self._pullers.values():
            puller.stop()
        link = self.connection.link if self.connection is not None else None
        if link is not None and link.usable:
            for item in link.ready.remove(self):
                if item.msg is not None:
                    link.settle(item.msg, "nak", CLOSE_NAK_DELAY)
                    self.credit.give(1)
            for cq in list(link.core.values()):
                cq.detach(self)
        super().close()  # cancels consumers, restores (nak's) what is held

    def pullers(self) -> list[Puller]:
        """This channel's pullers (the transport joins them on close)."""
        return list(self._pullers.values())


def _encode(message: dict[str, Any]) -> bytes:
    data = dumps(message)
    return data.encode("utf-8") if isinstance(data, str) else data
