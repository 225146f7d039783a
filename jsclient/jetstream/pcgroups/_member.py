"""A running member of a consumer group: :class:`ConsumerGroupContext`.

One control thread per member (``jsclient-pcgroup-<group>-<member>``) watches
the group's KV entry and owns the member's consumer: it creates the consumer,
runs jsclient's ``consume()`` on it (the callback on that consume's own
thread), and follows what the entry says. Every few ``ack_wait`` (orbit.go's
``ack_wait + 0.5 s`` of quiet) it checks that a member that should consume
does, and joins again when it does not: the consume ended by itself (its
consumer was deleted by another instance, or went idle), or joining failed.

Timing follows orbit.go: the consumer's pinned TTL is ``max(ack_wait, 1 s)``,
its pulls expire after ``max(ack_wait / 2, 1 s)``, ``ack_wait`` defaults to 5 s.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient._threads import log
from jsclient.api import ConsumerConfig, PriorityPolicy
from jsclient.jetstream.kv._entry import PUT
from jsclient.jetstream.pcgroups.errors import ConsumerGroupError
from jsclient.jetstream.pcgroups.partitions import PRIORITY_GROUP, strip_partition

if TYPE_CHECKING:
    from jsclient.jetstream.consume.consumer import Consumer
    from jsclient.jetstream.consume.contexts import ConsumeContext
    from jsclient.jetstream.context import JetStream
    from jsclient.jetstream.kv import KeyValue, KeyValueEntry
    from jsclient.msg import Msg

__all__ = ["DEFAULT_ACK_WAIT", "ConsumerGroupContext", "MessageHandler"]

#: ``ack_wait`` (seconds) when the config gives none.
DEFAULT_ACK_WAIT = 5.0
#: Floor of the pinned TTL and of a pull's expiry (seconds).
MIN_PULL_EXPIRY_PINNED_TTL = 1.0
PULL_TIMEOUT_DIVIDER = 2
#: How often the control thread looks at its stop flag (seconds).
_SLICE = 0.25
PIN_ID = "Nats-Pin-Id"

MessageHandler = Callable[["Msg"], Any]


def member_template(config: ConsumerConfig | None) -> ConsumerConfig:
    """A copy of the user's consumer config with ``ack_wait`` defaulted."""
    cfg = ConsumerConfig() if config is None else dataclasses.replace(config)
    if cfg.ack_wait is None or cfg.ack_wait <= 0:
        cfg.ack_wait = DEFAULT_ACK_WAIT
    return cfg


class ConsumerGroupContext:
    """A member consuming from its group; what ``consume_static``/``consume_elastic`` return.

    ``stop()`` ends it (returns at once); ``wait(timeout)`` waits for the end,
    ``closed`` says whether it came. It also ends by itself when the group is
    deleted (``error`` None) or its config changes in a way the member cannot
    follow (``error``: GroupConfigChangedError). The member's consumer is left
    to the server (an elastic one goes after ``ack_wait`` of inactivity).
    """

    _kind = "group"

    def __init__(
        self,
        js: JetStream,
        kv: KeyValue,
        key: str,
        stream: str,
        group: str,
        member: str,
        callback: MessageHandler,
        template: ConsumerConfig,
    ) -> None:
        if not callable(callback):
            raise TypeError("callback must be callable")
        self._js = js
        self._kv = kv
        self._key = key
        self.stream = stream
        self.group = group
        self.member = member
        self._callback = callback
        self._template = template
        self._ack_wait = float(template.ack_wait or DEFAULT_ACK_WAIT)
        self._consumer: Consumer | None = None
        self._cc: ConsumeContext | None = None
        self._pin_id: str | None = None
        # The pin's header line as the server writes it: a message that carries the
        # pin already known is recognised by one substring search, without parsing.
        self._pin_line: bytes | None = None
        self._error: BaseException | None = None
        self._stopping = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._watcher = kv.watch(key)

    # -- public ----------------------------------------------------------------

    def stop(self) -> None:
        """Stop consuming and watching; returns at once (``wait()`` for the end)."""
        self._stopping.set()
        self._watcher.stop()
        if self._thread is None:  # never started: nothing else runs
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the member has stopped; True if it has."""
        me = threading.current_thread()
        cc_thread = getattr(self._cc, "_thread", None)
        if me is self._thread or me is cc_thread:
            return self._done.is_set()  # from inside: it cannot wait for itself
        return self._done.wait(timeout)

    @property
    def closed(self) -> bool:
        """True once the member has stopped (no more callbacks)."""
        return self._done.is_set()

    @property
    def error(self) -> BaseException | None:
        """Why the member stopped by itself (a config it cannot follow), or None."""
        return self._error

    @property
    def consuming(self) -> bool:
        """Whether the member has a running consume on its consumer now."""
        cc = self._cc
        return cc is not None and not cc.closed

    def __enter__(self) -> ConsumerGroupContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.wait(self._stop_timeout())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.stream}.{self.group} member={self.member!r}>"

    # -- for the kinds -------------------------------------------------------

    def _start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"jsclient-pcgroup-{self.group}-{self.member}", daemon=True
        )
        self._thread.start()

    @property
    def _pinned_ttl(self) -> float:
        return max(self._ack_wait, MIN_PULL_EXPIRY_PINNED_TTL)

    @property
    def _pull_expiry(self) -> float:
        return max(self._ack_wait / PULL_TIMEOUT_DIVIDER, MIN_PULL_EXPIRY_PINNED_TTL)

    def _stop_timeout(self) -> float:
        return max(self._ack_wait, 5.0)

    def _tick_period(self) -> float:
        return self._ack_wait + 0.5

    def _consumer_config(self, *, name: str, durable: bool, filters: list[str]) -> ConsumerConfig:
        """The template with the fields the group owns set: name, filters, pinning."""
        owned: dict[str, Any] = {
            "name": None if durable else name,
            "durable_name": name if durable else None,
            "filter_subject": None,
            "filter_subjects": filters,
            "priority_groups": [PRIORITY_GROUP],
            "priority_policy": PriorityPolicy.PINNED_CLIENT,
            "priority_timeout": self._pinned_ttl,
        }
        return dataclasses.replace(self._template, **owned)

    def _deliver(self, msg: Msg) -> None:
        raw = msg.raw_headers
        if raw is not None:
            line = self._pin_line
            if line is None or line not in raw:
                pid = (msg.headers or {}).get(PIN_ID)
                if pid:
                    self._pin_id = pid
                    self._pin_line = f"{PIN_ID}: {pid}\r\n".encode()
        msg.subject = strip_partition(msg.subject)
        self._callback(msg)

    def _start_consuming(self, consumer: Consumer) -> None:
        self._consumer = consumer
        self._cc = consumer.consume(self._deliver, expires=self._pull_expiry, group=PRIORITY_GROUP)

    def _stop_consuming(self) -> None:
        cc, self._cc = self._cc, None
        self._consumer = None
        if cc is not None:
            cc.stop()
            if not cc.wait(self._stop_timeout()):
                log.warning("jsclient: %r: the consume did not end in time", self)

    def _consume_ended(self) -> bool:
        """A consume that ended by itself (consumer deleted, connection closed)."""
        cc = self._cc
        return cc is not None and cc.closed

    def _on_config(self, entry: KeyValueEntry) -> bool:
        """A new value of the group's entry; False ends the member."""
        raise NotImplementedError

    def _on_deleted(self) -> None:
        """The group's entry was deleted: the member ends."""

    def _on_tick(self) -> None:
        """``ack_wait + 0.5 s`` without an update of the entry."""

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless stopped; True when stopped."""
        return self._stopping.wait(seconds)

    # -- the control thread --------------------------------------------------

    def _run(self) -> None:
        period = self._tick_period()
        tick_at = time.monotonic() + period
        try:
            while not self._stopping.is_set():
                try:
                    entry = self._watcher.next(timeout=_SLICE)
                except errors.TimeoutError:
                    if time.monotonic() >= tick_at:
                        tick_at = time.monotonic() + period
                        self._safely(self._on_tick)
                    continue
                except errors.MsgIteratorClosedError:
                    break
                except errors.Error as exc:
                    if not self._stopping.is_set():
                        self._error = exc
                    break
                if entry is None:
                    continue
                tick_at = time.monotonic() + period
                if entry.operation != PUT:
                    self._on_deleted()
                    break
                try:
                    if not self._on_config(entry):
                        break
                except ConsumerGroupError as exc:
                    self._error = exc
                    break
                except errors.Error as exc:  # the next tick joins again
                    log.warning("jsclient: %r: following a config change: %s", self, exc)
        except BaseException as exc:  # the member ends; say why
            log.exception("jsclient: %r: the member's control thread failed", self)
            self._error = exc
        finally:
            self._watcher.stop()
            try:
                self._stop_consuming()
            finally:
                self._done.set()

    def _safely(self, step: Callable[[], None]) -> None:
        try:
            step()
        except errors.Error as exc:  # retried on the next tick
            log.warning("jsclient: %r: %s", self, exc)
