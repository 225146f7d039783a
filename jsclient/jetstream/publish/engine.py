"""The async-publish engine: what every path that publishes and waits for acks shares.

``JetStream.publish_async`` (:mod:`.async_pub`), the managed
:class:`~jsclient.jetstream.publish.publisher.Publisher` and the Spark sink's
:class:`~jsclient.spark._publish.AckWindow` each subclass
:class:`PublishEngine`, which holds:

- **the pending set**: a dict in publish order of the publishes waiting for
  their acks, each its own reply waiter on the client's request mux with its
  reply ``_token`` and the place of its latest send in the connection's write
  stream (``_wend``, the position just past its frame, and ``_wlen``, the
  frame's length: :mod:`jsclient.protocol.writer`); and the flow-control
  :class:`~jsclient.jetstream.publish.window.Window` over its length. One
  dict operation per publish and per ack, atomic on its own: no lock of ours.
- **ack timeouts** (:meth:`PublishEngine._arm`): one timer for the default
  timeout, armed for the oldest publish's ``deadline`` (counted from joining
  the window: the set is in publish order, so the first not yet due ends a
  sweep) and armed again after a publish joined whenever none is. A publish
  whose timeout passes while its frame is still queued (the reconnect buffer,
  the write queue) is withdrawn from the queue in the same step that fails it
  (:meth:`PublishEngine._withdraw`): it is never sent later, and its
  :class:`~jsclient.errors.PublishAckTimeoutError` says ``sent=False``; one
  already written says ``sent=True``: the outcome is unknown.
- **ack matching** (:func:`decode_reply`): a reply decoded once for every
  user: the ack (a PubAck, or ``(stream, seq)`` of a plain one, made into a
  PubAck when read) or the error it says; on the reader thread for
  ``publish_async`` and the Spark sink, on its flights runner for the Publisher.
- **the 503 rule** (:meth:`PublishEngine._retry_503`): a "no responders" reply
  (the stream is starting or electing a leader) is sent again after
  ``PUBLISH_RETRY_WAIT``, at most ``PUBLISH_RETRY_ATTEMPTS`` times, from the
  timer thread, which never waits for room.
- **the disconnect rule** (:meth:`PublishEngine._on_conn_event`): the writer
  keeps the one record of what reached a socket. When a connection is lost it
  sets ``lost_written``, the position up to which whole commands went to
  sockets that are now lost, before the "disconnected" event reaches
  listeners. A publish fails with
  :class:`~jsclient.errors.PublishDisconnectedError` only if its frame ends at
  or before that position (it was written whole to a lost socket: the server
  may or may not have stored it) and the engine takes its reply token back (a
  reply that got there first wins). Every other pending publish is queued
  still (the writer kept it for the next connection, a frame cut in half
  included) and completes normally, whenever the event comes (the events
  thread may run late, even after the reconnect). A publish whose send was
  still in progress when the event came checks the same position once its
  write returned (:meth:`PublishEngine._check_sent`). "closed" fails every
  publish whose token is still registered with
  :class:`~jsclient.errors.ConnectionClosedError`.

``force_reconnect()`` asks the engines (:meth:`PublishEngine._written_unacked`)
while it lets the acks of what was already written come back before it cuts
the socket (:mod:`jsclient._reconnect`); every engine is in the client's weak
set ``_engines`` for that.

What each user keeps is its own: ``publish_async`` its futures (and it sends
a publish carrying a ``Nats-Msg-Id`` again after a disconnect instead of
failing it: the stream's duplicate window makes that safe); the Spark window
its Ack states (a lost publish is sent again by the writer with the same
Nats-Msg-Id); the Publisher its flights, retries, listener, hold and refill,
stall probes and runners. The Publisher's ack timeouts are this sweep too:
each of its sends (one ``wait_timeout`` for all) sets ``deadline`` and re-joins
the dict at its end, which keeps the dict in deadline order; its
:meth:`_expired` only hands the flight to its flights runner, which decides
the timeout there (see :mod:`.settle`). Its 503 re-sends wait on that runner's
own retry heap (they go out in one write with its retries).
The listener is registered by weak reference (:meth:`PublishEngine._listen`):
the client's listener list must not keep every engine ever made alive; the
Publisher registers its bound ``_on_conn_event`` while its flights runner runs.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from jsclient import errors
from jsclient.api import PubAck
from jsclient.jetstream._wire import (
    PUBLISH_RETRY_WAIT,
    _pub_ack_fields,
    may_resend,
    parse_pub_ack,
    status_reply_error,
)
from jsclient.jetstream.publish.window import Window

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient._threads import TimerHandle
    from jsclient.connection import Connection
    from jsclient.msg import Msg

__all__ = ["Pending", "PublishEngine", "ack_timeout_error", "decode_reply"]


class Pending(Protocol):
    """What the engine reads of a pending publish (the reply waiter itself)."""

    _token: str | None  # the reply token of its latest send (None: none registered)
    _wlen: int  # the length of its latest send's frame
    _wend: int  # that frame's end in the write stream (0: not written yet)


P = TypeVar("P", bound=Pending)


class PublishEngine(Generic[P]):
    """The pending set, window, ack timeouts, 503 rule and disconnect rule (module docstring).

    A subclass calls :meth:`_init_engine` and implements :meth:`_lost`; one
    that uses the sweep implements :meth:`_expired` (its publishes carry a
    ``deadline``), one that uses the 503 timer :meth:`_resend_503` (they carry
    ``_resends``).
    """

    _client: Core
    _conn: Connection
    _pending: dict[P, None]
    _window: Window
    _clock_lock: threading.Lock
    _sweep_timer: TimerHandle | None
    _listener: Callable[[str], None] | None

    def _init_engine(self, client: Core, limit: int, resume_at: int) -> None:
        self._client = client
        self._conn = client._conn  # lost_written and the writer: the one record
        client._engines.add(self)  # force_reconnect's grace asks every engine
        self._pending = {}  # in publish order
        self._window = Window(limit, resume_at, self._pending.__len__)
        self._clock_lock = threading.Lock()  # the sweep timer and the listener
        self._sweep_timer = None
        self._listener = None

    # -- the user's part ------------------------------------------------------------

    def _lost(self, p: P, exc: BaseException) -> None:
        """The engine took ``p``'s reply token back: its reply will not come; fail it."""
        raise NotImplementedError

    def _expired(self, p: P) -> None:
        """Timer thread: the sweep found ``p`` past its ``deadline`` (it may find
        ``p`` again at a later sweep while ``p`` stays in the set with that deadline)."""
        raise NotImplementedError

    def _expired_all(self, ps: list[P]) -> float:
        """Timer thread: the sweep's overdue publishes, in publish order. Returns
        how soon (seconds) to look again at one it left (0.0: none left)."""
        for p in ps:
            self._expired(p)
        return 0.0

    def _resend_503(self, p: P) -> None:
        """Timer thread: send ``p`` again after a 503 (a fresh token; never wait for room)."""
        raise NotImplementedError

    # -- ack timeouts ---------------------------------------------------------------

    def _arm(self, delay: float) -> None:
        """Arm the sweep in ``delay`` seconds unless it is armed."""
        with self._clock_lock:
            if self._sweep_timer is None:
                self._sweep_timer = self._client._scheduler.call_later(delay, self._sweep)

    def _sweep(self) -> None:
        # Timer thread: expire what is past its deadline; re-arm for the oldest left.
        # ``_sweep_timer`` is cleared before the copy: a publish that joins meanwhile
        # is in the copy, or sees None and arms one.
        now = time.monotonic()
        expired: list[P] = []
        with self._clock_lock:
            self._sweep_timer = None
            nxt = 0.0
            for p in list(self._pending):  # a copy: others add and remove meanwhile
                due: float = p.deadline  # type: ignore[attr-defined]
                if not due:
                    continue  # a timeout of its own (or none)
                if due > now:
                    nxt = due  # the oldest not yet due: the rest are younger
                    break
                expired.append(p)
            if nxt:
                self._sweep_timer = self._client._scheduler.call_later(nxt - now, self._sweep)
        again = self._expired_all(expired) if expired else 0.0
        if again:
            self._arm(again)  # a send still in progress: its clock is checked again soon

    # -- the 503 rule ---------------------------------------------------------------

    @staticmethod
    def _counts_503(p: Any, status: tuple[int, str] | None) -> bool:
        """True (and counted in ``p._resends``) if ``status`` is a 503 that ``p``
        is sent again for, ``PUBLISH_RETRY_WAIT`` later."""
        if status is None or status[0] != 503 or not may_resend(p._resends):
            return False
        p._resends += 1
        return True

    def _retry_503(self, p: Any, status: tuple[int, str] | None) -> bool:
        """Reader thread: True if ``status`` is a 503 that ``p`` is sent again for.

        ``p`` needs a ``_resends`` count; its token is forgotten (the reply
        that carried the 503 took it) and :meth:`_resend_503` runs after
        ``PUBLISH_RETRY_WAIT`` on the timer thread.
        """
        if not self._counts_503(p, status):
            return False
        p._token = None
        self._client._scheduler.call_later(PUBLISH_RETRY_WAIT, self._resend_503, p)
        return True

    # -- the disconnect rule --------------------------------------------------------

    def _listen(self) -> None:
        """Register for the client's connection events, by weak reference (once)."""
        with self._clock_lock:
            if self._listener is not None:
                return
            ref = weakref.ref(self)
            client = self._client

            def on_event(event: str) -> None:
                engine = ref()
                if engine is None:
                    client._remove_listener(on_event)
                else:
                    engine._on_conn_event(event)

            self._listener = on_event
        client._add_listener(on_event)

    def _unlisten(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            self._client._remove_listener(listener)

    def _on_conn_event(self, event: str) -> None:
        # Events thread (see the module docstring).
        if event == "disconnected":
            self._take_back(self._conn.lost_written, errors.PublishDisconnectedError)
        elif event == "closed":
            self._take_back(None, errors.ConnectionClosedError)

    def _take_back(self, written: int | None, exc_type: Callable[[], BaseException]) -> int:
        """Fail the publishes whose frame ends at or before ``written`` (None: all)
        and whose reply token this call takes back; returns how many."""
        cancel = self._client._mux.cancel
        n = 0
        for p in list(self._pending):  # a copy: the reader removes meanwhile
            end = p._wend
            if (written is None or 0 < end <= written) and cancel(p._token):
                n += 1
                self._lost(p, exc_type())
        return n

    def _check_sent(self, p: P) -> None:
        """After ``p``'s send returned (its token set): if its frame went whole to a
        socket that is lost already, the "disconnected" event may have looked at
        ``p`` before its place was known: apply the rule to it now."""
        end = p._wend
        if end and end <= self._conn.lost_written and self._client._mux.cancel(p._token):
            self._lost(p, errors.PublishDisconnectedError())

    def _claim(self, ps: list[P]) -> list[tuple[P, bool]]:
        """The ack timeout of overdue publishes: take their reply tokens back (a
        reply that came first wins), then withdraw the frames of those still
        queued in one step; each claimed publish with True if it was withdrawn
        (never sent, and never will be)."""
        cancel = self._client._mux.cancel
        mine = [p for p in ps if cancel(p._token)]
        return list(zip(mine, self._withdraw(mine), strict=True))

    def _withdraw(self, ps: list[P]) -> list[bool]:
        """Take the frames of ``ps`` out of the write queue where no writer took them
        yet; True for each withdrawn (never to be sent). Any thread."""
        if not ps:
            return []
        return self._conn.writer.withdraw([(p._wend - p._wlen, p._wend) for p in ps])

    def _written_unacked(self, written: int) -> bool:
        """True while a publish written at or before ``written`` still waits for its ack."""
        waiting = self._client._mux._map
        for p in list(self._pending):
            end = p._wend
            if 0 < end <= written and p._token in waiting:
                return True
        return False


def ack_timeout_error(
    subject: str, timeout: float | None, sent: bool
) -> errors.PublishAckTimeoutError:
    """The error of a publish whose ack did not come within ``timeout``."""
    within = "" if timeout is None else f" within {timeout:g} s"
    if sent:
        what = "it was sent, so the stream may or may not have stored it"
    else:
        what = "it was never sent (withdrawn from the reconnect buffer): not stored"
    return errors.PublishAckTimeoutError(
        f"nats: no publish ack on {subject}{within}; {what}", sent=sent
    )


def decode_reply(subject: str, msg: Msg | None) -> PubAck | tuple[str, int] | errors.Error:
    """A publish's reply (the engine's one ack matching): the ack when the stream
    stored it, a PubAck or, for the plain ``{"stream":..,"seq":..}``, the pair
    ``(stream, seq)``; else the error it says: an API error, a status error
    (:class:`~jsclient.errors.NoStreamResponseError` for a 503, which the 503
    rule may send again), ConnectionClosedError for ``None`` (the connection
    closed). Never raises; runs once per ack."""
    if msg is None:
        return errors.ConnectionClosedError()
    data = msg.data
    if data:
        fields = _pub_ack_fields(data)
        if fields is not None:
            return fields  # type: ignore[no-any-return]
        try:
            return parse_pub_ack(data)
        except errors.Error as exc:
            return exc
    return status_reply_error(subject, msg.status)
