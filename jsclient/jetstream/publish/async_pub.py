"""``JetStream.publish_async``: the window of publishes waiting for their acks.

Each publish gets a reply token on the client's request mux; the ack is
parsed on the socket reader thread, which only decodes it and completes the
future (the future's done callbacks run on the client's user-callback
thread, never on the reader). What publishing threads, the reader, the timer
thread and the events thread share is the window (a dict, changed one atomic
operation at a time), the waiters' counts (under a lock that only waiting and
waking take) and each publish's reply token (handed over under the futures'
completion lock, so a publish abandoned while it is being sent never keeps
its token registered).

- **Window**: at most ``max_pending`` publishes wait for acks; beyond that a
  publisher waits up to ``stall_wait`` for a quarter of the window to free
  up, then gets :class:`~jsclient.errors.TooManyStalledMsgsError`.
- **Ack timeout**: every publish has one (the context's
  ``publish_async_timeout``, by default its ``timeout`` of 5 s, or the call's
  ``ack_timeout``), counted from when it joins the window, so a lost ack (a
  stream leader stepping down drops publishes) fails its future with
  :class:`~jsclient.errors.PublishAckTimeoutError` (a ``TimeoutError``) and
  frees its place, and ``publish_async_complete()`` always ends. A publish
  still queued then (the reconnect buffer) is withdrawn in the same step
  (``sent=False``: never sent, not stored); one that was written may or may
  not be stored (``sent=True``). Publishes with the default timeout are
  checked by the engine's sweep timer; one with a timeout of its own gets its
  own timer, which its ack cancels (a cancelled timer leaves the scheduler's heap).
- **503**: a "no responders" reply (the stream is starting or electing a
  leader) is retried twice, 250 ms apart, from the timer thread, which
  queues the retry without ever waiting for room.
- **Disconnect**: a future fails with
  :class:`~jsclient.errors.PublishDisconnectedError` only if its frame was
  written whole to the socket that was lost (the server may or may not have
  stored it), as the writer recorded it; every other pending publish waits in
  the reconnect buffer, goes out on reconnect and completes normally (the
  engine's one rule: :mod:`jsclient.jetstream.publish.engine`). A publish that
  carries a ``Nats-Msg-Id`` is not failed: it is sent again on the new
  connection (the stream's duplicate window drops a second copy), within its
  ack timeout. "closed" fails every pending future.

The window, the sweep, the 503 timer and the disconnect rule are the
engine's (:class:`~jsclient.jetstream.publish.engine.PublishEngine`); the
futures are this module's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from time import monotonic as _mono
from typing import TYPE_CHECKING

from jsclient import errors
from jsclient._future import LazyFuture, completion_lock
from jsclient._threads import TimerHandle
from jsclient.api import PubAck
from jsclient.jetstream._wire import _pub_ack_fields as _plain_ack
from jsclient.jetstream.publish.engine import PublishEngine, ack_timeout_error, decode_reply

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.msg import Msg


#: A timeout that finds a publish's send in progress looks again this much later.
_LOOK_AGAIN = 0.01


def _has_msg_id(headers: bytes | None) -> bool:
    return headers is not None and headers.lower().find(b"\nnats-msg-id:") >= 0


class PubFuture(LazyFuture[PubAck]):
    """A publish's future: cannot be cancelled (that would leak its window slot)."""

    __slots__ = ()


class AsyncPublisher(PublishEngine["_AsyncPub"]):
    """The async publishes of one JetStream context (see the module docstring)."""

    def __init__(
        self, client: Core, max_pending: int, stall_wait: float, ack_timeout: float | None
    ) -> None:
        self.max_pending = int(max_pending)
        self.stall_wait = float(stall_wait)
        self.ack_timeout = None if ack_timeout is None else float(ack_timeout)
        # A stalled publish_async resumes once a quarter of the window is free.
        limit = max(0, self.max_pending)
        self._init_engine(client, limit, max(0, limit - max(1, limit // 4)))
        self.runner = client._callbacks.submit  # where the futures' done callbacks run

    @property
    def pending(self) -> dict[_AsyncPub, None]:
        """The publishes waiting for their acks, in publish order."""
        return self._pending

    def publish(
        self,
        subject: str,
        payload: bytes,
        headers: bytes | None,
        ack_timeout: float | None,
        stall_wait: float | None = None,
    ) -> PubFuture:
        if self._listener is None:
            self._listen()
        client = self._client
        ack = _AsyncPub(self, subject, payload, headers, self.runner)
        own = 0.0  # a timeout of this publish's own, on a timer of its own
        timeout = None  # the context's timeout, checked by the sweep
        if ack_timeout is None or ack_timeout == self.ack_timeout:
            timeout = self.ack_timeout
        elif ack_timeout > 0:
            own = ack_timeout
        else:
            raise ValueError(f"ack_timeout must be positive, got {ack_timeout!r}")
        pending = self._pending
        if 0 < self.max_pending <= len(pending):  # window.full(), inline: once per publish
            # Back-pressure: a full window must drain to its mark, within stall_wait.
            window = self._window
            stall = self.stall_wait if stall_wait is None else stall_wait  # this call's own
            if not window.wait_room(_mono() + stall) and window.full():
                raise errors.TooManyStalledMsgsError()
        if timeout is not None:
            ack.deadline = _mono() + timeout  # counted from joining the window
        # One dict operation, atomic on its own (a built-in container's
        # operations are, with or without a GIL): no lock of ours for it.
        # Threads publishing at once may each add one past the window.
        pending[ack] = None
        # Armed after joining (issue 32): a publish that waited for room while
        # the sweep failed the whole window and found nothing to re-arm for
        # was left with a deadline and no timer. A sweep clears its timer
        # before it copies the window: it sees this publish, or this line
        # sees None and arms one.
        if timeout is not None and self._sweep_timer is None:
            self._arm(timeout)
        mux = client._mux
        try:
            # send_tracked(), inline (a new publish's ``_wend`` is 0 already)
            token = mux._send(subject, payload, headers, ack, ack, False, False)
        except BaseException:
            self._forget(ack)
            raise
        with completion_lock:  # set_token(), inline: once per publish
            ack._token = token
            done = ack._lz_done
        if done:
            # Failed (the connection closed) before the token was set; see abandon().
            mux.cancel(token)
            return ack
        if own:
            timer = ack.timer = client._scheduler.call_later(own, self._expired, ack)
            # An ack that came first found no timer to cancel: cancel it here, or
            # it stays in the heap until it fires. Read under the lock the ack's
            # completion takes, which finish() leaves before it reads the timer:
            # one of the two sees the other.
            with completion_lock:
                done = ack._lz_done
            if done:
                timer.cancel()
        if ack._wend <= self._conn.lost_written:  # _check_sent's test, inline: once per publish
            self._check_sent(ack)
        return ack

    def complete(self, timeout: float | None) -> None:
        """Wait until every publish so far is acked or failed (TimeoutError after ``timeout``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._window.wait_below(0, deadline):
            raise errors.TimeoutError(f"nats: {len(self._pending)} async publishes still pending")

    # -- the engine's hooks ---------------------------------------------------------

    def _expired(self, ack: _AsyncPub) -> None:
        # Timer thread: a publish's own timer.
        again = self._expired_all([ack])
        if again and not ack._lz_done:
            ack.timer = self._client._scheduler.call_later(again, self._expired, ack)

    def _expired_all(self, acks: list[_AsyncPub]) -> float:
        # Timer thread: time out what is overdue, withdrawing what was never sent
        # (the engine's claim: the token back first, then the frames in one step).
        claim: list[_AsyncPub] = []
        never: list[_AsyncPub] = []
        again = 0.0
        for ack in acks:
            if ack._lz_done:
                continue
            if ack._token is not None:
                claim.append(ack)
            elif ack._resends:
                never.append(ack)  # a 503 said "not stored"; its re-send is not queued yet
            else:
                again = _LOOK_AGAIN  # its send is in progress: decided once it returned
        for ack, gone in self._claim(claim):
            self.finish(ack, None, self._timeout_error(ack, ack._maybe or not gone))
        for ack in never:
            self.finish(ack, None, self._timeout_error(ack, ack._maybe))
        return again

    def _timeout_error(self, ack: _AsyncPub, sent: bool) -> errors.PublishAckTimeoutError:
        timeout = self.ack_timeout if ack.deadline else None  # (own timeouts are not kept)
        return ack_timeout_error(ack.subject, timeout, sent)

    def _lost(self, ack: _AsyncPub, exc: BaseException) -> None:
        # The engine took the token back: the reply will not come. With a
        # Nats-Msg-Id it is sent again instead (the stream drops a second copy).
        if isinstance(exc, errors.PublishDisconnectedError) and _has_msg_id(ack.headers):
            ack._maybe = True  # the lost send may have been stored
            self._send_again(ack, exc)
            return
        self.finish(ack, None, exc)

    def _on_conn_event(self, event: str) -> None:
        super()._on_conn_event(event)
        if event == "closed":
            # Every pending future fails, with or without a registered token
            # (a 503 re-send waiting for its timer, a send in progress).
            for ack in list(self._pending):
                self.abandon(ack, errors.ConnectionClosedError())

    def _resend_503(self, ack: _AsyncPub) -> None:
        # Timer thread: a fresh reply token; never waits for room.
        if not ack._lz_done:
            self._send_again(ack, None)

    def _send_again(self, ack: _AsyncPub, cause: BaseException | None) -> None:
        # Timer thread (503) or events thread (a disconnect): the same bytes with
        # a fresh reply token, queued without waiting for room (to the reconnect
        # buffer while disconnected). If it cannot be queued, the publish fails
        # with ``cause`` (or the queue's error).
        client = self._client
        try:
            token = client._mux.send_tracked(
                ack.subject, ack.payload, ack.headers, ack, nowait=True
            )
        except errors.Error as exc:
            self.finish(ack, None, cause or exc)
            return
        if ack.set_token(token):
            client._mux.cancel(token)
            self._withdraw([ack])  # failed meanwhile (closed): not sent after that
            return
        self._check_sent(ack)

    # -- completing -----------------------------------------------------------------

    def failed_reply(self, ack: _AsyncPub, exc: errors.Error, msg: Msg | None) -> None:
        # Reader thread: the reply said no (a 503 is sent again, the 503 rule).
        if (
            msg is not None
            and isinstance(exc, errors.NoStreamResponseError)
            and not ack._lz_done
            and self._retry_503(ack, msg.status)
        ):
            return
        self.finish(ack, None, exc)

    def abandon(self, ack: _AsyncPub, exc: BaseException) -> None:
        """Fail a pending publish whose reply will not be awaited any more."""
        if self.finish(ack, None, exc):
            # Read after ``done`` is set, under the lock the publisher sets the
            # token and reads ``done`` under: one of the two cancels it.
            with completion_lock:
                token = ack._token
            self._client._mux.cancel(token)

    def finish(self, ack: _AsyncPub, result: PubAck | None, exc: BaseException | None) -> bool:
        """Complete the future unless another path did first; True if this call did."""
        if not ack._complete(result, exc):
            return False
        timer = ack.timer
        if timer is not None:
            timer.cancel()
        self._forget(ack)
        return True

    def _forget(self, ack: _AsyncPub) -> None:
        # Reader thread, mostly: one dict operation; the window takes a lock
        # only when a publisher or a completer waits.
        pending = self._pending
        pending.pop(ack, None)
        window = self._window
        # released()'s own first test, inline: once per ack.
        if window._signal.waiting and len(pending) <= window.wake_at:
            window.released()


class _AsyncPub(PubFuture):
    """One async publish waiting for its ack, and the future ``publish_async`` returns.

    Being its own future saves an object per publish. It is also its own
    reply waiter on the client's request mux: ``deliver`` gets the reply on
    the socket reader thread.
    """

    __slots__ = (
        "_maybe",
        "_resends",
        "_token",
        "_wend",
        "_wlen",
        "deadline",
        "headers",
        "owner",
        "payload",
        "subject",
        "timer",
    )

    def __init__(
        self,
        owner: AsyncPublisher,
        subject: str,
        payload: bytes,
        headers: bytes | None,
        runner: Callable[..., None],
    ) -> None:
        # LazyFuture's fields, inline (this runs once per publish).
        self._lz_done = False
        self._lz_value = None
        self._lz_exc = None
        self._lz_cbs = None
        self._lz_real = False
        self._lz_runner = runner
        self.owner = owner
        self.subject = subject
        self.payload = payload
        self.headers = headers
        self._token: str | None = None
        self.timer: TimerHandle | None = None
        self.deadline = 0.0  # checked by the owner's sweep (0: a timer of its own, or none)
        self._wend = 0  # where its latest frame ends in the write stream (the engine's rule)
        self._wlen = 0
        self._resends = 0  # 503 re-sends (the engine's 503 rule)
        self._maybe = False  # an earlier send went to a lost socket (re-sent: it has an id)

    def _lz_result(self) -> PubAck | None:
        # Under the future's lock: the PubAck of a plain ack, built once.
        value: PubAck | tuple[str, int] | None = self._lz_value
        if type(value) is tuple:
            value = self._lz_value = PubAck(stream=value[0], seq=value[1])
        return value  # type: ignore[return-value]

    def set_token(self, token: str) -> bool:
        """Note the reply token; True if the future is done already (the caller
        then cancels the token: whoever finished it may have read none)."""
        with completion_lock:
            self._token = token
            return self._lz_done

    def deliver(self, msg: Msg | None) -> None:
        # The request mux's waiter protocol: the reply, on the socket reader
        # thread (None: the connection closed). Decode and complete, never block.
        # The engine's ack matching; its first step (the plain ack) inline.
        data = msg.data if msg is not None else None
        r = _plain_ack(data) if data else None
        if r is None:
            r = decode_reply(self.subject, msg)
        if type(r) is not tuple and not isinstance(r, PubAck):
            self.owner.failed_reply(self, r, msg)  # type: ignore[arg-type]
            return
        # owner.finish(self, r, None), inline for a future nobody waits on
        # and no callback: once per publish. The claim is _complete()'s. A
        # plain ack stays its (stream, seq) until the result is read.
        with completion_lock:
            if self._lz_done or self._lz_real or self._lz_cbs:
                plain = False
            else:
                self._lz_value = r
                self._lz_done = plain = True
        if not plain:
            ack = PubAck(stream=r[0], seq=r[1]) if type(r) is tuple else r
            self.owner.finish(self, ack, None)  # type: ignore[arg-type]  # the whole rule
            return
        timer = self.timer
        if timer is not None:
            timer.cancel()
        self.owner._forget(self)
