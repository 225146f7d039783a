"""Queues fed by core NATS: broadcast (fanout exchanges) and transient queues.

Remote control (``celery inspect``, ``control shutdown``), its replies and
events reach kombu through queues that live as long as one process listens:
each worker's ``<hostname>.celery.pidbox`` (bound to the fanout exchange
``celery.pidbox``), the ``<oid>.reply.celery.pidbox`` a client makes per
call, the event receivers of ``celery events`` and gossip. Storing those in
streams would leave a stream behind each dead process, so they are core NATS
subscriptions, as Redis does them with PUB/SUB:

- a queue bound to a fanout exchange subscribes ``<prefix>.fanout.<E>``;
- a transient queue (not durable, auto-delete or exclusive) bound to a
  direct or topic exchange subscribes ``<prefix>.x.<E>.<key>`` (topic
  wildcards become subject wildcards, see ``TransportOptions.route_filters``)
  and, for kombu's default exchange, ``<prefix>.t.<queue>``.

The subscriptions are made when the queue is declared and bound, before
anything is sent that could be answered (kombu's pidbox declares the reply
queue, then broadcasts, then consumes): what arrives before the queue is
consumed waits in a bounded buffer. A queue bound several times with
patterns matching one subject receives each message once (by message id).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.contrib.celery._flow import Item
from jsclient.contrib.celery._kombu import loads
from jsclient.contrib.celery._puller import MSG_ID_PROP
from jsclient.msg import Msg

if TYPE_CHECKING:
    from jsclient.contrib.celery._ports import LinkPort
    from jsclient.subscription import Subscription

log = logging.getLogger("jsclient.contrib.celery")

#: Messages kept for a core-fed queue nobody consumes yet (oldest dropped).
PENDING_MAX = 10_000
#: Message ids remembered to drop a copy that came through a second binding.
SEEN_MAX = 4096
#: Seconds a new subscription waits for the server to confirm it (a PING).
FLUSH_TIMEOUT = 5.0


class CoreQueue:
    """One core-fed queue of a connection: its subscriptions and what waits for a consumer."""

    def __init__(self, link: LinkPort, queue: str) -> None:
        self.link = link
        self.queue = queue
        self._lock = threading.Lock()
        self._subs: dict[str, Subscription] = {}
        self._patterns: dict[str, list[re.Pattern[str]]] = {}  # subject -> topic filters
        self._pending: deque[dict[str, Any]] = deque(maxlen=PENDING_MAX)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._channel: Any = None
        self.closed = False

    def listen(self, subject: str, pattern: str | None = None) -> None:
        """Subscribe ``subject`` (once); ``pattern``: a topic regex messages must match."""
        with self._lock:
            if pattern is not None:
                self._patterns.setdefault(subject, []).append(re.compile(pattern))
            elif subject in self._subs:
                self._patterns.pop(subject, None)  # a plain binding takes everything
            if subject in self._subs or self.closed:
                return
        sub = self.link.nc.subscribe(subject, cb=self._on_msg)
        # A binding is in place when queue_bind returns (kombu's contract): the
        # server has the subscription before anyone is told to publish to it.
        self.link.nc.flush(timeout=FLUSH_TIMEOUT)
        with self._lock:
            if self.closed or subject in self._subs:
                extra = sub
            else:
                self._subs[subject], extra = sub, None
        if extra is not None:
            _unsubscribe(extra)

    def attach(self, channel: Any) -> None:
        """A consumer: hand what waited, and what comes from now on, to ``channel``."""
        with self._lock:
            self._channel = channel
            waiting = list(self._pending)
            self._pending.clear()
        for payload in waiting:
            self.link.ready.put(Item(channel, self.queue, payload, None))

    def detach(self, channel: Any) -> None:
        """The consumer of ``channel`` went away; later messages wait again."""
        with self._lock:
            if self._channel is channel:
                self._channel = None

    def take(self) -> dict[str, Any] | None:
        """One waiting message (``basic_get``), or None."""
        with self._lock:
            return self._pending.popleft() if self._pending else None

    def purge(self) -> int:
        """Drop what waits; how many."""
        with self._lock:
            n = len(self._pending)
            self._pending.clear()
        return n

    def __len__(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        """Unsubscribe; what waits is dropped."""
        with self._lock:
            self.closed = True
            subs = list(self._subs.values())
            self._subs.clear()
            self._pending.clear()
            self._channel = None
        for sub in subs:
            _unsubscribe(sub)

    # -- subscription threads ------------------------------------------------------

    def _on_msg(self, msg: Msg) -> None:
        try:
            payload = loads(msg.data)
            props = payload["properties"]
        except (ValueError, TypeError, KeyError, UnicodeDecodeError):
            log.warning(
                "queue %r: dropped a message that is not kombu's (%s)", self.queue, msg.subject
            )
            return
        with self._lock:
            pats = self._patterns.get(msg.subject) if self._patterns else None
        if pats is not None:
            key = (props.get("delivery_info") or {}).get("routing_key") or ""
            if not any(p.match(key) for p in pats):
                return
        mid = props.pop(MSG_ID_PROP, None)
        with self._lock:
            if mid is not None:
                if mid in self._seen:
                    return
                self._seen[mid] = None
                if len(self._seen) > SEEN_MAX:
                    self._seen.popitem(last=False)
            channel = self._channel
            if channel is None:
                if len(self._pending) == PENDING_MAX:
                    log.warning(
                        "queue %r: %d messages wait for a consumer; oldest dropped",
                        self.queue,
                        PENDING_MAX,
                    )
                self._pending.append(payload)
                return
        self.link.ready.put(Item(channel, self.queue, payload, None))


def _unsubscribe(sub: Subscription) -> None:
    try:
        sub.unsubscribe()
    except errors.Error as exc:  # closed meanwhile: nothing left to undo
        log.debug("unsubscribe: %s", exc)
