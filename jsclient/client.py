"""The blocking core NATS client: publish, subscribe, request, flush, drain, close."""

from __future__ import annotations

import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from jsclient import _fork, _impl, errors
from jsclient._mux import RequestMux
from jsclient._threads import CallbackRunner, Scheduler, TimerHandle, log
from jsclient._threads import remaining as _left
from jsclient.connection import (
    CLOSED,
    CONNECTED,
    DRAINING,
    FORKED,
    RECONNECTING,
    Connection,
    Options,
    err_to_exception,
)
from jsclient.msg import Msg
from jsclient.protocol import commands
from jsclient.protocol import headers as _headers
from jsclient.subscription import Subscription

if TYPE_CHECKING:
    from jsclient.jetstream.context import JetStream
    from jsclient.protocol.delivery import SubState
else:
    SubState = _impl.delivery.SubState

Reply = _impl.delivery.Reply
_QUEUED = _impl.writer.QUEUED
_TOO_BIG = _impl.writer.TOO_BIG
_UNKNOWN_SUBJECT = _impl.writer.UNKNOWN_SUBJECT

_status_of = _impl.status.status_of
_SUBJECT_CACHE_MAX = 4096


class _InternalSub(SubState):
    """A library-owned subscription: its handler runs on the reader thread, or,
    without one, its messages reach its queue in batches.

    Handlers must be short and never block: they hand work to other threads.
    """

    def __init__(self, sid: int, subject: str, handler: Callable[[Msg], None] | None) -> None:
        super().__init__(sid, 1 << 62, 1 << 62, 0, handler)
        self.subject = subject
        self.queue = None


class Client:
    """A connection to NATS. Create it with :func:`jsclient.connect`."""

    def __init__(self, opts: Options) -> None:
        self._opts = opts
        self._subs: dict[int, Any] = {}
        self._sid: Iterator[int] = _impl.writer.Counter(1)  # sids: unique across threads
        self._subject_cache: dict[str, bytes] = {}
        self._listeners: list[Callable[[str], None]] = []
        # JetStream pull contexts (consume, messages, fetch) that drain() drains.
        self._drainables: weakref.WeakSet[Any] = weakref.WeakSet()
        # First: it checks the options (server URLs), before any thread exists.
        self._conn = Connection(self, opts, self._subs, Msg)
        self._w = self._conn.writer
        self._wq = self._w.wq  # the write queue, for the publish and ack fast paths
        self._wq.subjects = self._subject_cache
        # User callbacks (error_cb, disconnected_cb, ..., future done-callbacks)
        # and the library's own connection listeners run on separate threads,
        # so a slow user callback never delays a re-pull or an ordered reset.
        self._callbacks = CallbackRunner("jsclient-callbacks")
        self._events = CallbackRunner("jsclient-events")
        self._timers = Scheduler("jsclient-timers")
        self._ping_timer: TimerHandle | None = None
        from nats.nuid import NUID

        self._nuid = NUID()
        # Request/reply: the library's one multiplexer (JetStream, the Publisher
        # and the Spark sink send their requests through it too).
        self._mux = RequestMux(self, self._w, opts.inbox_prefix, self._next_id)
        self._close_lock = threading.Lock()
        self._closed_done = False

    def _start(self) -> None:
        # Tracked before the socket exists, so a fork during connect is covered too.
        _fork.track(self)
        try:
            self._conn.connect()
        except BaseException:
            _fork.forget(self)
            self._stop_threads()
            raise
        self._schedule_ping()

    def _after_fork_in_child(self) -> None:
        """Fork hook (child): detach from the parent's socket; every use raises from now on.

        Subscriptions end with ForkedConnectionError, so a ``next_msg`` in the
        child raises instead of reading the parent's buffered messages (or
        waiting on a queue whose producer does not exist here).
        """
        conn = self._conn
        conn.after_fork_in_child()
        if conn.status is not FORKED:
            return
        err = conn.forked_error()
        for sub in list(self._subs.values()):
            if isinstance(sub, Subscription):
                sub._end_in_forked_child(err)

    # -- context manager ----------------------------------------------------

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.is_closed:
            return
        if self._conn.status is FORKED or self._conn.pid != os.getpid():
            # Leaving a ``with`` block in a forked child: drop the child's copy
            # quietly; the connection is the parent's to drain.
            self._conn.after_fork_in_child()
            return
        try:
            self.drain()
        except errors.Error:
            self.close()

    # -- properties ---------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._conn.status is CONNECTED

    @property
    def _lost_at(self) -> float:
        # time.monotonic() of the latest lost socket (0.0: none yet)
        return self._conn.lost_at

    @property
    def is_closed(self) -> bool:
        return self._conn.status is CLOSED

    @property
    def is_reconnecting(self) -> bool:
        return self._conn.status is RECONNECTING

    @property
    def is_draining(self) -> bool:
        return self._conn.status is DRAINING

    @property
    def connected_url(self) -> str | None:
        return self._conn.connected_url if self.is_connected else None

    @property
    def server_info(self) -> dict[str, Any]:
        return dict(self._conn.server_info)

    @property
    def max_payload(self) -> int:
        return self._conn.max_payload

    @property
    def servers(self) -> list[str]:
        return [s.url for s in self._conn.pool]

    @property
    def discovered_servers(self) -> list[str]:
        return [s.url for s in self._conn.pool if s.discovered]

    @property
    def stats(self) -> dict[str, int]:
        return {
            "in_msgs": int(self._conn.rs.in_msgs),
            "out_msgs": self._conn.out_msgs,
            "in_bytes": int(self._conn.rs.in_bytes),
            "out_bytes": self._conn.out_bytes,
            "reconnects": self._conn.reconnects,
        }

    @property
    def pending_data_size(self) -> int:
        """Bytes queued for the socket and not yet written."""
        return self._conn.pending_bytes()

    def new_inbox(self) -> str:
        return f"{self._opts.inbox_prefix}.{self._nuid.next().decode()}"

    def _next_id(self) -> str:
        return self._nuid.next().decode()

    # -- publishing ---------------------------------------------------------

    def _subject_bytes(self, subject: str) -> bytes:
        b = self._subject_cache.get(subject)
        if b is None:
            commands.check_subject(subject)
            b = subject.encode()
            if len(self._subject_cache) >= _SUBJECT_CACHE_MAX:
                self._subject_cache.clear()
            self._subject_cache[subject] = b
        return b

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        reply: str | None = None,
        headers: _headers.HeadersIn | None = None,
    ) -> None:
        """Publish a message. Buffered; ``flush()`` waits until the server has it.

        The write queue holds at most ``pending_size`` bytes (connect option);
        beyond that this call writes the queue itself or waits up to
        ``flush_timeout`` for the flusher, then raises FlushTimeoutError.
        """
        if reply is None and headers is None:
            # The hot path: one call looks the subject up in the (shared) subject
            # cache, encodes, checks and queues the frame.
            rc = self._wq.pub_str(subject, payload)
            if rc != _QUEUED and not self._w.queued(rc):
                self._publish_slow(subject, payload, rc)
            return
        subj = self._subject_cache.get(subject)
        if subj is None:
            subj = self._subject_bytes(subject)
        conn = self._conn
        plen = len(payload)
        if reply:
            # Replies are often unique (inboxes): checked, never cached.
            commands.check_subject(reply, "reply subject")
            rep = reply.encode()
        else:
            rep = b""
        if headers:
            hdr = _headers.encode(headers)
            if len(hdr) + plen > conn.max_payload:
                raise self._too_big(len(hdr) + plen)
            data = commands.hpub(subj, rep, hdr, payload)
        else:
            if plen > conn.max_payload:
                raise self._too_big(plen)
            data = commands.pub(subj, rep, payload)
        self._w.send(data, plen, 1)

    def _publish_slow(self, subject: str, payload: bytes, rc: int) -> None:
        """``publish`` without reply or headers, when the fast path declined."""
        conn = self._conn
        subj = self._subject_bytes(subject)
        if rc == _UNKNOWN_SUBJECT:
            rc = self._wq.pub(subj, payload, conn.max_payload)
            if self._w.queued(rc):
                return
        if rc == _TOO_BIG:
            raise self._too_big(len(payload))
        data = payload if type(payload) is bytes else memoryview(payload).tobytes()
        self._w.send(b"PUB %s %d\r\n%s\r\n" % (subj, len(data), data), len(data), 1)

    def _too_big(self, size: int) -> errors.MaxPayloadError:
        return errors.MaxPayloadError(
            f"nats: payload of {size} bytes exceeds max_payload {self._conn.max_payload}"
        )

    def _publish_ack(self, subject: str, body: bytes) -> None:
        """Publish an ack to a server-made ``$JS.ACK`` subject.

        Every ack subject is unique, so it bypasses the subject cache (it
        would only churn it); the server made it, so it is not re-validated.
        """
        rc = self._wq.ack(subject, body)
        if rc != _QUEUED and not self._w.queued(rc):  # the common case needs no call
            self._w.send(b"PUB %s %d\r\n%s\r\n" % (subject.encode(), len(body), body), len(body), 1)

    def _publish_raw(self, data: bytes, payload_len: int) -> None:
        """Send an already encoded PUB/HPUB (JetStream fast paths)."""
        self._w.send(data, payload_len, 1)

    def flush(self, timeout: float | None = 2.0) -> None:
        """Round trip to the server: everything published before has been processed."""
        self._conn.flush(timeout)  # raises ForkedConnectionError in a forked child

    # -- subscribing --------------------------------------------------------

    def _check_open(self) -> None:
        conn = self._conn
        conn.check_owner()
        status = conn.status
        if status is CLOSED:
            raise errors.ConnectionClosedError()
        if status is DRAINING:
            raise errors.ConnectionDrainingError()

    def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        *,
        cb: Callable[[Msg], Any] | None = None,
        max_msgs: int = 0,
        pending_msgs_limit: int = 65536,
        pending_bytes_limit: int = 64 * 1024 * 1024,
    ) -> Subscription:
        """Subscribe; with ``cb`` messages go to a callback on a dispatcher thread."""
        sub: Subscription = self._subscribe_as(
            Subscription, subject, queue, cb, max_msgs, pending_msgs_limit, pending_bytes_limit
        )
        return sub

    def _subscribe_as(
        self,
        cls: Callable[..., Subscription],
        subject: str,
        queue: str | None,
        cb: Callable[[Msg], Any] | None,
        max_msgs: int,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
        **extra: Any,
    ) -> Any:
        """``subscribe`` with a Subscription subclass (``extra`` goes to its constructor)."""
        commands.check_subject(subject)
        if queue is not None:
            commands.check_subject(queue, "queue group")
        if cb is not None and not callable(cb):
            raise errors.Error("nats: cb must be callable")
        self._check_open()
        sid = next(self._sid)
        sub = cls(
            self,
            sid,
            subject,
            queue,
            cb,
            max_msgs,
            pending_msgs_limit,
            pending_bytes_limit,
            **extra,
        )
        self._subs[sid] = sub
        cmd = commands.sub(subject, queue, sid)
        if max_msgs > 0:
            cmd += commands.unsub(sid, max_msgs)
        self._w.send(cmd)
        return sub

    def _subscribe_internal(self, subject: str, handler: Callable[[Msg], None]) -> int:
        """Library subscription whose handler runs on the reader thread; returns the sid."""
        self._check_open()
        sid = next(self._sid)
        self._subs[sid] = _InternalSub(sid, subject, handler)
        self._w.send_nowait(commands.sub(subject, None, sid))
        return sid

    def _subscribe_batched(self, subject: str, q: queue.SimpleQueue[Any]) -> Any:
        """Library subscription whose messages are put on ``q`` as the reader
        routes them: one ``(messages, payload bytes)`` item per batch, no code
        run per message on the reader thread. What arrives must be bounded by
        the caller (a pull's size): no pending limit applies. Returns the
        reader-side state (``sid``; ``_received`` counts what arrived)."""
        self._check_open()
        sid = next(self._sid)
        sub = _InternalSub(sid, subject, None)
        sub._q = q
        self._subs[sid] = sub
        self._w.send_nowait(commands.sub(subject, None, sid))
        return sub

    def _move_subscription(self, sub: Any, subject: str) -> None:
        """Re-point a subscription at another subject, keeping its sid and queue.

        Messages the server already sent for the old subject may still arrive
        (with the same sid); the subscription must tell them apart itself.
        """
        commands.check_subject(subject)
        sub.subject = subject
        sid: int = sub.sid
        registered = self._subs.get(sid) is sub
        if registered and not self.is_closed:
            self._w.send_nowait(commands.unsub(sid) + commands.sub(subject, sub.queue, sid))

    def _unsubscribe_internal(self, sid: int) -> None:
        if self._subs.pop(sid, None) is not None and not self.is_closed:
            try:
                # Any thread (a finalizer, the timer thread): never waits for room.
                self._w.send_nowait(commands.unsub(sid))
            except errors.Error:
                pass

    def _send_unsub(self, sid: int, max_msgs: int) -> None:
        if self.is_closed:
            raise errors.ConnectionClosedError()
        self._w.send_nowait(commands.unsub(sid, max_msgs))

    def _remove_sub(self, sid: int) -> None:
        self._subs.pop(sid, None)

    def _resubscribe_commands(self) -> bytes:
        parts = []
        for sid, sub in list(self._subs.items()):
            parts.append(commands.sub(sub.subject, sub.queue, sid))
            if sub._max_msgs:
                left = sub._max_msgs - sub._received
                if left > 0:
                    parts.append(commands.unsub(sid, left))
        return b"".join(parts)

    # -- request / reply ----------------------------------------------------

    def request(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        timeout: float | None = 1.0,
        headers: _headers.HeadersIn | None = None,
    ) -> Msg:
        """Publish and wait for one reply over the shared response subscription.

        Raises NoRespondersError when nobody listens on ``subject`` (503) and
        TimeoutError when no reply comes within ``timeout``.
        """
        # No fork check of its own: a forked connection refuses the write below.
        waiter = Reply()
        hdr = _headers.encode(headers) if headers else None
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        mux = self._mux
        token = mux.send(subject, payload, hdr, waiter, inline=True)
        try:
            got = self._conn.await_reply(waiter, deadline)
        except BaseException:
            # Interrupted (KeyboardInterrupt...): a late reply finds no waiter.
            mux.cancel(token)
            raise
        if not got:
            mux.cancel(token)
            if self.is_closed:
                # close() may not have reached this waiter yet (a thread that was
                # reading for its reply sees the socket go first).
                raise errors.ConnectionClosedError()
            raise errors.TimeoutError()
        msg: Msg | None = waiter.msg
        if msg is None:
            raise errors.ConnectionClosedError()
        hdr_in = msg._hdr
        if hdr_in is not None and not msg.data:
            st = _status_of(hdr_in)
            if st is not None and st[0] == 503:
                raise errors.NoRespondersError()
        return msg

    # -- inbound frames (reader thread) -------------------------------------

    def _on_slow(self, sub: Subscription) -> None:
        """Reader thread: a subscription started dropping messages."""
        exc = errors.SlowConsumerError(sub.subject, sub.sid, sub._dropped)
        # A JetStream subscription with an error callback of its own gets it there.
        report = getattr(sub, "_report", None) or self._report_error
        report(exc)

    def _on_max_msgs(self, sub: Subscription) -> None:
        """Reader thread: a subscription reached its auto-unsubscribe count."""
        self._remove_sub(sub.sid)
        sub._flush_batch()
        sub._finish(None)

    def _control(self, ev: tuple[Any, ...]) -> None:
        op = ev[0]
        conn = self._conn
        if op == 1:
            conn.on_ping()
        elif op == 2:
            conn.on_pong()
        elif op == 4:
            exc = err_to_exception(ev[1])
            self._report_error(exc)
        elif op == 5:
            conn.on_info(ev[1])

    # -- callbacks and state changes ----------------------------------------

    def _run_callback(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run a user callback on the ``jsclient-callbacks`` thread."""
        self._callbacks.submit(fn, *args)

    def _report_error(self, exc: BaseException) -> None:
        cb = self._opts.error_cb
        if cb is not None:
            self._callbacks.submit(cb, exc)
        else:
            log.error("jsclient: %s", exc)

    def _add_listener(self, fn: Callable[[str], None]) -> None:
        """Internal: ``fn(event)`` for "disconnected", "reconnected", "closed".

        Listeners run in order on the ``jsclient-events`` thread, never with
        user callbacks; they must not block for long.
        """
        self._listeners.append(fn)

    def _remove_listener(self, fn: Callable[[str], None]) -> None:
        try:
            self._listeners.remove(fn)
        except ValueError:
            pass

    def _notify(self, event: str) -> None:
        for fn in list(self._listeners):
            self._events.submit(fn, event)

    def _on_disconnect(self, exc: BaseException | None) -> None:
        self._notify("disconnected")
        if self._opts.disconnected_cb is not None:
            self._callbacks.submit(self._opts.disconnected_cb)

    def _on_reconnect(self) -> None:
        self._notify("reconnected")
        if self._opts.reconnected_cb is not None:
            self._callbacks.submit(self._opts.reconnected_cb)

    def _close_from_io(self, exc: BaseException | None) -> None:
        if exc is not None and not isinstance(exc, errors.UnexpectedEOF):
            self._report_error(exc)
        threading.Thread(target=self.close, name="jsclient-closer", daemon=True).start()

    def _schedule_ping(self) -> None:
        if self.is_closed or self._opts.ping_interval <= 0:
            return
        self._ping_timer = self._timers.call_later(self._opts.ping_interval, self._ping)

    def _ping(self) -> None:
        self._conn.ping_tick()
        self._schedule_ping()

    @property
    def _scheduler(self) -> Scheduler:
        return self._timers

    # -- jetstream ----------------------------------------------------------

    def jetstream(self, **options: Any) -> JetStream:
        """A JetStream context (ADR-37) on this connection."""
        from jsclient.jetstream.context import JetStream

        self._conn.check_owner()
        return JetStream(self, **options)

    # -- draining and closing -----------------------------------------------

    def drain(self, timeout: float | None = 30.0) -> None:
        """Stop receiving, let what was received be processed, flush, and close.

        Subscriptions are unsubscribed and their queued messages still handed
        out; JetStream ``consume()``, ``messages()`` and fetches stop pulling,
        and the messages they hold are still delivered (a consume callback
        runs for each; a thread iterating ``messages()`` or a fetch reads
        them), so their acks go out before the connection closes. Waits up to
        ``timeout`` for callbacks and readers, then DrainTimeoutError (the
        connection is closed either way).
        """
        if self.is_closed:
            return
        self._conn.check_owner()
        deadline = None if timeout is None else time.monotonic() + timeout
        conn = self._conn
        user_subs = [s for s in self._subs.values() if isinstance(s, Subscription)]
        contexts = list(self._drainables)
        if conn.status is CONNECTED:
            conn._set_status(DRAINING)
        late = False
        try:
            for ctx in contexts:
                ctx._drain_begin()  # no more pulls; buffered messages stay
            for sub in user_subs:
                try:
                    self._send_unsub(sub.sid, 0)
                except errors.Error:
                    pass
            try:
                conn.flush(_left(deadline, 5.0))
            except errors.Error:
                pass
            for sub in user_subs:
                self._remove_sub(sub.sid)
                sub._finish(None)
            me = threading.current_thread()
            for sub in user_subs:
                t = sub._dispatcher
                if t is not None and t is not me:
                    t.join(_left(deadline, None))
                    late = late or t.is_alive()
            for ctx in contexts:
                late = not ctx._drain_wait(deadline) or late
            try:
                conn.flush(_left(deadline, 5.0))  # the acks of what was just processed
            except errors.Error:
                pass
        finally:
            self.close()
        if late:
            raise errors.DrainTimeoutError()

    def close(self) -> None:
        """Close now: buffered writes get a short best-effort flush; waiters are released.

        In a forked child this only drops the child's copy of the socket and
        raises ForkedConnectionError: the connection is the parent's to close.
        """
        conn = self._conn
        if conn.status is FORKED or (conn.pid != os.getpid() and conn.status is not CLOSED):
            conn.after_fork_in_child()
            raise conn.forked_error()
        with self._close_lock:
            if self._closed_done:
                return
            self._closed_done = True
        if self._ping_timer is not None:
            self._ping_timer.cancel()
        self._conn.close()
        closed = errors.ConnectionClosedError()
        for sub in list(self._subs.values()):
            if isinstance(sub, Subscription):
                sub._finish(closed, discard=True)
        self._subs.clear()
        self._mux.close_all()
        self._notify("closed")
        if self._opts.closed_cb is not None:
            self._callbacks.submit(self._opts.closed_cb)
        self._stop_threads()
        _fork.forget(self)

    def _stop_threads(self) -> None:
        self._timers.stop()
        self._events.stop()
        self._callbacks.stop()
