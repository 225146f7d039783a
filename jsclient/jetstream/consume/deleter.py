"""Deleting consumers off the caller's path: one :class:`Deleter` per connection.

The library's readers (KV ``keys``/``history``/``watch``, object reads and
lists, ``counters.get_many``) and the ordered consumer's resets leave behind a
server-side consumer the caller should not wait for the deletion of. Each one
is queued here and deleted by one thread per connection,
``jsclient-consumer-deleter``: started when the first delete is queued, ending
once nothing was queued for :data:`IDLE` seconds, or as soon as the connection
is closed (its "closed" event wakes it). A thread per read, as before, made
200 ``keys()`` calls start 200 threads.

Every wait has a timeout: the thread waits for work in slices, and each delete
is a JetStream API request bounded by its context's timeout. What cannot be
deleted -- the queue is full (:data:`MAX_QUEUED`), the connection is down or
closed, the request fails -- is left to the server, which removes the consumer
once its inactive threshold passes. The deletes are requests, so they cannot
run on the connection's timer or callback threads (nothing may block those).
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient._threads import Signal, log

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context

__all__ = ["THREAD_NAME", "Deleter", "delete_later"]

#: The deleter thread's name (one per connection at most).
THREAD_NAME = "jsclient-consumer-deleter"
#: Seconds without work after which the thread ends (a later delete starts it again).
IDLE = 2.0
#: Deletes queued at most; beyond, consumers are left to expire on the server.
MAX_QUEUED = 10_000

_deleters: weakref.WeakKeyDictionary[Any, Deleter] = weakref.WeakKeyDictionary()
_deleters_lock = threading.Lock()


def delete_later(js: Context, stream: str, name: str) -> None:
    """Delete consumer ``name`` of ``stream`` on the connection's deleter thread."""
    client = js._client
    deleter = _deleters.get(client)
    if deleter is None:
        with _deleters_lock:
            deleter = _deleters.get(client)
            if deleter is None:
                deleter = _deleters[client] = Deleter(client)
    deleter.submit(js, stream, name)


class Deleter:
    """A queue of consumers to delete and the one thread that deletes them."""

    def __init__(self, client: Any) -> None:
        self._client = weakref.ref(client)
        self._lock = threading.Lock()
        self._queue: deque[tuple[Context, str, str]] = deque()
        self._wake = Signal()
        self._thread: threading.Thread | None = None
        self.started = 0  # threads started so far (tests)
        client._add_listener(self._on_event)  # a close wakes the thread, which ends

    def _on_event(self, event: str) -> None:
        if event == "closed":
            self._wake.set()

    def submit(self, js: Context, stream: str, name: str) -> None:
        """Queue a delete; the thread starts if it is not running (any thread)."""
        start: threading.Thread | None = None
        with self._lock:
            if len(self._queue) >= MAX_QUEUED:
                log.debug(
                    "jsclient: %d consumer deletes queued: %s left to expire", MAX_QUEUED, name
                )
                return
            self._queue.append((js, stream, name))
            if self._thread is None:
                start = self._thread = threading.Thread(
                    target=self._run, name=THREAD_NAME, daemon=True
                )
                self.started += 1
        if start is None:
            self._wake.set()
            return
        try:
            start.start()
        except RuntimeError:  # interpreter shutdown: the consumers expire by themselves
            with self._lock:
                self._thread = None
                self._queue.clear()

    def _next(self) -> tuple[Context, str, str] | None:
        """The next delete, waiting up to IDLE for one; None: the thread ends
        (it has forgotten itself under the lock, so a later submit starts another)."""
        wake = self._wake
        while True:
            client = self._client()
            closed = client is None or client.is_closed
            del client
            with self._lock:
                if closed:
                    self._queue.clear()
                if self._queue:
                    return self._queue.popleft()
                if closed:
                    self._thread = None
                    return None
            # A submit since the look above has set it: take() returns at once.
            if not wake.take(IDLE):
                with self._lock:
                    if not self._queue:
                        self._thread = None
                        return None

    def _run(self) -> None:
        try:
            while True:  # the test inside: see tests/unit/test_interrupt_cover.py
                item = self._next()
                if item is None:
                    break
                js, stream, name = item
                if not js._client.is_connected:
                    # A request would wait out its timeout; the server drops the
                    # consumer by its inactive threshold anyway.
                    log.debug("jsclient: not connected: consumer %s left to expire", name)
                    continue
                try:
                    js._api_request(f"CONSUMER.DELETE.{stream}.{name}")
                except errors.Error as exc:  # gone already, or the server is away
                    log.debug("jsclient: deleting consumer %s: %s", name, exc)
        except BaseException:  # a library thread: log, never propagate
            log.exception("jsclient: consumer deleter failed")
            with self._lock:
                self._thread = None
