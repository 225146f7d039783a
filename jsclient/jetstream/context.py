"""The JetStream context (ADR-37): what ``nc.jetstream()`` returns.

:class:`JetStream` defines every public method, with its documentation.
``account_info``, ``publish`` and the API plumbing (``_api_request``,
``_paged``) are here; the rest hand the call in one line to an area the
context makes at its start and passes itself to: ``_streams``
(:mod:`.manage.stream_admin`), ``_consumers`` (:mod:`.manage.consumer_admin`),
``_messages`` (:mod:`.publish.features`), ``_kv`` (:mod:`.kv._manage`),
``_obs`` (:mod:`.obj._manage`), ``_levels`` (:mod:`.manage.api_level`),
``_async`` (:mod:`.publish.async_pub`); or to :mod:`.consume.ordered`,
:mod:`.subscribe.pull` and :mod:`.subscribe.push_setup`.
The areas, and the handles the context makes, hold it typed as
:class:`~jsclient.jetstream._ctx.Context`, which lists what they use of it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from nats.nuid import NUID

from jsclient import errors
from jsclient.api import AccountInfo, PubAck, StreamInfo
from jsclient.jetstream._wire import (
    decode_api,
)
from jsclient.jetstream.compat import NatsPyCompat
from jsclient.jetstream.kv._manage import KeyValueBuckets
from jsclient.jetstream.manage.api_level import (
    REQUIRED_API_LEVEL,
    ApiLevel,
    refused,
    request_level,
)
from jsclient.jetstream.manage.consumer_admin import ConsumerAdmin
from jsclient.jetstream.manage.stream_admin import StreamAdmin
from jsclient.jetstream.obj._manage import ObjectStoreBuckets
from jsclient.jetstream.publish import calls as _calls
from jsclient.jetstream.publish.async_pub import AsyncPublisher
from jsclient.jetstream.publish.features import MessageFeatures
from jsclient.jetstream.subscribe import pull as _pull
from jsclient.jetstream.subscribe import push_setup as _push

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.api import ConsumerInfo
    from jsclient.jetstream.consume.consumer import Consumer
    from jsclient.jetstream.consume.ordered import OrderedConsumer
    from jsclient.jetstream.kv import KeyValue, KeyValueStatus
    from jsclient.jetstream.kv._config import KeyValueConfigLike
    from jsclient.jetstream.manage.names import ConsumerConfigLike, StreamConfigLike
    from jsclient.jetstream.manage.stream import Stream
    from jsclient.jetstream.obj import ObjectStore, ObjectStoreStatus
    from jsclient.jetstream.obj._config import ObjectStoreConfigLike
    from jsclient.jetstream.publish.batch import AtomicBatch
    from jsclient.jetstream.publish.counters import Counters
    from jsclient.jetstream.publish.fast import ErrorCallback, FastPublisher
    from jsclient.protocol.headers import HeadersIn

DEFAULT_PREFIX = "$JS.API"
_DEFAULT = object()


class JetStream(NatsPyCompat):
    """Entry point to JetStream on one connection; get it with ``nc.jetstream()``.

    ``domain`` addresses another JetStream domain (API prefix ``$JS.<domain>.API``);
    ``timeout`` bounds every API request and the default ``publish`` wait.
    Where each method's work is done: see the module docstring. nats-py's names
    (``add_stream``, ``stream_info``, ``get_msg``, ...) come from :class:`NatsPyCompat`.
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
        self._levels = ApiLevel(self)
        self._streams = StreamAdmin(self)
        self._consumers = ConsumerAdmin(self)
        self._messages = MessageFeatures(self)
        self._kv = KeyValueBuckets(self)
        self._obs = ObjectStoreBuckets(self)

    def __repr__(self) -> str:
        return f"<JetStream prefix={self._prefix!r}>"

    # -- API requests --------------------------------------------------------

    def _api_request(
        self,
        subject_suffix: str,
        payload: dict[str, Any] | bytes | None = None,
        timeout: float | None = None,
        *,
        required: tuple[int, str] | None = None,
    ) -> dict[str, Any]:
        """Request ``<prefix>.<subject_suffix>`` and return the decoded JSON answer.

        A request that needs an API level (``required``, else what
        :func:`~.manage.api_level.request_level` finds in the subject and
        payload) is checked against the server's level first and carries it in
        ``Nats-Required-Api-Level`` (ADR-44); FeatureNotSupportedError either way.
        Raises the typed API error for an ``error`` answer, ServiceUnavailableError
        when nothing answers (JetStream not enabled for the account or domain) and
        TimeoutError when no answer comes in time.
        """
        level, feature = required or request_level(subject_suffix, payload)
        headers: dict[str, str] | None = None
        if level > 0:
            self._levels.require(level, feature)
            headers = {REQUIRED_API_LEVEL: str(level)}
        subject = f"{self._prefix}.{subject_suffix}"
        if payload is None:
            data = b""
        elif isinstance(payload, bytes):
            data = payload
        else:
            data = json.dumps(payload).encode()
        wait = self._timeout if timeout is None else timeout
        try:
            msg = self._client.request(subject, data, timeout=wait, headers=headers)
        except errors.NoRespondersError:
            raise errors.ServiceUnavailableError(
                code=503, description=f"JetStream not enabled (no responders on {subject})"
            )
        except errors.TimeoutError:
            raise errors.TimeoutError(f"nats: timeout waiting for the JetStream API ({subject})")
        try:
            return decode_api(msg.data, subject)
        except errors.RequiredApiLevelError as exc:
            if level <= 0:
                raise
            raise refused(feature, level, self._levels.seen) from exc

    def _new_name(self) -> str:
        with self._nuid_lock:
            return self._nuid.next().decode()

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

    def _api_level(self) -> int:
        return self._levels.level()

    def _require_api_level(self, level: int, feature: str) -> None:
        self._levels.require(level, feature)

    # -- streams (manage/stream_admin.py) -------------------------------------

    def create_stream(self, config: StreamConfigLike | None = None, **fields: Any) -> Stream:
        """Create a stream; StreamNameAlreadyInUseError if one exists with another config."""
        return self._streams.create_stream(config, fields)

    def update_stream(self, config: StreamConfigLike | None = None, **fields: Any) -> Stream:
        """Update a stream's config; StreamNotFoundError if it does not exist."""
        return self._streams.update_stream(config, fields)

    def create_or_update_stream(
        self, config: StreamConfigLike | None = None, **fields: Any
    ) -> Stream:
        """Update the stream, or create it when it does not exist."""
        return self._streams.create_or_update_stream(config, fields)

    def stream(self, name: str) -> Stream:
        """A handle on an existing stream (with fresh info); StreamNotFoundError otherwise."""
        return self._streams.stream(name)

    def delete_stream(self, name: str) -> bool:
        """Delete a stream and its messages and consumers; True (nats-py's result)."""
        self._streams.delete_stream(name)
        return True

    def streams(self, subject: str | None = None) -> Iterator[StreamInfo]:
        """Info of every stream (only those listening on ``subject`` if given), page by page."""
        return self._streams.streams(subject)

    def stream_names(self, subject: str | None = None) -> Iterator[str]:
        """Names of every stream (only those listening on ``subject`` if given), page by page."""
        return self._streams.stream_names(subject)

    def account_info(self) -> AccountInfo:
        """Usage and limits of this account's JetStream."""
        info: AccountInfo = AccountInfo.from_response(self._api_request("INFO"))
        return info

    # -- consumers (manage/consumer_admin.py) ----------------------------------

    def create_consumer(
        self, stream: str, config: ConsumerConfigLike | None = None, **fields: Any
    ) -> Consumer:
        """Create a consumer; ConsumerAlreadyExistsError if it exists with another config.

        Without ``name`` or ``durable_name`` the consumer is ephemeral and gets a
        generated name.
        """
        return self._consumers.create_consumer(stream, config, fields)

    def update_consumer(
        self, stream: str, config: ConsumerConfigLike | None = None, **fields: Any
    ) -> Consumer:
        """Update a consumer; ConsumerDoesNotExistError if there is none by that name."""
        return self._consumers.update_consumer(stream, config, fields)

    def create_or_update_consumer(
        self, stream: str, config: ConsumerConfigLike | None = None, **fields: Any
    ) -> Consumer:
        """Create the consumer, or update it when it exists."""
        return self._consumers.create_or_update_consumer(stream, config, fields)

    def consumer(self, stream: str, name: str) -> Consumer:
        """A handle on an existing consumer; ConsumerNotFoundError otherwise."""
        return self._consumers.consumer(stream, name)

    def delete_consumer(self, stream: str, name: str) -> bool:
        """Delete a consumer."""
        self._consumers.delete_consumer(stream, name)
        return True  # as nats-py's

    def pause_consumer(self, stream: str, name: str, until: object) -> datetime:
        """Pause a consumer (no deliveries) until ``until``: a timezone-aware datetime,
        or seconds from now. Returns the time the server will resume it (UTC); a time
        in the past leaves it running. Server 2.11+."""
        return self._consumers.pause_consumer(stream, name, until)

    def resume_consumer(self, stream: str, name: str) -> None:
        """Resume a paused consumer now. Server 2.11+."""
        self._consumers.resume_consumer(stream, name)

    def unpin_consumer(self, stream: str, consumer: str, group: str) -> None:
        """Unpin the client pinned to a ``pinned_client`` priority group; the server
        pins another pulling client. Server 2.11+."""
        self._consumers.unpin_consumer(stream, consumer, group)

    def reset_consumer(self, stream: str, name: str, seq: int | None = None) -> int:
        """Reset a consumer's delivery state (ADR-60): pending and redelivered messages
        are forgotten and delivery starts again at stream sequence ``seq`` (default:
        just above the ack floor). Returns the sequence the server reset to.

        ConsumerInvalidResetError when the consumer's deliver policy does not allow
        ``seq``. Server 2.14+.
        """
        return self._consumers.reset(stream, name, seq)[0]

    def _upsert_consumer(
        self,
        stream: str,
        config: ConsumerConfigLike | None,
        fields: dict[str, Any],
        action: str | None,
    ) -> Consumer:
        return self._consumers.upsert_consumer(stream, config, fields, action)

    def _consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        return self._consumers.consumer_info(stream, name)

    def _reset(self, stream: str, name: str, seq: int | None) -> tuple[int, ConsumerInfo]:
        return self._consumers.reset(stream, name, seq)

    def ordered_consumer(self, stream: str, **options: Any) -> OrderedConsumer:
        """An ordered consumer on ``stream`` (see :mod:`jsclient.jetstream.consume.ordered`)."""
        from jsclient.jetstream.consume.ordered import OrderedConsumer

        return OrderedConsumer(self, stream, **options)

    # -- legacy subscriptions (ADR-13, ADR-15) --------------------------------

    # Defined in subscribe/pull.py and subscribe/push_setup.py, with their documentation.
    pull_subscribe = _pull.pull_subscribe
    pull_subscribe_bind = _pull.pull_subscribe_bind
    subscribe = _push.subscribe

    # -- publish -------------------------------------------------------------

    # Defined in publish/calls.py, with their documentation; publish_async's
    # window of pending acks is ``_async`` (publish/async_pub.py).
    publish = _calls.publish
    publish_async = _calls.publish_async

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

    # -- messages of servers 2.11-2.14 (publish/features.py) -------------------

    def publish_schedule(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        target: str,
        at: datetime | None = None,
        every: float | timedelta | None = None,
        cron: str | None = None,
        time_zone: str | None = None,
        ttl: float | str | None = None,
        source: str | None = None,
        headers: HeadersIn | None = None,
        timeout: float | None = None,
    ) -> PubAck:
        """Store a schedule on ``subject``: the server publishes ``payload`` (and
        ``headers``) to ``target`` at ``at``, every ``every`` seconds, or on the
        6-field ``cron`` spec (in ``time_zone``, server 2.14). ``ttl`` is the TTL
        of each message it makes; ``source`` publishes that subject's last message
        instead of ``payload``. A later schedule on ``subject`` replaces this one.

        Needs server 2.12 and a stream with ``allow_msg_schedules`` (and
        ``allow_msg_ttl`` for ``ttl``); bad arguments raise ValueError/TypeError
        before anything is sent.
        """
        return self._messages.publish_schedule(
            subject,
            payload,
            target=target,
            at=at,
            every=every,
            cron=cron,
            time_zone=time_zone,
            ttl=ttl,
            source=source,
            headers=headers,
            timeout=timeout,
        )

    def counters(self, stream: str) -> Counters:
        """The distributed counters of ``stream`` (server 2.12, ``allow_msg_counter``).

        StreamNotFoundError when there is no such stream; MessageCounterDisabledError
        (err_code 10168) when it does not keep counters.
        """
        return self._messages.counters(stream)

    def atomic_batch(
        self, *, ack_every: int | None = None, timeout: float | None = None
    ) -> AtomicBatch:
        """A new atomic batch (server 2.12, ``allow_atomic``): all of its messages
        are stored on ``commit()``, or none. See :mod:`jsclient.jetstream.publish.batch`."""
        return self._messages.atomic_batch(ack_every=ack_every, timeout=timeout)

    def fast_publisher(
        self,
        *,
        flow: int = 100,
        max_outstanding_acks: int = 2,
        gap: str = "fail",
        ack_timeout: float | None = None,
        error_cb: ErrorCallback | None = None,
    ) -> FastPublisher:
        """A fast-ingest batch (server 2.14, ``allow_batched``): no ack per message,
        the server paces the publisher. See :mod:`jsclient.jetstream.publish.fast`."""
        return self._messages.fast_publisher(
            flow=flow,
            max_outstanding_acks=max_outstanding_acks,
            gap=gap,
            ack_timeout=ack_timeout,
            error_cb=error_cb,
        )

    # -- Key-Value buckets (kv/_manage.py) -------------------------------------

    def create_key_value(self, config: KeyValueConfigLike | None = None, **fields: Any) -> KeyValue:
        """Create a bucket. An identical one is returned as it is; one with another
        config raises StreamNameAlreadyInUseError."""
        return self._kv.create_key_value(config, fields)

    def update_key_value(self, config: KeyValueConfigLike | None = None, **fields: Any) -> KeyValue:
        """Change a bucket's config; BucketNotFoundError when there is no such bucket."""
        return self._kv.update_key_value(config, fields)

    def create_or_update_key_value(
        self, config: KeyValueConfigLike | None = None, **fields: Any
    ) -> KeyValue:
        """Update the bucket, or create it when there is none."""
        return self._kv.create_or_update_key_value(config, fields)

    def key_value(self, bucket: str) -> KeyValue:
        """A handle on an existing bucket; BucketNotFoundError otherwise."""
        return self._kv.key_value(bucket)

    def delete_key_value(self, bucket: str) -> bool:
        """Delete a bucket and every key in it; True (nats-py's result), or
        BucketNotFoundError when there is none."""
        self._kv.delete_key_value(bucket)
        return True

    def key_value_names(self) -> Iterator[str]:
        """Names of every bucket, page by page."""
        return self._kv.key_value_names()

    def key_values(self) -> Iterator[KeyValueStatus]:
        """The status of every bucket, page by page."""
        return self._kv.key_values()

    # -- object stores (obj/_manage.py) ----------------------------------------

    def create_object_store(
        self, config: ObjectStoreConfigLike | str | None = None, **fields: Any
    ) -> ObjectStore:
        """Create a bucket (``nats.js.api.ObjectStoreConfig`` or its fields: bucket,
        description, ttl, max_bytes, storage, replicas, placement, metadata,
        compression; or, as nats-py takes it, the bucket's name first:
        ``create_object_store("files", ...)``). An identical one is returned as
        it is; one with another config raises StreamNameAlreadyInUseError."""
        return self._obs.create_object_store(config, fields)

    def object_store(self, bucket: str) -> ObjectStore:
        """A handle on an existing bucket; BucketNotFoundError otherwise."""
        return self._obs.object_store(bucket)

    def delete_object_store(self, bucket: str) -> bool:
        """Delete a bucket and every object in it; True (nats-py's result), or
        BucketNotFoundError when there is none."""
        self._obs.delete_object_store(bucket)
        return True

    def object_store_names(self) -> Iterator[str]:
        """Names of every bucket, page by page."""
        return self._obs.object_store_names()

    def object_stores(self) -> Iterator[ObjectStoreStatus]:
        """The status of every bucket, page by page."""
        return self._obs.object_stores()
