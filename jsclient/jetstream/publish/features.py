"""Messages of servers 2.11-2.14 on the JetStream context: schedules, counters, batches.

:class:`MessagesManager` is a mixin of :class:`~jsclient.jetstream.context.JetStream`:
``publish_schedule`` (ADR-51), ``counters`` (ADR-49), ``atomic_batch`` and
``fast_publisher`` (ADR-50), and the server's JetStream API level that each
needs (asked of ``$JS.API.INFO`` once per context; a server too old raises
:class:`~jsclient.errors.FeatureNotSupportedError` before anything is sent).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, cast

from jsclient import errors
from jsclient.api import PubAck
from jsclient.jetstream.manage.api_level import ApiLevel
from jsclient.jetstream.publish.batch import AtomicBatch
from jsclient.jetstream.publish.counters import Counters
from jsclient.jetstream.publish.fast import ErrorCallback, FastPublisher
from jsclient.jetstream.publish.schedule import schedule_headers

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.protocol.headers import HeadersIn

#: JetStream API levels (``$JS.API.INFO`` "api.level") of the features here.
LEVEL_TTL = 1  # server 2.11
LEVEL_2_12 = 2  # counters, schedules, atomic batches
LEVEL_2_14 = 4  # fast ingest, end-of-batch commits, cron time zones


class MessagesManager(ApiLevel):
    """The message features' part of the JetStream context."""

    def _mctx(self) -> Context:
        return cast("Context", self)

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
        hdrs = schedule_headers(
            subject,
            target=target,
            at=at,
            every=every,
            cron=cron,
            time_zone=time_zone,
            ttl=ttl,
            source=source,
            headers=headers,
        )
        self._require_api_level(LEVEL_2_12, "message schedules")
        if time_zone is not None:
            self._require_api_level(LEVEL_2_14, "cron schedule time zones")
        ack: PubAck = self._mctx().publish(subject, payload, headers=hdrs, timeout=timeout)
        return ack

    def counters(self, stream: str) -> Counters:
        """The distributed counters of ``stream`` (server 2.12, ``allow_msg_counter``).

        StreamNotFoundError when there is no such stream; MessageCounterDisabledError
        (err_code 10168) when it does not keep counters.
        """
        self._require_api_level(LEVEL_2_12, "counters")
        handle = self._mctx().stream(stream)
        if not handle.cached_info.config.allow_msg_counter:
            raise errors.MessageCounterDisabledError(
                code=400,
                description=f"message counters is disabled on stream {stream}",
                err_code=10168,
                stream=stream,
            )
        return Counters(self._mctx(), handle)

    def atomic_batch(
        self, *, ack_every: int | None = None, timeout: float | None = None
    ) -> AtomicBatch:
        """A new atomic batch (server 2.12, ``allow_atomic``): all of its messages
        are stored on ``commit()``, or none. See :mod:`jsclient.jetstream.publish.batch`."""
        self._require_api_level(LEVEL_2_12, "atomic batch publish")
        return AtomicBatch(self._mctx(), ack_every=ack_every, timeout=timeout)

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
        self._require_api_level(LEVEL_2_14, "fast-ingest batch publish")
        return FastPublisher(
            self._mctx(),
            flow=flow,
            max_outstanding_acks=max_outstanding_acks,
            gap=gap,
            ack_timeout=ack_timeout,
            error_cb=error_cb,
        )
