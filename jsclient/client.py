"""The blocking core NATS client: publish, subscribe, request, flush, drain, close."""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jsclient import _fork, _impl, _reconnect, _request, errors
from jsclient._client_state import ClientState
from jsclient._io.options import check_open
from jsclient._mux import RequestMux
from jsclient._outbound import Outbound
from jsclient._request_many import EMPTY_SENTINEL, ReplyIterator
from jsclient._request_many import request_many as _request_many
from jsclient._subtable import SubTable
from jsclient._threads import CallbackRunner, Scheduler, TimerHandle, WeakRegistry, log
from jsclient.connection import (
    CLOSED,
    CONNECTED,
    DRAINING,
    FORKED,
    Connection,
    Options,
    err_to_exception,
)
from jsclient.contexts import jetstream_defaults
from jsclient.msg import Msg
from jsclient.protocol import commands
from jsclient.protocol import headers as _headers
from jsclient.subscription import Subscription

if TYPE_CHECKING:
    from jsclient.jetstream.context import JetStream
    from jsclient.micro.service import Service, StatsHandler

_QUEUED = _impl.writer.QUEUED


class Client(ClientState):
    """A connection to NATS. Create it with :func:`jsclient.connect`."""

    def __init__(self, opts: Options) -> None:
        self._opts = opts
        self._subs: dict[int, Any] = {}
        self._subject_cache: dict[str, bytes] = {}
        self._listeners: list[Callable[[str], None]] = []
        # JetStream pull contexts (consume, messages, fetch) that drain() drains.
        self._drainables = WeakRegistry()
        # Subjects whose SUB a caller waits to see accepted (add_endpoint): the
        # server's refusal (-ERR Permissions Violation) is kept for it here.
        self._watched_subs: dict[str, BaseException | None] = {}
        # The async-publish engines (publish_async, Publishers, Spark sinks):
        # force_reconnect() waits for the acks of what they wrote.
        self._engines = WeakRegistry()
        # First: it checks the options (server URLs), before any thread exists.
        self._conn = Connection(self, opts, self._subs, Msg)
        self._w = self._conn.writer
        self._wq = self._w.wq  # the write queue, for the publish and ack fast paths
        self._wq.subjects = self._subject_cache
        # Publishes off the fast path (a new subject, a reply, headers): jsclient/_outbound.py.
        self._out = Outbound(self._conn, self._w, self._subject_cache)
        # sids, SUB/UNSUB, resubscribing and draining: jsclient/_subtable.py.
        self._table = SubTable(self, self._subs, self._conn, self._w)
        # User callbacks (error_cb, ..., future done-callbacks) and the library's own
        # listeners run on separate threads: a slow callback never delays a re-pull.
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
        for sub in self._table.user_subs():
            sub._end_in_forked_child(err)

    # -- context manager ----------------------------------------------------

    def __enter__(self) -> Client:
        """``with jsclient.connect(...) as nc``: the client itself."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Drains the connection (closes it if draining fails)."""
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

    def new_inbox(self) -> str:
        """A unique subject under the connection's ``inbox_prefix``, for replies."""
        return f"{self._opts.inbox_prefix}.{self._nuid.next().decode()}"

    def _next_id(self) -> str:
        return self._nuid.next().decode()

    # -- publishing ---------------------------------------------------------

    def _subject_bytes(self, subject: str) -> bytes:
        return self._out.subject_bytes(subject)

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        reply: str | None = None,
        headers: _headers.HeadersIn | None = None,
    ) -> None:
        """Publish a message. Buffered; ``flush()`` waits until the server has it.

        The arguments in nats-py's order. The write queue holds at most
        ``pending_size`` bytes (connect option); beyond that this call writes
        the queue itself or waits up to ``flush_timeout`` for the flusher, then
        raises FlushTimeoutError. A payload that is not bytes-like (a ``str``)
        is a TypeError that says so.
        """
        if reply is None and headers is None:
            # The hot path: one call looks the subject up in the (shared) subject
            # cache, encodes, checks and queues the frame.
            try:
                rc = self._wq.pub_str(subject, payload)
            except TypeError:
                commands.check_payload(payload)  # the reason, in words
                raise
            if rc != _QUEUED and not self._w.queued(rc):
                self._out.declined(subject, payload, rc)
            return
        self._out.publish(subject, payload, reply, headers)

    def _too_big(self, size: int) -> errors.MaxPayloadError:
        return self._out.too_big(size)

    def _publish_ack(self, subject: str, body: bytes) -> None:
        """Publish an ack to a server-made ``$JS.ACK`` subject.

        Every ack subject is unique, so it bypasses the subject cache (it
        would only churn it); the server made it, so it is not re-validated.
        """
        rc = self._wq.ack(subject, body)
        if rc != _QUEUED:  # the common case needs no call
            self._ack_not_queued(rc, subject, body)

    def _ack_not_queued(self, rc: int, subject: str, body: bytes) -> None:
        """Act on the write queue's answer to an ack (``Msg.ack`` queues it itself):
        wake the writer, or send it the bounded way (the queue was full)."""
        if not self._w.queued(rc):
            self._w.send(b"PUB %s %d\r\n%s\r\n" % (subject.encode(), len(body), body), len(body), 1)

    def _publish_raw(self, data: bytes, payload_len: int) -> None:
        """Send an already encoded PUB/HPUB (JetStream fast paths)."""
        self._w.send(data, payload_len, 1)

    def _watch_sub(self, subject: str) -> None:
        """Keep the server's refusal of a subscription to ``subject``, if it comes."""
        self._watched_subs.setdefault(subject, None)

    def _sub_refusal(self, subject: str) -> BaseException | None:
        """Stop watching ``subject``; the refusal that came (after a flush: all of it)."""
        return self._watched_subs.pop(subject, None)

    def _publish_nowait(self, data: bytes, payload_len: int, msgs: int) -> None:
        """Queue encoded frames without ever waiting for room (library timers:
        keep-alives); raises when closed or the reconnect buffer is full."""
        self._w.send_nowait(data, payload_len, msgs)

    def flush(self, timeout: float | None = 2.0) -> None:
        """Round trip to the server: everything published before has been processed."""
        self._conn.flush(timeout)  # raises ForkedConnectionError in a forked child

    # -- subscribing --------------------------------------------------------

    def _check_open(self) -> None:
        check_open(self._conn)

    def subscribe(
        self,
        subject: str,
        queue: str | None = None,
        cb: Callable[[Msg], Any] | None = None,
        *,
        max_msgs: int = 0,
        pending_msgs_limit: int = 65536,
        pending_bytes_limit: int = 64 * 1024 * 1024,
    ) -> Subscription:
        """Subscribe; with ``cb`` messages go to a callback on a dispatcher thread."""
        sub: Subscription = self._table.add(
            Subscription, subject, queue, cb, max_msgs, pending_msgs_limit, pending_bytes_limit
        )
        return sub

    # The library's own subscriptions: see SubTable for what each does.

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
        return self._table.add(
            cls, subject, queue, cb, max_msgs, pending_msgs_limit, pending_bytes_limit, **extra
        )

    def _subscribe_internal(self, subject: str, handler: Callable[[Msg], None]) -> int:
        return self._table.add_internal(subject, handler)

    def _subscribe_batched(self, subject: str, q: queue.SimpleQueue[Any]) -> Any:
        return self._table.add_batched(subject, q)

    def _move_subscription(self, sub: Any, subject: str) -> None:
        self._table.move(sub, subject)

    def _unsubscribe_internal(self, sid: int) -> None:
        self._table.remove_internal(sid)

    def _release_internal_later(self, sids: list[int]) -> None:
        self._table.release_later(sids)

    def _reap_internal(self) -> None:
        self._table.reap()

    def _send_unsub(self, sid: int, max_msgs: int) -> None:
        self._table.send_unsub(sid, max_msgs)

    def _remove_sub(self, sid: int) -> None:
        self._table.remove(sid)

    def _resubscribe_commands(self) -> bytes:
        return self._table.resubscribe_commands()

    # -- request / reply ----------------------------------------------------

    def request(
        self,
        subject: str,
        payload: bytes = b"",
        timeout: float | None = 1.0,
        *,
        headers: _headers.HeadersIn | None = None,
    ) -> Msg:
        """Publish and wait for one reply over the shared response subscription.

        Raises NoRespondersError when nobody listens on ``subject`` (503) and
        TimeoutError when no reply comes within ``timeout``.
        """
        hdr = _headers.encode(headers) if headers else None
        return _request.request(self._conn, self._mux, subject, payload, hdr, timeout)

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
            if (
                isinstance(exc, errors.PermissionViolationError)
                and exc.operation == "subscription"
                and exc.subject in self._watched_subs
            ):
                self._watched_subs[exc.subject] = exc  # add_endpoint raises it
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
        """A JetStream context (ADR-37) on this connection; without ``domain`` or
        ``prefix``, the ``connect(context=...)`` context's (see jetstream_defaults)."""
        from jsclient.jetstream.context import JetStream

        self._conn.check_owner()
        return JetStream(self, **jetstream_defaults(self._opts, options))

    def jsm(self, **options: Any) -> JetStream:
        """``jetstream(**options)``, under nats-py's name for its JetStream manager:
        one jsclient context both manages and publishes."""
        return self.jetstream(**options)

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
        user_subs = self._table.user_subs()
        contexts = self._drainables.snapshot()
        if conn.status is CONNECTED:
            conn._set_status(DRAINING)
        try:
            late = self._table.drain(user_subs, contexts, deadline)
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
        for sub in self._table.user_subs():
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

    def add_service(
        self,
        name: str,
        version: str,
        *,
        description: str | None = None,
        metadata: Mapping[str, str] | None = None,
        queue_group: str | None = "q",
        stats_handler: StatsHandler | None = None,
        threads: int = 1,
        api_prefix: str = "$SRV",
    ) -> Service:
        """A service (ADR-32), started at once: see :func:`jsclient.micro.service.add_service`."""
        from jsclient.micro.service import add_service  # on first use: import jsclient stays light

        return add_service(
            self,
            name,
            version,
            description=description,
            metadata=metadata,
            queue_group=queue_group,
            stats_handler=stats_handler,
            threads=threads,
            api_prefix=api_prefix,
        )

    def request_many(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: _headers.HeadersIn | None = None,
        timeout: float | None = 1.0,
        max_count: int | None = None,
        stall: float | None = None,
        sentinel: Callable[[Msg], bool] | None = EMPTY_SENTINEL,
        pending_msgs_limit: int = 65536,
        pending_bytes_limit: int = 64 * 1024 * 1024,
    ) -> ReplyIterator:
        """Publish one request and iterate over its replies (ADR-47).

        The request is sent before this returns. The iterator ends quietly at
        ``max_count`` replies, ``timeout`` seconds after the request (None: no
        total limit; nothing is yielded after it), when a reply after the
        first took longer than ``stall`` seconds (ignored when not below
        ``timeout``), at the first reply for which ``sentinel(msg)`` is true
        (that reply is not yielded; the default :data:`EMPTY_SENTINEL` is an
        empty payload; ``None`` turns it off), at no responders (503), or once
        the replies it holds pass ``pending_msgs_limit`` or
        ``pending_bytes_limit`` (0: no limit), as a subscription's.
        ``it.end_reason`` says which. A closed connection raises
        ConnectionClosedError.
        """
        return _request_many(
            self,
            subject,
            payload,
            headers,
            timeout,
            max_count,
            stall,
            sentinel,
            (pending_msgs_limit, pending_bytes_limit),
        )

    def force_reconnect(self) -> None:
        """Close the current connection and reconnect now (ADR-40), maybe to another server.

        Subscriptions are restored and ``disconnected_cb``/``reconnected_cb``
        fire as for any reconnect; ``reconnect_to_server_cb`` is asked for
        the server. Nothing published after this returns is lost: it waits in
        the reconnect buffer for the new connection. The old socket is cut
        once every async publish written to it has its ack (at most
        ``FORCE_GRACE``, 2 s), so none of them fails needlessly. Raises
        ConnectionClosedError when closed, ConnectionDrainingError while
        draining.
        """
        _reconnect.force_reconnect(self)
