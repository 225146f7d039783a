"""The JetStream context (ADR-37): stream and consumer management, publish, publish_async.

Every management call is one request to ``<prefix>.<API subject>`` with a JSON
body; the answer is decoded into nats-py's data model (``nats.js.api``) or
raised as the typed error for its ``error`` object. ``publish_async`` is
:mod:`jsclient.jetstream.publish.async_pub`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from nats.nuid import NUID

from jsclient import errors
from jsclient.api import AccountInfo, ConsumerInfo, DeliverPolicy, PubAck, StreamInfo
from jsclient.jetstream._wire import (
    PUBLISH_RETRY_WAIT,
    decode_api,
    may_resend,
    parse_pub_ack,
    pub_headers,
    status_reply_error,
)
from jsclient.jetstream.consume.consumer import Consumer
from jsclient.jetstream.kv._manage import KeyValueManager
from jsclient.jetstream.manage.consumer_admin import ConsumerAdmin
from jsclient.jetstream.manage.names import (
    ConsumerConfigLike,
    StreamConfigLike,
    check_consumer_name,
    check_stream_name,
    consumer_config,
    stream_config,
)
from jsclient.jetstream.manage.stream import Stream
from jsclient.jetstream.obj._manage import ObjectStoreManager
from jsclient.jetstream.publish.async_pub import AsyncPublisher
from jsclient.jetstream.publish.features import MessagesManager
from jsclient.protocol.headers import encode as encode_headers

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.jetstream.consume.ordered import OrderedConsumer
    from jsclient.jetstream.subscribe.pull import PullSubscription
    from jsclient.jetstream.subscribe.push import JsSubscription
    from jsclient.msg import Msg
    from jsclient.protocol.headers import HeadersIn

DEFAULT_PREFIX = "$JS.API"
_DEFAULT = object()


class JetStream(KeyValueManager, ObjectStoreManager, MessagesManager, ConsumerAdmin):
    """Entry point to JetStream on one connection; get it with ``nc.jetstream()``.

    Key-Value buckets: ``create_key_value``, ``key_value`` and the rest (see
    :mod:`jsclient.jetstream.kv`); object stores: ``create_object_store``,
    ``object_store`` and the rest (see :mod:`jsclient.jetstream.obj`).
    Schedules, counters and batch publish of servers 2.11-2.14: see
    :mod:`jsclient.jetstream.publish.features`. Consumer pause, resume, unpin and
    reset: see :mod:`jsclient.jetstream.manage.consumer_admin`.

    ``domain`` addresses another JetStream domain (API prefix ``$JS.<domain>.API``);
    ``timeout`` bounds every API request and the default ``publish`` wait.
    """

    def __init__(
        self,
        client: Core,
        *,
        prefix: str = DEFAULT_PREFIX,
        domain: str | None = None,
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
        publish_async_stall_wait: float = 0.2,
        publish_async_timeout: float | object | None = _DEFAULT,
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
        self._nuid = NUID()
        self._nuid_lock = threading.Lock()
        ack_timeout = self._timeout if publish_async_timeout is _DEFAULT else publish_async_timeout
        if ack_timeout is not None and not (
            isinstance(ack_timeout, int | float) and ack_timeout > 0
        ):
            raise ValueError(f"publish_async_timeout must be positive or None, got {ack_timeout!r}")
        self._async = AsyncPublisher(
            client, publish_async_max_pending, publish_async_stall_wait, ack_timeout
        )

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
        return decode_api(msg.data, subject)

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
        self._check_consumer_config(cfg)  # an older server would drop newer fields
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
        """An ordered consumer on ``stream`` (see :mod:`jsclient.jetstream.consume.ordered`)."""
        from jsclient.jetstream.consume.ordered import OrderedConsumer

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
        from jsclient.jetstream.subscribe.pull import pull_subscribe

        return pull_subscribe(
            self, subject, durable, stream=stream, config=config, inbox_prefix=inbox_prefix
        )

    def pull_subscribe_bind(
        self, stream: str, durable: str, *, inbox_prefix: str | None = None
    ) -> PullSubscription:
        """A pull subscription to an existing pull consumer, with no lookups."""
        from jsclient.jetstream.subscribe.pull import pull_subscribe_bind

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
        the connection's). See :mod:`jsclient.jetstream.subscribe.push`.
        """
        from jsclient.jetstream.subscribe.push_setup import subscribe

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
        ttl: float | str | None = None,
        timeout: float | None = None,
    ) -> PubAck:
        """Publish to a stream and wait for its ack.

        A 503 (no stream listening yet) is retried twice, 250 ms apart, within
        ``timeout`` (default: the context's), then NoStreamResponseError. A failed
        expectation raises its API error (WrongLastSequenceError, ...). ``ttl``
        (seconds, or ``"never"``; server 2.11, a stream with ``allow_msg_ttl``)
        removes the message after that long.
        """
        hdrs = pub_headers(
            headers,
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_subject_seq,
            expected_last_msg_id,
            ttl,
        )
        if ttl is not None:  # after the TTL's own check: bad input asks nothing
            self._require_api_level(1, "per-message TTL")
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
                if not may_resend(retries, deadline - time.monotonic()):
                    raise status_reply_error(subject, (503, "No Responders")) from None
                retries += 1
                time.sleep(PUBLISH_RETRY_WAIT)
            except errors.TimeoutError:
                raise errors.TimeoutError(f"nats: timeout waiting for the publish ack on {subject}")
        return parse_pub_ack(msg.data)

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
        ttl: float | str | None = None,
        ack_timeout: float | None = None,
        timeout: float | None = None,
    ) -> Future[PubAck]:
        """Publish without waiting; the future completes with the PubAck or the error.

        ``ack_timeout`` (or its alias ``timeout``) fails the future with
        TimeoutError if no ack arrives in time; by default the context's
        ``publish_async_timeout`` (its ``timeout``, 5 s, unless given). Blocks
        only while ``publish_async_max_pending`` publishes are already in
        flight, for up to the stall wait, then raises TooManyStalledMsgsError.
        Done callbacks of the future run on the client's callback thread.
        """
        if timeout is not None:
            if ack_timeout is not None:
                raise TypeError("give ack_timeout or timeout, not both")
            ack_timeout = timeout
        hdrs = pub_headers(
            headers,
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_subject_seq,
            expected_last_msg_id,
            ttl,
        )
        if ttl is not None:  # after the TTL's own check: bad input asks nothing
            self._require_api_level(1, "per-message TTL")
        # Encoded once: retries re-send the same bytes.
        return self._async.publish(
            subject, payload, encode_headers(hdrs) if hdrs else None, ack_timeout
        )

    @property
    def publish_async_pending(self) -> int:
        """How many async publishes still wait for their ack."""
        return len(self._async.pending)

    def publish_async_complete(self, timeout: float | None = None) -> None:
        """Wait until every async publish made so far is acked or failed.

        Always ends: every publish has an ack timeout unless the context was
        made with ``publish_async_timeout=None``. TimeoutError after ``timeout``.
        """
        self._async.complete(timeout)
