"""What the Key-Value and Object store watchers share: :class:`Watcher`, an iterator
(or a callback) of items read from an ordered consumer, with one ``None`` marker.

A watcher reads an ordered consumer on a bucket's stream, filtered to the
watched subjects: the latest message of each (every message with
``include_history``; only later ones with ``updates_only``; from a sequence
with ``resume_from``). The ordered consumer checks every sequence and, after a
gap, a lost consumer, a reconnect or a server restart, starts a new one after
the last message handed out, so a watcher never repeats or skips one.

Once every message that matched when the watch began has been handed out, the
watcher gives one ``None``: at once when the consumer reported none pending,
otherwise after the message whose delivery left none pending (the ack reply's
pending count). Memory is bounded whatever the bucket holds: the server sends
at most :data:`BATCH` messages and ``max_buffered_bytes`` (8 MiB by default) of
them ahead of what was read (pulls bounded by both, see
:func:`~jsclient.jetstream.read.scan.bounded_messages`; issue 32).

``next(timeout)`` is bounded by its timeout. Iteration (``for item in w``) and
the callback form wait for updates by design, for as long as the watcher
lives, and so ride out reconnects and server restarts. If making the watcher
fails after its server-side consumer was made, that consumer is deleted.
A subclass turns the messages of each routed batch into its items
(:meth:`Watcher._fill`), leaving out those it does not want.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from jsclient import errors
from jsclient._threads import log
from jsclient.api import DeliverPolicy
from jsclient.jetstream.read.scan import bounded_messages, buffer_limit, delete_later

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.msg import Msg

T = TypeVar("T")

_mono = time.monotonic
#: Messages per pull: enough to keep the server busy, small enough to bound memory.
BATCH = 1000
#: How often a blocked watcher looks whether a reset left nothing pending.
_SLICE = 1.0


class Watcher(Generic[T]):
    """Items of the watched subjects in stream order, then live updates.

    Iterate it (``for item in w``), or call ``next(timeout)``; ``None`` comes
    once, after the items present at the start (not with ``updates_only``).
    ``stop()`` never blocks; a loop over the watcher then ends. Made with
    ``cb=``, a library thread calls ``cb(item)`` for each, ``None`` included.
    """

    #: Names the threads (``jsclient-<area>-watch-<bucket>``, ``...-unwatch-<consumer>``)
    #: and the log line of a callback that raised.
    _area = "kv"
    _kind = "key"

    def __init__(
        self,
        js: Context,
        bucket: str,
        stream: str,
        subjects: list[str],
        *,
        include_history: bool,
        updates_only: bool,
        resume_from: int | None,
        headers_only: bool,
        cb: Callable[[T | None], Any] | None,
        max_buffered_bytes: int | None = None,
    ) -> None:
        self._bucket = bucket
        if cb is not None and not callable(cb):
            raise TypeError("cb must be callable")
        max_bytes = buffer_limit(js, max_buffered_bytes)
        if resume_from is not None:
            policy, start = DeliverPolicy.BY_START_SEQUENCE, resume_from
        elif updates_only:
            policy, start = DeliverPolicy.NEW, None
        elif include_history:
            policy, start = DeliverPolicy.ALL, None
        else:
            policy, start = DeliverPolicy.LAST_PER_SUBJECT, None
        oc = js.ordered_consumer(
            stream,
            filter_subjects=subjects,
            deliver_policy=policy,
            opt_start_seq=start,
            headers_only=headers_only or None,
        )
        self._oc = oc
        self._stopped = False
        self._thread: threading.Thread | None = None
        try:
            self._start(oc, policy, updates_only, max_bytes, cb)
        except BaseException:
            # Nothing will stop this watcher: its consumer goes now (issue 32).
            self._stopped = True
            it = getattr(self, "_it", None)
            if it is not None:
                it.stop()
            delete_later(oc, self._area, "unwatch")
            raise

    def _start(
        self,
        oc: Any,
        policy: DeliverPolicy,
        updates_only: bool,
        max_bytes: int,
        cb: Callable[[T | None], Any] | None,
    ) -> None:
        # Until the initial items are out, a reset asks again for the latest of
        # each subject (and what was had already is dropped by sequence), so a
        # restart in the middle does not hand out every older message since.
        self._last_rev = 0
        info = oc.cached_info
        # Items made ready and not handed out yet (at most one routed batch),
        # with the None marker in its place; what ended the watch, once they are out.
        self._ready: deque[T | None] = deque()
        self._buf: list[tuple[Msg, int, int, int]] = []
        self._error: BaseException | None = None
        marker_now = not updates_only and not (info and info.num_pending)
        self._initial_done = updates_only or marker_now
        if marker_now:
            self._ready.append(None)
        oc._keep_start = policy is DeliverPolicy.LAST_PER_SUBJECT and not marker_now
        self._serial = oc._serial
        self._it = bounded_messages(oc, BATCH, max_bytes)
        self._cb = cb
        if cb is not None:
            self._thread = threading.Thread(
                target=self._run_callback,
                name=f"jsclient-{self._area}-watch-{self._bucket}",
                daemon=True,
            )
            self._thread.start()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._bucket!r}>"

    def __enter__(self) -> Watcher[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __iter__(self) -> Watcher[T]:
        return self

    def __next__(self) -> T | None:
        if self._cb is not None:
            raise TypeError("a watcher with a callback cannot be iterated")
        try:
            return self._next(None)
        except errors.MsgIteratorClosedError:
            raise StopIteration from None

    def next(self, timeout: float | None = 5.0) -> T | None:
        """The next item (or the one ``None``); TimeoutError when none comes in time,
        MsgIteratorClosedError once stopped."""
        if self._cb is not None:
            raise TypeError("a watcher with a callback delivers to it, not to next()")
        return self._next(timeout)

    def _next(self, timeout: float | None) -> T | None:
        ready = self._ready
        if ready:
            return ready.popleft()
        if self._stopped:
            raise errors.MsgIteratorClosedError()
        if self._error is not None:
            raise self._error
        deadline = None if timeout is None else _mono() + timeout
        next_batch = self._it._next_batch
        buf = self._buf
        while True:
            wait = _SLICE if deadline is None else min(_SLICE, deadline - _mono())
            if wait <= 0:
                raise errors.TimeoutError()
            try:
                next_batch(wait, buf)
            except errors.TimeoutError:
                if self._stopped:
                    raise errors.MsgIteratorClosedError() from None
                # Nothing came: after a reset, or because what was pending at
                # the start went away (age limit, TTL), nothing may be left.
                if not self._initial_done and (self._reset_left_nothing() or self._caught_up()):
                    self._initial_done = True
                    self._oc._keep_start = False
                    return None
                continue
            except errors.Error as exc:
                if not buf:
                    raise
                self._error = exc  # raised once what came before it is out
            if buf:
                self._fill(buf)
                if ready:
                    return ready.popleft()
            if self._error is not None:
                raise self._error

    def _fill(self, buf: list[tuple[Msg, int, int, int]]) -> None:
        """Turn what the ordered consumer delivered (each message with its stream
        sequence, pending count and time in ns) into items on ``_ready``, and the
        None marker after the one that left none pending while the initial items
        were due; then clear ``buf``. Each kind of watcher has its own."""
        raise NotImplementedError

    def _caught_up(self) -> bool:
        """``OrderedConsumer._caught_up``, asked only of a connected server (asked
        while disconnected, the question would wait out its own timeout)."""
        oc = self._oc
        return bool(oc._js._client.is_connected and oc._caught_up())

    def _reset_left_nothing(self) -> bool:
        """After a reset: does the new consumer have nothing more to deliver?"""
        oc = self._oc
        if oc._serial == self._serial:
            return False
        self._serial = oc._serial
        info = oc.cached_info
        return info is not None and not info.num_pending

    def _run_callback(self) -> None:
        cb = self._cb
        assert cb is not None
        client = self._oc._js._client
        while not self._stopped:
            try:
                item = self._next(_SLICE)
            except errors.TimeoutError:
                continue
            except errors.MsgIteratorClosedError:
                break
            except errors.Error as exc:
                client._report_error(exc)
                break
            if self._stopped:
                break
            try:
                cb(item)
            except BaseException as exc:  # the watcher outlives user code (issue 32)
                log.exception("jsclient: %s watcher callback raised", self._kind)
                client._report_error(exc)

    def stop(self) -> None:
        """Stop watching (returns at once); the server-side consumer is deleted."""
        if self._stopped:
            return
        self._stopped = True
        self._ready.clear()
        self._it.stop()
        delete_later(self._oc, self._area, "unwatch")

    @property
    def stopped(self) -> bool:
        return self._stopped
