"""What flows to kombu: the ready buffer one connection drains, and each channel's credit.

:class:`Ready` is the one place ``Transport.drain_events`` waits: the pullers
of every consumed queue and the core subscriptions (broadcast, transient
queues) put what they receive here, and the thread kombu drains the
connection from takes it all in one go. A puller that fails for good (the
connection closed) puts its error here, so ``drain_events`` raises it and
kombu reconnects.

:class:`Credit` is kombu's QoS in numbers: a channel with ``prefetch_count``
N never has more than N messages pulled or held (buffered here, in a
worker's hands, or waiting for an ETA); a pull reserves what it asks for and
gives back what did not come; an ack, requeue or reject gives back one. What
a pull may ask for is kombu's ``can_consume_max_estimate()`` (the prefetch
count less what is held), counting the pulls still open too, which kombu's
QoS, kept by the draining thread, cannot see.
With several queues on one channel each pull asks for its share, so an idle
queue cannot hold all of the credit while another has work.

Both wait on :class:`jsclient._threads.Signal` (plain-lock conditions, waits
in slices), never without a timeout.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from jsclient._threads import Signal
from jsclient.contrib.celery._config import DEFAULT_UNLIMITED_BATCH
from jsclient.msg import Msg

#: How often a wait with a ``stop`` predicate looks at it (seconds).
STOP_CHECK = 0.2


class Item(NamedTuple):
    """One message for kombu: its channel (None: any consumer), queue, payload, NATS message."""

    channel: Any
    queue: str
    payload: dict[str, Any]
    msg: Msg | None


class Ready:
    """The messages received for one connection, until ``drain_events`` takes them."""

    def __init__(self) -> None:
        self._sig = Signal()
        self._items: deque[Item] = deque()
        self._error: BaseException | None = None

    def put(self, item: Item) -> None:
        """Add a message (any thread)."""
        with self._sig.lock:
            self._items.append(item)
            self._sig.notify_locked()

    def put_back(self, items: list[Item]) -> None:
        """Return messages that were taken but not delivered, in front, in order."""
        with self._sig.lock:
            self._items.extendleft(reversed(items))
            self._sig.notify_locked()

    def fail(self, exc: BaseException) -> None:
        """Make the next ``take`` raise ``exc`` (once)."""
        with self._sig.lock:
            if self._error is None:
                self._error = exc
            self._sig.notify_locked()

    def _ready(self) -> bool:
        return bool(self._items) or self._error is not None

    def take(self, timeout: float | None, stop: Callable[[], bool] | None = None) -> list[Item]:
        """Everything buffered, waiting up to ``timeout`` seconds for something ([] then).

        ``stop()``, looked at every :data:`STOP_CHECK` seconds, ends the wait early.
        """
        if stop is None:
            self._sig.wait_for(self._ready, timeout)
        else:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not stop():
                left = STOP_CHECK if deadline is None else deadline - time.monotonic()
                if left <= 0 or self._sig.wait_for(self._ready, min(left, STOP_CHECK)):
                    break
        with self._sig.lock:
            err, self._error = self._error, None
            items = list(self._items)
            self._items.clear()
        if err is not None:
            if items:
                self.put_back(items)
            raise err
        return items

    def remove(self, channel: Any) -> list[Item]:
        """Take out the messages of ``channel`` (it is closing)."""
        with self._sig.lock:
            mine = [i for i in self._items if i.channel is channel]
            if mine:
                self._items = deque(i for i in self._items if i.channel is not channel)
        return mine

    def __len__(self) -> int:
        return len(self._items)


class Credit:
    """How many more messages a channel may pull (kombu's ``prefetch_count``)."""

    def __init__(self) -> None:
        self._sig = Signal()
        self.limit = 0  # 0: no limit (kombu's prefetch_count=0)
        self.used = 0  # reserved by open pulls + held (delivered, not yet settled)
        self.pullers = 0
        self.closed = False

    def set_limit(self, limit: int) -> None:
        """kombu's ``basic_qos(prefetch_count=...)``."""
        with self._sig.lock:
            self.limit = max(0, int(limit))
            self._sig.notify_locked()

    def _free(self) -> int:
        if self.limit == 0:
            return DEFAULT_UNLIMITED_BATCH
        return self.limit - self.used

    def _can_take(self) -> bool:
        return self.closed or self._free() > 0

    def take(self, timeout: float) -> int:
        """Reserve up to this puller's share of the free credit; 0 after ``timeout`` s or close."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sig.wait_for(self._can_take, left):
                return 0
            with self._sig.lock:
                if self.closed:
                    return 0
                free = self._free()
                if free <= 0:
                    continue  # another puller took it first
                if self.limit == 0:
                    return free  # no limit: a batch, nothing to account for
                share = max(1, self.limit // max(1, self.pullers))
                n = min(free, share)
                self.used += n
                return n

    def give(self, n: int) -> None:
        """Give back ``n`` (a short pull, or messages settled)."""
        if n <= 0:
            return
        with self._sig.lock:
            if self.limit:
                self.used = max(0, self.used - n)
            self._sig.notify_locked()

    def close(self) -> None:
        """Wake every puller waiting for credit: the channel is closing."""
        with self._sig.lock:
            self.closed = True
            self._sig.notify_locked()
