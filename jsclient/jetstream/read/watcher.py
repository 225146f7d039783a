"""What the Key-Value and Object store watchers share: :class:`Watcher`, an iterator
(or a callback) of items read from an ordered consumer, with one ``None`` marker.

A watcher reads an :class:`~jsclient.jetstream.read.reader.OrderedReader` on a
bucket's stream, filtered to the watched subjects: the latest message of each (every message with
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
fails after its server-side consumer was made, that consumer is deleted
(by the connection's deleter, as when the watcher is stopped).
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
from jsclient.jetstream.read.reader import SLICE, Entry, OrderedReader, buffer_limit

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.consume.contexts import MessagesContext

T = TypeVar("T")

_mono = time.monotonic
#: Messages per pull: enough to keep the server busy, small enough to bound memory.
BATCH = 1000


class Watcher(Generic[T]):
    """Items of the watched subjects in stream order, then live updates.

    Iterate it (``for item in w``), or call ``next(timeout)``; ``None`` comes
    once, after the items present at the start (not with ``updates_only``).
    ``stop()`` never blocks; a loop over the watcher then ends. Made with
    ``cb=``, a library thread calls ``cb(item)`` for each, ``None`` included.
    """

    #: Names the callback thread (``jsclient-<area>-watch-<bucket>``) and the
    #: log line of a callback that raised.
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
        reader = OrderedReader(
            js, stream, subjects, policy, start_seq=start, headers_only=headers_only
        )
        self._reader = reader
        self._oc = reader.oc
        self._stopped = False
        self._thread: threading.Thread | None = None
        try:
            self._start(reader, policy, updates_only, max_bytes, cb)
        except BaseException:
            # Nothing will stop this watcher: its consumer goes now (issue 32).
            self._stopped = True
            reader.close()
            raise

    def _start(
        self,
        reader: OrderedReader,
        policy: DeliverPolicy,
        updates_only: bool,
        max_bytes: int,
        cb: Callable[[T | None], Any] | None,
    ) -> None:
        # Until the initial items are out, a reset asks again for the latest of
        # each subject (and what was had already is dropped by sequence), so a
        # restart in the middle does not hand out every older message since.
        self._last_rev = 0
        oc = reader.oc
        # Items made ready and not handed out yet (at most one routed batch),
        # with the None marker in its place; what ended the watch, once they are out.
        self._ready: deque[T | None] = deque()
        self._buf: list[Entry] = []
        self._error: BaseException | None = None
        marker_now = not updates_only and not reader.pending
        self._initial_done = updates_only or marker_now
        if marker_now:
            self._ready.append(None)
        oc._keep_start = policy is DeliverPolicy.LAST_PER_SUBJECT and not marker_now
        self._serial = oc._serial
        self._cb = cb
        reader.open(BATCH, max_bytes)
        if cb is not None:
            self._thread = threading.Thread(
                target=self._run_callback,
                name=f"jsclient-{self._area}-watch-{self._bucket}",
                daemon=True,
            )
            self._thread.start()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._bucket!r}>"

    @property
    def _it(self) -> MessagesContext | None:
        """The reader's bounded pulls (see ``OrderedReader``)."""
        return self._reader.it

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
        buf = self._buf
        read = self._reader.read
        while True:
            try:
                if not read(buf, deadline, self._idle):
                    # Nothing came: after a reset, or because what was pending at
                    # the start went away (age limit, TTL), nothing is left.
                    self._initial_done = True
                    self._oc._keep_start = False
                    return None
            except errors.Error as exc:
                if not buf:
                    raise
                self._error = exc  # raised once what came before it is out
            self._fill(buf)
            if ready:
                return ready.popleft()
            if self._error is not None:
                raise self._error

    def _idle(self) -> bool:
        """A wait slice brought nothing: closed? or, while the initial items
        are due, is nothing left of them (True: the None marker is due)?"""
        if self._stopped:
            raise errors.MsgIteratorClosedError()
        return not self._initial_done and (self._reset_left_nothing() or self._caught_up())

    def _fill(self, buf: list[Entry]) -> None:
        """Turn what the ordered consumer delivered (each message with its stream
        sequence, pending count and time in ns) into items on ``_ready``, and the
        None marker after the one that left none pending while the initial items
        were due; then clear ``buf``. Each kind of watcher has its own."""
        raise NotImplementedError

    def _caught_up(self) -> bool:
        """``OrderedReader.caught_up``: nothing left to deliver (a connected server says)."""
        return self._reader.caught_up()

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
                item = self._next(SLICE)
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
        self._reader.close()

    @property
    def stopped(self) -> bool:
        """True once ``stop()`` was called (leaving the ``with`` block calls it)."""
        return self._stopped
