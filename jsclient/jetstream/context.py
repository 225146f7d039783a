"""The JetStream context (ADR-37): stream and consumer management, publish, publish_async.

Every management call is one request to ``<prefix>.<API subject>`` with a JSON
body; the answer is decoded into nats-py's data model (``nats.js.api``) or
raised as the typed error for its ``error`` object.

``publish_async`` shares the client's single wildcard reply subscription: each
publish gets a reply token, and the ack is parsed on the socket reader thread,
which only decodes the JSON and completes the future. At most
``publish_async_max_pending`` publishes are in flight (threads publishing at
once may each take one more); beyond that the caller
waits on a condition for up to ``publish_async_stall_wait`` seconds and then
gets :class:`~jsclient.errors.TooManyStalledMsgsError`. When the connection
drops, every pending future fails with
:class:`~jsclient.errors.PublishDisconnectedError`: the server may or may not
have stored those messages, and their acks are lost with the connection.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from nats.nuid import NUID

from jsclient import _impl, errors
from jsclient._future import LightFuture
from jsclient._threads import TimerHandle
from jsclient.api import AccountInfo, ConsumerInfo, DeliverPolicy, PubAck, StreamInfo
from jsclient.jetstream._names import (
    ConsumerConfigLike,
    StreamConfigLike,
    check_consumer_name,
    check_stream_name,
    consumer_config,
    stream_config,
)
from jsclient.jetstream.consumer import Consumer
from jsclient.jetstream.stream import Stream
from jsclient.protocol.headers import encode as encode_headers

if TYPE_CHECKING:
    from jsclient.client import Client
    from jsclient.jetstream.ordered import OrderedConsumer
    from jsclient.jetstream.pull_subscription import PullSubscription
    from jsclient.jetstream.push import JsSubscription
    from jsclient.msg import Msg
    from jsclient.protocol.headers import HeadersIn

DEFAULT_PREFIX = "$JS.API"

#: Sync and async publish retry a 503 "no responders" (the stream may be
#: starting or electing a leader) this many times, this far apart (nats.go's
#: defaults), inside the publish's total timeout.
PUBLISH_RETRY_ATTEMPTS = 2
PUBLISH_RETRY_WAIT = 0.25

_PUBACK_FIELDS = frozenset({"stream", "seq", "domain", "duplicate", "val"})
_pub_ack_fields = _impl.jsack.pub_ack_fields

_MSG_ID = "Nats-Msg-Id"
_EXPECTED_STREAM = "Nats-Expected-Stream"
_EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
_EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
_EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"


class JetStream:
    """Entry point to JetStream on one connection; get it with ``nc.jetstream()``.

    ``domain`` addresses another JetStream domain (API prefix ``$JS.<domain>.API``);
    ``timeout`` bounds every API request and the default ``publish`` wait.
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        domain: str | None = None,
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
        publish_async_stall_wait: float = 0.2,
    ) -> None:
        if domain:
            if prefix != DEFAULT_PREFIX:
                raise ValueError("nats: give either a JetStream prefix or a domain, not both")
            prefix = f"$JS.{domain}.API"
        prefix = prefix.rstrip(".")
        if not prefix:
            raise ValueError("nats: empty JetStream API prefix")
        self._client = client
        self._prefix = prefix
        self._domain = domain
        self._timeout = float(timeout)
        self._max_pending = int(publish_async_max_pending)
        self._stall_wait = float(publish_async_stall_wait)
        self._nuid = NUID()
        self._nuid_lock = threading.Lock()
        # Async publish state. A publisher that finds room adds its ack to the
        # set without a lock (several threads publishing at once may each add
        # one past the window); one that finds the window full takes _pub_lock,
        # so stalled publishers wait for room in turn. The reader thread
        # removes acks without any lock, so the publisher and the reader do not
        # contend on every message. Only a stalled publisher or a
        # publish_async_complete() waits, on a condition of _lock: each first
        # counts itself (_stalled, _completers) and then re-checks the set,
        # while a completion first removes from the set and then reads the
        # counts, so one of the two always sees the other and no wakeup is
        # lost. Two conditions, so waking a publisher never wakes a completer
        # instead.
        self._pub_lock = threading.Lock()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._empty = threading.Condition(self._lock)
        self._pending: set[_AsyncPub] = set()
        self._stalled = 0
        self._completers = 0
        # A stalled publish_async resumes when this many (or fewer) are pending.
        self._resume_at = max(0, self._max_pending - max(1, self._max_pending // 4))
        self._listening = False

    def __repr__(self) -> str:
        return f"<JetStream prefix={self._prefix!r}>"

    # -- API requests --------------------------------------------------------

    def _api_request(
        self,
        subject_suffix: str,
        payload: dict[str, Any] | bytes | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Request ``<prefix>.<subject_suffix>`` and return the decoded JSON answer.

        Raises the typed API error for an ``error`` answer, ServiceUnavailableError
        when nothing answers (JetStream not enabled for the account or domain) and
        TimeoutError when no answer comes in time.
        """
        subject = f"{self._prefix}.{subject_suffix}"
        if payload is None:
            data = b""
        elif isinstance(payload, bytes):
            data = payload
        else:
            data = json.dumps(payload).encode()
        wait = self._timeout if timeout is None else timeout
        try:
            msg = self._client.request(subject, data, timeout=wait)
        except errors.NoRespondersError:
            raise errors.ServiceUnavailableError(
                code=503, description=f"JetStream not enabled (no responders on {subject})"
            )
        except errors.TimeoutError:
            raise errors.TimeoutError(f"nats: timeout waiting for the JetStream API ({subject})")
        return _decode_api(msg.data, subject)

    def _new_name(self) -> str:
        with self._nuid_lock:
            return self._nuid.next().decode()

    # -- streams -------------------------------------------------------------

    def create_stream(self, config: StreamConfigLike | None = None, **fields: Any) -> Stream:
        """Create a stream; StreamNameAlreadyInUseError if one exists with another config."""
        cfg = stream_config(config, fields)
        resp = self._api_request(f"STREAM.CREATE.{cfg.name}", cfg.as_dict())
        return Stream(self, StreamInfo.from_response(resp))

    def update_stream(self, config: StreamConfigLike | None = None, **fields: Any) -> Stream:
        """Update a stream's config; StreamNotFoundError if it does not exist."""
        cfg = stream_config(config, fields)
        resp = self._api_request(f"STREAM.UPDATE.{cfg.name}", cfg.as_dict())
        return Stream(self, StreamInfo.from_response(resp))

    def create_or_update_stream(
        self, config: StreamConfigLike | None = None, **fields: Any
    ) -> Stream:
        """Update the stream, or create it when it does not exist."""
        cfg = stream_config(config, fields)
        try:
            return self.update_stream(cfg)
        except errors.StreamNotFoundError:
            return self.create_stream(cfg)

    def stream(self, name: str) -> Stream:
        """A handle on an existing stream (with fresh info); StreamNotFoundError otherwise."""
        check_stream_name(name)
        resp = self._api_request(f"STREAM.INFO.{name}")
        return Stream(self, StreamInfo.from_response(resp))

    def delete_stream(self, name: str) -> None:
        """Delete a stream and its messages and consumers."""
        check_stream_name(name)
        self._api_request(f"STREAM.DELETE.{name}")

    def streams(self, subject: str | None = None) -> Iterator[StreamInfo]:
        """Info of every stream (only those listening on ``subject`` if given), page by page."""
        extra = {} if subject is None else {"subject": subject}
        for item in self._paged("STREAM.LIST", "streams", extra):
            yield StreamInfo.from_response(item)

    def stream_names(self, subject: str | None = None) -> Iterator[str]:
        """Names of every stream (only those listening on ``subject`` if given), page by page."""
        extra = {} if subject is None else {"subject": subject}
        yield from self._paged("STREAM.NAMES", "streams", extra)

    def _paged(self, suffix: str, key: str, extra: dict[str, Any]) -> Iterator[Any]:
        # The server decides the page size (256 infos, 1024 names) and reports
        # it with the total; ask again from the next offset until all are seen.
        offset = 0
        while True:
            resp = self._api_request(suffix, {"offset": offset, **extra})
            items = resp.get(key) or []
            yield from items
            offset += len(items)
            if not items or offset >= int(resp.get("total") or 0):
                return

    # -- consumers -----------------------------------------------------------

    def create_consumer(
        self, stream: str, config: ConsumerConfigLike | None = None, **fields: Any
    ) -> Consumer:
        """Create a consumer; ConsumerAlreadyExistsError if it exists with another config.

        Without ``name`` or ``durable_name`` the consumer is ephemeral and gets a
        generated name.
        """
        return self._upsert_consumer(stream, config, fields, "create")

    def update_consumer(
        self, stream: str, config: ConsumerConfigLike | None = None, **fields: Any
    ) -> Consumer:
        """Update a consumer; ConsumerDoesNotExistError if there is none by that name."""
        return self._upsert_consumer(stream, config, fields, "update")

    def create_or_update_consumer(
        self, stream: str, config: ConsumerConfigLike | None = None, **fields: Any
    ) -> Consumer:
        """Create the consumer, or update it when it exists."""
        return self._upsert_consumer(stream, config, fields, None)

    def _upsert_consumer(
        self,
        stream: str,
        config: ConsumerConfigLike | None,
        fields: dict[str, Any],
        action: str | None,
    ) -> Consumer:
        check_stream_name(stream)
        cfg = consumer_config(config, fields)
        if cfg.name is not None:
            check_consumer_name(cfg.name)
        if cfg.durable_name is not None:
            check_consumer_name(cfg.durable_name)
        name = cfg.name or cfg.durable_name
        if name is None:
            if action == "update":
                raise errors.InvalidConsumerNameError(
                    "nats: update_consumer needs the consumer's name or durable_name"
                )
            name = self._new_name()
            cfg = cfg.evolve(name=name)
        suffix = f"CONSUMER.CREATE.{stream}.{name}"
        if cfg.filter_subject and not cfg.filter_subjects:
            suffix += f".{cfg.filter_subject}"
        req: dict[str, Any] = {"stream_name": stream, "config": cfg.as_dict()}
        if action is not None:
            req["action"] = action
        resp = self._api_request(suffix, req)
        return Consumer(self, stream, ConsumerInfo.from_response(resp))

    def consumer(self, stream: str, name: str) -> Consumer:
        """A handle on an existing consumer; ConsumerNotFoundError otherwise."""
        check_stream_name(stream)
        check_consumer_name(name)
        return Consumer(self, stream, self._consumer_info(stream, name))

    def _consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        """A consumer's info from the server (names already checked)."""
        info: ConsumerInfo = ConsumerInfo.from_response(
            self._api_request(f"CONSUMER.INFO.{stream}.{name}")
        )
        return info

    def delete_consumer(self, stream: str, name: str) -> None:
        """Delete a consumer."""
        check_stream_name(stream)
        check_consumer_name(name)
        self._api_request(f"CONSUMER.DELETE.{stream}.{name}")

    def ordered_consumer(self, stream: str, **options: Any) -> OrderedConsumer:
        """An ordered consumer on ``stream`` (see :mod:`jsclient.jetstream.ordered`)."""
        from jsclient.jetstream.ordered import OrderedConsumer

        return OrderedConsumer(self, stream, **options)

    # -- legacy subscriptions (ADR-13, ADR-15) --------------------------------

    def pull_subscribe(
        self,
        subject: str,
        durable: str | None = None,
        *,
        stream: str | None = None,
        config: ConsumerConfigLike | None = None,
        inbox_prefix: str | None = None,
    ) -> PullSubscription:
        """A pull subscription (ADR-13): ``psub.fetch(batch, timeout)`` returns messages.

        The stream is looked up by ``subject`` unless given. ``durable`` names a
        consumer that is used when it exists (after checking it is a pull
        consumer whose filter and config agree) and created otherwise, with
        ``subject`` as its filter and ack policy explicit. Without a durable an
        ephemeral consumer is made, and deleted again by ``unsubscribe()`` or
        ``drain()``. A refusal raises a :class:`~jsclient.errors.SubscribeError`.
        """
        from jsclient.jetstream.pull_subscription import pull_subscribe

        return pull_subscribe(
            self, subject, durable, stream=stream, config=config, inbox_prefix=inbox_prefix
        )

    def pull_subscribe_bind(
        self, stream: str, durable: str, *, inbox_prefix: str | None = None
    ) -> PullSubscription:
        """A pull subscription to an existing pull consumer, with no lookups."""
        from jsclient.jetstream.pull_subscription import pull_subscribe_bind

        return pull_subscribe_bind(self, stream, durable, inbox_prefix=inbox_prefix)

    def subscribe(
        self,
        subject: str | None,
        queue: str | None = None,
        *,
        cb: Callable[[Msg], Any] | None = None,
        durable: str | None = None,
        stream: str | None = None,
        consumer: str | None = None,
        config: ConsumerConfigLike | None = None,
        manual_ack: bool = False,
        ordered_consumer: bool = False,
        idle_heartbeat: float | None = None,
        flow_control: bool = False,
        deliver_policy: DeliverPolicy | str | None = None,
        pending_msgs_limit: int = 65536,
        pending_bytes_limit: int = 64 * 1024 * 1024,
        heartbeat_alarm_factor: float = 3.0,
        delete_consumer: str = "if_created",
        error_cb: Callable[[BaseException], Any] | None = None,
    ) -> JsSubscription:
        """A push subscription (ADR-15) with automatic status management.

        Without ``cb`` read it with ``next_msg``/iteration; with ``cb`` the
        callback runs on a library thread and the message is acked after it
        returns (unless ``manual_ack``). The stream is looked up by ``subject``
        unless given; ``consumer`` binds to an existing consumer, ``durable``
        uses or creates one; a ``queue`` without either uses the queue name as
        durable. ``ordered_consumer`` reads the stream in order through an
        ephemeral consumer that is remade on gaps. Heartbeat alarms, gaps and
        error statuses of a callback subscription go to ``error_cb`` (default:
        the connection's). See :mod:`jsclient.jetstream.push`.
        """
        from jsclient.jetstream.push import subscribe

        return subscribe(
            self,
            subject,
            queue,
            cb=cb,
            durable=durable,
            stream=stream,
            consumer=consumer,
            config=config,
            manual_ack=manual_ack,
            ordered_consumer=ordered_consumer,
            idle_heartbeat=idle_heartbeat,
            flow_control=flow_control,
            deliver_policy=deliver_policy,
            pending_msgs_limit=pending_msgs_limit,
            pending_bytes_limit=pending_bytes_limit,
            heartbeat_alarm_factor=heartbeat_alarm_factor,
            delete_consumer=delete_consumer,
            error_cb=error_cb,
        )

    def account_info(self) -> AccountInfo:
        """Usage and limits of this account's JetStream."""
        info: AccountInfo = AccountInfo.from_response(self._api_request("INFO"))
        return info

    # -- publish -------------------------------------------------------------

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: HeadersIn | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        timeout: float | None = None,
    ) -> PubAck:
        """Publish to a stream and wait for its ack.

        A 503 (no stream listening yet) is retried twice, 250 ms apart, within
        ``timeout`` (default: the context's), then NoStreamResponseError. A failed
        expectation raises its API error (WrongLastSequenceError, ...).
        """
        hdrs = _pub_headers(
            headers,
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_subject_seq,
            expected_last_msg_id,
        )
        total = self._timeout if timeout is None else timeout
        deadline = time.monotonic() + total
        request = self._client.request
        retries = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.TimeoutError(f"nats: timeout waiting for the publish ack on {subject}")
            try:
                msg = request(subject, payload, timeout=left, headers=hdrs)
                break
            except errors.NoRespondersError:
                retries += 1
                if retries > PUBLISH_RETRY_ATTEMPTS or (
                    deadline - time.monotonic() <= PUBLISH_RETRY_WAIT
                ):
                    raise errors.NoStreamResponseError(
                        f"nats: no stream answered a publish on {subject}"
                    )
                time.sleep(PUBLISH_RETRY_WAIT)
            except errors.TimeoutError:
                raise errors.TimeoutError(f"nats: timeout waiting for the publish ack on {subject}")
        return _parse_pub_ack(msg.data)

    def publish_async(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: HeadersIn | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        ack_timeout: float | None = None,
        timeout: float | None = None,
    ) -> Future[PubAck]:
        """Publish without waiting; the future completes with the PubAck or the error.

        ``ack_timeout`` (or its alias ``timeout``) fails the future with
        TimeoutError if no ack arrives in time; by default there is none. Blocks
        only while ``publish_async_max_pending`` publishes are already in flight,
        for up to the stall wait, then raises TooManyStalledMsgsError.
        """
        if timeout is not None:
            if ack_timeout is not None:
                raise TypeError("give ack_timeout or timeout, not both")
            ack_timeout = timeout
        hdrs = _pub_headers(
            headers,
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_subject_seq,
            expected_last_msg_id,
        )
        if not self._listening:
            self._listen()
        # Encoded once: retries re-send the same bytes.
        ack = _AsyncPub(self, subject, payload, encode_headers(hdrs) if hdrs else None)
        pending = self._pending
        if 0 < self._max_pending <= len(pending):
            # Full: publishers queue up on _pub_lock and wait for room in turn.
            with self._pub_lock:
                if 0 < self._max_pending <= len(pending):
                    self._wait_for_room()
                pending.add(ack)
        else:
            pending.add(ack)  # one C call, atomic under the GIL: no lock per publish
        client = self._client
        try:
            token = client._send_request(subject, payload, ack.headers, ack)
        except BaseException:
            self._forget(ack)
            raise
        ack.token = token
        if ack.done:
            # Failed (disconnect) before the token was set; see _abandon.
            client._cancel_request(token)
        elif ack_timeout is not None:
            # If the ack wins the race with this line, the timer finds it done.
            ack.timer = client._scheduler.call_later(ack_timeout, self._ack_timed_out, ack)
        return ack.fut

    @property
    def publish_async_pending(self) -> int:
        """How many async publishes still wait for their ack."""
        return len(self._pending)

    def publish_async_complete(self, timeout: float | None = None) -> None:
        """Wait until every async publish made so far is acked or failed (TimeoutError)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = self._pending
        with self._lock:
            self._completers += 1
            try:
                while pending:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise errors.TimeoutError(
                            f"nats: {len(pending)} async publishes still pending"
                        )
                    self._empty.wait(left)
            finally:
                self._completers -= 1

    # -- async publish internals ---------------------------------------------

    def _wait_for_room(self) -> None:
        # Called with _pub_lock held after seeing the window full.
        deadline = time.monotonic() + self._stall_wait
        pending = self._pending
        with self._lock:
            self._stalled += 1
            try:
                while len(pending) > self._resume_at:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        if len(pending) >= self._max_pending:
                            raise errors.TooManyStalledMsgsError()
                        break  # not full any more: go on, without waiting for the mark
                    self._room.wait(left)
            finally:
                self._stalled -= 1

    def _on_empty_reply(self, ack: _AsyncPub, msg: Msg | None) -> None:
        # Reader thread: the connection closed (None) or a status came back.
        if msg is None:
            self._finish(ack, None, errors.ConnectionClosedError())
            return
        st = msg.status
        if st is not None and st[0] == 503:
            if ack.retries < PUBLISH_RETRY_ATTEMPTS and not ack.done:
                ack.retries += 1
                ack.token = None
                self._client._scheduler.call_later(PUBLISH_RETRY_WAIT, self._resend, ack)
                return
            exc: errors.Error = errors.NoStreamResponseError(
                f"nats: no stream answered a publish on {ack.subject}"
            )
        else:
            why = f" (status {st[0]} {st[1]})" if st is not None else ""
            exc = errors.JetStreamError(f"nats: empty JetStream publish response{why}")
        self._finish(ack, None, exc)

    def _resend(self, ack: _AsyncPub) -> None:
        # Timer thread: retry after a 503 with a fresh reply token.
        if ack.done:
            return
        client = self._client
        try:
            token = client._send_request(ack.subject, ack.payload, ack.headers, ack)
        except errors.Error as exc:
            self._finish(ack, None, exc)
            return
        ack.token = token
        if ack.done:
            client._cancel_request(token)

    def _ack_timed_out(self, ack: _AsyncPub) -> None:
        if not ack.done:
            self._abandon(
                ack,
                errors.TimeoutError(f"nats: timeout waiting for the publish ack on {ack.subject}"),
            )

    def _abandon(self, ack: _AsyncPub, exc: BaseException) -> None:
        """Fail a pending publish whose reply will not be awaited any more."""
        if self._finish(ack, None, exc):
            # Read the token only after ``done`` is set: the publisher sets the
            # token and then reads ``done``, so one of the two cancels it.
            token = ack.token
            if token is not None:
                self._client._cancel_request(token)

    def _finish(self, ack: _AsyncPub, result: PubAck | None, exc: BaseException | None) -> bool:
        """Complete the future unless another path did first; True if this call did."""
        # set_result/set_exception refuse a done future (and ours cannot be
        # cancelled), so exactly one of reply, timeout and disconnect wins.
        fut = ack.fut
        if not (fut.try_set_result(result) if exc is None else fut.try_set_exception(exc)):
            return False
        ack.done = True
        timer = ack.timer
        if timer is not None:
            timer.cancel()
        self._forget(ack)
        return True

    def _forget(self, ack: _AsyncPub) -> None:
        pending = self._pending
        pending.discard(ack)
        # A stalled publisher is woken only once a quarter of the window is
        # free: waking it for every ack costs a thread switch per message.
        if (self._stalled and len(pending) <= self._resume_at) or (
            self._completers and not pending
        ):
            with self._lock:
                if self._stalled:
                    self._room.notify()
                if self._completers and not pending:
                    self._empty.notify_all()

    def _listen(self) -> None:
        # A weak reference: the client's listener list must not keep every
        # JetStream context ever made alive.
        with self._lock:
            if self._listening:
                return
            self._listening = True
        ref = weakref.ref(self)
        client = self._client

        def on_event(event: str) -> None:
            js = ref()
            if js is None:
                client._remove_listener(on_event)
            elif event == "disconnected":
                js._fail_pending(errors.PublishDisconnectedError)
            elif event == "closed":
                js._fail_pending(errors.ConnectionClosedError)

        client._add_listener(on_event)

    def _fail_pending(self, exc_type: Callable[[], BaseException]) -> None:
        # A copy, not under _pub_lock: a stalled publisher holds that lock.
        acks = self._pending.copy()
        for ack in acks:
            self._abandon(ack, exc_type())


class _PubFuture(LightFuture[PubAck]):
    """A publish's future; it cannot be cancelled (that would leak its window slot).

    A LightFuture: no Condition is allocated unless someone waits on it.
    """

    def cancel(self) -> bool:
        return False


class _AsyncPub:
    """One async publish waiting for its ack; called with the reply on the reader thread."""

    __slots__ = ("done", "fut", "headers", "js", "payload", "retries", "subject", "timer", "token")

    def __init__(self, js: JetStream, subject: str, payload: bytes, headers: bytes | None) -> None:
        self.js = js
        self.subject = subject
        self.payload = payload
        self.headers = headers
        self.fut: _PubFuture = _PubFuture()
        self.token: str | None = None
        self.timer: TimerHandle | None = None
        self.retries = 0
        self.done = False

    def deliver(self, msg: Msg | None) -> None:
        # The request mux's waiter protocol: the reply, on the socket reader
        # thread (None: the connection closed). Decode and complete, never block.
        if msg is None or not msg.data:
            self.js._on_empty_reply(self, msg)
            return
        try:
            pub_ack = _parse_pub_ack(msg.data)
        except errors.Error as exc:
            self.js._finish(self, None, exc)
            return
        self.js._finish(self, pub_ack, None)


# -- helpers -----------------------------------------------------------------


def _decode_api(data: bytes, what: str) -> dict[str, Any]:
    """The JSON object of an API answer, or the typed error it carries."""
    try:
        resp = json.loads(data)
    except ValueError:
        resp = None
    if not isinstance(resp, dict):
        raise errors.JetStreamError(f"nats: invalid JetStream response ({what}): {data[:80]!r}")
    err = resp.get("error")
    if err is not None:
        raise errors.api_error(err if isinstance(err, dict) else {"description": str(err)})
    return resp


def _parse_pub_ack(data: bytes) -> PubAck:
    # The common ack, exactly {"stream":"<name>","seq":<digits>}, is read by the
    # (C-accelerated) jsack.pub_ack_fields: this runs on the reader thread once
    # per publish. Anything else (escapes, duplicate, domain, errors) goes
    # through the JSON decoder.
    fields = _pub_ack_fields(data)
    if fields is not None:
        return PubAck(stream=fields[0], seq=fields[1])
    resp = _decode_api(data, "publish ack")
    if not resp.get("stream"):
        raise errors.JetStreamError(
            f"nats: JetStream publish response names no stream: {data[:80]!r}"
        )
    if resp.keys() <= _PUBACK_FIELDS:
        # The usual {"stream", "seq"[, "duplicate", "domain"]}: skip from_response's
        # per-call dataclass field scan (this runs on the reader thread per ack).
        return PubAck(**resp)
    pub_ack: PubAck = PubAck.from_response(resp)
    return pub_ack


def _pub_headers(
    headers: HeadersIn | None,
    msg_id: str | None,
    expected_stream: str | None,
    expected_last_seq: int | None,
    expected_last_subject_seq: int | None,
    expected_last_msg_id: str | None,
) -> HeadersIn | None:
    if (
        msg_id is None
        and expected_stream is None
        and expected_last_seq is None
        and expected_last_subject_seq is None
        and expected_last_msg_id is None
    ):
        return headers
    h: dict[str, Any] = dict(headers) if headers else {}
    if msg_id is not None:
        h[_MSG_ID] = msg_id
    if expected_stream is not None:
        h[_EXPECTED_STREAM] = expected_stream
    if expected_last_seq is not None:
        h[_EXPECTED_LAST_SEQ] = str(int(expected_last_seq))
    if expected_last_subject_seq is not None:
        h[_EXPECTED_LAST_SUBJECT_SEQ] = str(int(expected_last_subject_seq))
    if expected_last_msg_id is not None:
        h[_EXPECTED_LAST_MSG_ID] = expected_last_msg_id
    return h
