"""One consumed queue's pulls: a named thread that fetches what the channel's credit allows.

A Celery worker consumes its queues on one channel, and kombu drains the
connection from one thread, which must hear from every queue at once; a
JetStream pull waits on one consumer. So each (channel, queue) gets a
:class:`Puller` thread (``jsclient-celery-pull-<queue>``): it reserves
credit (:class:`._flow.Credit`), fetches up to that many messages with
``consumer.fetch`` (the pull engine every jsclient consumer uses), and puts
each into the connection's :class:`._flow.Ready` as it arrives, already held
by the connection's keep-alive. A short pull gives back the credit it did
not use.

A message delivered more than ``max_deliver`` times is not handed to kombu:
it is published to the dead-letter subject (with a message id, so a retry
after a crash stores it once) and terminated.

After :meth:`Puller.stop` the thread takes no new credit; a pull still open
may bring messages, which are nak'd so that another worker gets them without
waiting for ``ack_wait``, with a delay longer than that pull can stay open
(``pull_expires``): an immediate ``NAK`` would be redelivered into the same
pull. ``nc.drain()`` (when the connection closes) ends open pulls early.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.contrib.celery._flow import Credit, Item, Ready
from jsclient.contrib.celery._kombu import loads
from jsclient.msg import Msg

if TYPE_CHECKING:
    from jsclient.contrib.celery._ports import LinkPort

log = logging.getLogger("jsclient.contrib.celery")

#: The message property that carries the message id of a publish (see channel.py).
MSG_ID_PROP = "jsclient_msg_id"
#: Wait for credit in slices of this many seconds (then look at ``stop`` again).
CREDIT_WAIT = 1.0
#: With several queues on a channel a pull waits at most this long, so that
#: credit held by an idle queue comes back soon.
SHARED_PULL_EXPIRES = 1.0
#: Pause after an unexpected pull error before the next pull.
ERROR_PAUSE = 0.5


def decode(msg: Msg) -> dict[str, Any] | None:
    """The kombu payload of a JetStream message, or None when it is not one."""
    try:
        payload = loads(msg.data)
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("properties"), dict):
        return None
    props = payload["properties"]
    props.pop(MSG_ID_PROP, None)  # a republished copy must get an id of its own
    # The ack subject is unique per delivery: a redelivery is a new tag.
    props["delivery_tag"] = msg.reply
    return payload


class Puller:
    """Pulls ``queue`` for ``channel`` on a thread of its own (see the module)."""

    def __init__(
        self,
        link: LinkPort,
        channel: Any,
        queue: str,
        credit: Credit,
        ready: Ready,
    ) -> None:
        self.link = link
        self.channel = channel
        self.queue = queue
        self.credit = credit
        self.ready = ready
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"jsclient-celery-pull-{queue}", daemon=True
        )

    def start(self) -> None:
        """Start pulling."""
        with self.credit._sig.lock:
            self.credit.pullers += 1
        self._thread.start()

    def stop(self) -> None:
        """Take no more credit; what an open pull still brings is nak'd."""
        if not self._stopped.is_set():
            self._stopped.set()
            with self.credit._sig.lock:
                self.credit.pullers -= 1
                self.credit._sig.notify_locked()

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the thread to end."""
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopped.is_set()

    def _run(self) -> None:
        consumer = None
        while not self._stopped.is_set():
            try:
                if consumer is None:
                    consumer = self.link.consumer(self.queue)
                n = self.credit.take(CREDIT_WAIT)
                if n == 0:
                    continue
                self._pull(consumer, n)
            except (
                errors.ConsumerNotFoundError,
                errors.ConsumerDeletedError,
                errors.StreamNotFoundError,
            ) as exc:
                # Deleted under us (queue_delete elsewhere): made again, as a
                # declare would, so the worker goes on.
                log.warning("queue %r: %s; declaring it again", self.queue, exc)
                self.link.forget_queue(self.queue)
                consumer = None
                self._stopped.wait(ERROR_PAUSE)
            except (errors.ConnectionClosedError, errors.ForkedConnectionError) as exc:
                if not self._stopped.is_set():
                    self.ready.fail(exc)  # drain_events raises it: kombu reconnects
                return
            except BaseException:  # a library thread: log, pause, go on
                if self._stopped.is_set():
                    return
                log.exception("queue %r: pull failed", self.queue)
                self._stopped.wait(ERROR_PAUSE)

    def _pull(self, consumer: Any, n: int) -> None:
        expires = self.link.opts.pull_expires
        if self.credit.pullers > 1:
            expires = min(expires, SHARED_PULL_EXPIRES)
        got = 0
        try:
            batch = consumer.fetch(n, expires=expires)
            for msg in batch:
                # A sum, not an if: a loop body ending with an if is an interrupt
                # past the finally on 3.13+ (tests/unit/test_interrupt_cover.py).
                got += bool(self._take(msg))
            err = batch.error
            if err is not None and not isinstance(err, errors.TimeoutError):
                log.debug("queue %r: pull ended with %r", self.queue, err)
                if isinstance(err, errors.StatusError | errors.NoRespondersError):
                    time.sleep(ERROR_PAUSE)
        finally:
            self.credit.give(n - got)  # what did not come; delivered ones hold theirs

    def _take(self, msg: Msg) -> bool:
        """Hand one message on; False if it was not (stopped, dead letter, not kombu's)."""
        link = self.link
        if self._stopped.is_set() or self.channel.closed:
            link.settle(msg, "nak", link.opts.pull_expires + 1.0)
            return False
        max_deliver = link.opts.max_deliver
        if max_deliver is not None and msg.metadata.num_delivered > max_deliver:
            link.dead_letter(self.queue, msg)
            return False
        payload = decode(msg)
        if payload is None:
            log.error(
                "queue %r: message %d is not a kombu message; terminated",
                self.queue,
                msg.metadata.sequence.stream,
            )
            link.settle(msg, "term")
            return False
        link.keepalive.hold(msg)
        self.ready.put(Item(self.channel, self.queue, payload, msg))
        return True


def stop_all(pullers: list[Puller], timeout: float, wait: Callable[[], None] | None = None) -> None:
    """Stop ``pullers``; after ``wait()`` (if given: it ends their pulls) join each briefly."""
    for p in pullers:
        p.stop()
    if wait is not None:
        wait()
    deadline = time.monotonic() + timeout
    for p in pullers:
        p.join(max(0.0, deadline - time.monotonic()))
