"""The result backend's plumbing: one connection per process, and waking ``get()``.

Celery makes a backend per thread (``app.backend`` is thread-local) and
forks its pool after import, so connections are shared per process and per
server set (:func:`shared_client`), made on first use, made anew in a forked
child, closed at exit.

:class:`ResultConsumer` is what lets ``AsyncResult.get()`` wait without
polling. A KV put is a message on the bucket's subject for that key
(``$KV.<bucket>.<key>``, what a KV watch reads); the consumer subscribes to
the subjects of the tasks being waited for, and a state change wakes the
waiting thread at once. It then reads the current value once (Celery's
``on_wait_for_pending``), so a result stored before the subscription is not
missed. Delete and purge markers are ignored.

One race is left to close: a write the server routed just before it took
the subscription, but that the stream had not stored yet when the first
read came (a stream stores what it receives a moment after routing it). So
each waited-for key is read once more :data:`RECHECKS` after it was
subscribed; from then on only writes wake the waiter.

Each subscription with a callback has a dispatcher thread, so while more
than :data:`WILDCARD_AT` tasks are waited for at once (a large group), one
subscription to the whole bucket replaces them, and what is not waited for
is dropped here; it ends when nothing is waited for any more.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from celery import states
from celery.backends.asynchronous import BaseResultConsumer

import jsclient
from jsclient import errors
from jsclient._threads import Signal
from jsclient.client import Client
from jsclient.msg import Msg

if TYPE_CHECKING:
    from jsclient.contrib.celery._ports import BackendPort
    from jsclient.subscription import Subscription

log = logging.getLogger("jsclient.contrib.celery")

#: Tasks waited for at once from which one bucket-wide subscription serves them all.
WILDCARD_AT = 32
#: Seconds after subscribing at which a waited-for key is read once more (see above).
RECHECKS = (0.25, 2.0)

_lock = threading.Lock()
_clients: dict[tuple[Any, ...], tuple[int, Client]] = {}
_atexit = False


def _key(kwargs: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, repr(v)) for k, v in kwargs.items()))


def shared_client(kwargs: dict[str, Any]) -> Client:
    """This process's client for these ``jsclient.connect`` arguments (made on first use)."""
    global _atexit
    key = _key(kwargs)
    pid = os.getpid()
    with _lock:
        hit = _clients.get(key)
        if hit is not None and hit[0] == pid and not hit[1].is_closed:
            return hit[1]
        nc = jsclient.connect(**kwargs)
        _clients[key] = (pid, nc)
        if not _atexit:
            atexit.register(close_clients)
            _atexit = True
    return nc


def close_clients() -> None:
    """Close this process's result connections (at exit; a parent's are left alone)."""
    with _lock:
        mine = [nc for pid, nc in _clients.values() if pid == os.getpid()]
        _clients.clear()
    for nc in mine:
        try:
            nc.drain(timeout=2.0)
        except errors.Error:
            pass


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # a parent's thread may have held it at the fork
    _clients.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


class ResultConsumer(BaseResultConsumer):  # type: ignore[misc]
    """Wakes ``AsyncResult.get()`` when a waited-for task's key changes (see the module)."""

    backend: BackendPort

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._subs: dict[str, Subscription] = {}
        self._waited: dict[str, str] = {}  # subject -> task id
        self._wild: Subscription | None = None
        self._sig = Signal()
        self._got: deque[bytes] = deque()
        self._rechecks: list[tuple[float, str, str]] = []  # (when, subject, task id)

    def _mine(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's subscriptions are not ours
            self._reset()

    def start(self, initial_task_id: str, **kwargs: Any) -> None:
        """Start consuming (with the first task waited for)."""
        self.consume_from(initial_task_id)

    def on_after_fork(self) -> None:
        """Forget the parent's subscriptions."""
        self._reset()
        super().on_after_fork()

    def consume_from(self, task_id: str) -> None:
        """Subscribe to ``task_id``'s key."""
        self._mine()
        subject = self.backend.key_subject(self.backend.get_key_for_task(task_id))
        drop: list[Subscription] = []
        with self._lock:
            if subject in self._waited:
                return
            self._waited[subject] = task_id
            now = time.monotonic()
            self._rechecks.extend((now + d, subject, task_id) for d in RECHECKS)
            wild = self._wild is None and len(self._waited) > WILDCARD_AT
            single = self._wild is None and not wild
        if wild:
            sub = self.backend.client.subscribe(self.backend.key_subject(">"), cb=self._on_msg)
            with self._lock:
                self._wild = sub
                drop = list(self._subs.values())
                self._subs.clear()
        elif single:
            sub = self.backend.client.subscribe(subject, cb=self._on_msg)
            with self._lock:
                if self._wild is None and subject in self._waited:
                    self._subs[subject] = sub
                else:
                    drop.append(sub)
        for old in drop:
            _unsubscribe(old)

    def cancel_for(self, task_id: str) -> None:
        """Stop listening for ``task_id``."""
        self._mine()
        subject = self.backend.key_subject(self.backend.get_key_for_task(task_id))
        with self._lock:
            self._waited.pop(subject, None)
            sub = self._subs.pop(subject, None)
            if not self._waited and self._wild is not None:
                sub, self._wild = self._wild, None
        if sub is not None:
            _unsubscribe(sub)

    def stop(self) -> None:
        """Unsubscribe from everything."""
        with self._lock:
            subs = list(self._subs.values())
            if self._wild is not None:
                subs.append(self._wild)
            self._subs.clear()
            self._waited.clear()
            self._wild = None
        for sub in subs:
            _unsubscribe(sub)

    def on_wait_for_pending(self, result: Any, **kwargs: Any) -> None:
        """Before waiting: take the states stored already (they may be final).

        One read of every key, as Celery's ``_iter_meta`` does, without the
        half-second sleep its ``get_many`` takes after the read for a group.
        """
        members = getattr(result, "results", None)
        ids = [r.id for r in members] if members is not None else [result.id]
        backend = self.backend
        for value in backend.mget([backend.get_key_for_task(i) for i in ids]):
            if value:
                self.on_state_change(backend.decode_result(value), None)

    def on_state_change(self, meta: dict[str, Any], message: Any) -> None:
        """A task's new state; a final one ends the subscription."""
        super().on_state_change(meta, message)
        if meta.get("status") in states.READY_STATES and meta.get("task_id"):
            self.cancel_for(meta["task_id"])

    def _recheck(self) -> list[bytes]:
        """Read the keys whose recheck is due (see the module); their values, if any."""
        now = time.monotonic()
        with self._lock:
            due = [r for r in self._rechecks if r[0] <= now and r[1] in self._waited]
            self._rechecks = [r for r in self._rechecks if r[0] > now and r[1] in self._waited]
        out = []
        for _, _, task_id in due:
            value = self.backend.get(self.backend.get_key_for_task(task_id))
            if value:
                out.append(value)
        return out

    def _on_msg(self, msg: Msg) -> None:
        # A subscription thread: hand the value to the waiting thread.
        hdrs = msg.headers
        if hdrs and hdrs.get("KV-Operation") in ("DEL", "PURGE"):
            return
        if not msg.data or msg.subject not in self._waited:
            return
        with self._sig.lock:
            self._got.append(msg.data)
            self._sig.notify_locked()

    def drain_events(self, timeout: float | None = None) -> None:
        """Apply the state changes that arrived, waiting up to ``timeout`` s for one."""
        self._mine()
        wait = timeout
        with self._lock:
            if self._rechecks:
                soonest = max(0.0, min(r[0] for r in self._rechecks) - time.monotonic())
                wait = soonest if wait is None else min(wait, soonest)
        woke = self._sig.wait_for(lambda: bool(self._got), wait)
        got: list[bytes] = []
        if woke:
            with self._sig.lock:
                got = list(self._got)
                self._got.clear()
        got.extend(self._recheck())
        if not got and not woke and (timeout is None or wait == timeout):
            raise TimeoutError()  # socket.timeout: nothing came (Celery's drainer expects it)
        for data in got:
            try:
                meta = self.backend.decode_result(data)
            except Exception:  # not a result: another writer's key
                log.warning("result backend: a value that is not a task result", exc_info=True)
                continue
            self.on_state_change(meta, None)


def _unsubscribe(sub: Subscription) -> None:
    try:
        sub.unsubscribe()
    except errors.Error:
        pass  # closed: nothing to undo
