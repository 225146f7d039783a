"""Messages of servers 2.11-2.14 on the JetStream context: schedules, counters, batches.

:class:`MessageFeatures` is the context's area for them; ``js.publish_schedule``
(ADR-51), ``js.counters`` (ADR-49), ``js.atomic_batch`` and ``js.fast_publisher``
(ADR-50) delegate to it. Each checks the server's JetStream API level it needs
first (asked of ``$JS.API.INFO`` once per context, see
:mod:`jsclient.jetstream.manage.api_level`): a server too old raises
:class:`~jsclient.errors.FeatureNotSupportedError` before anything is sent.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from jsclient import errors
from jsclient.api import PubAck
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


class MessageFeatures:
    """Schedules, counters and batch publish of a JetStream context (its ``_messages``).

    The public methods are :class:`~jsclient.jetstream.context.JetStream`'s of
    the same name and are documented there.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def publish_schedule(
        self,
        subject: str,
        payload: bytes,
        *,
        target: str,
        at: datetime | None,
        every: float | timedelta | None,
        cron: str | None,
        time_zone: str | None,
        ttl: float | str | None,
        source: str | None,
        headers: HeadersIn | None,
        timeout: float | None,
    ) -> PubAck:
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
        self._ctx._require_api_level(LEVEL_2_12, "message schedules")
        if time_zone is not None:
            self._ctx._require_api_level(LEVEL_2_14, "cron schedule time zones")
        ack: PubAck = self._ctx.publish(subject, payload, headers=hdrs, timeout=timeout)
        return ack

    def counters(self, stream: str) -> Counters:
        self._ctx._require_api_level(LEVEL_2_12, "counters")
        handle = self._ctx.stream(stream)
        if not handle.cached_info.config.allow_msg_counter:
            raise errors.MessageCounterDisabledError(
                code=400,
                description=f"message counters is disabled on stream {stream}",
                err_code=10168,
                stream=stream,
            )
        return Counters(self._ctx, handle)

    def atomic_batch(self, *, ack_every: int | None, timeout: float | None) -> AtomicBatch:
        self._ctx._require_api_level(LEVEL_2_12, "atomic batch publish")
        return AtomicBatch(self._ctx, ack_every=ack_every, timeout=timeout)

    def fast_publisher(
        self,
        *,
        flow: int,
        max_outstanding_acks: int,
        gap: str,
        ack_timeout: float | None,
        error_cb: ErrorCallback | None,
    ) -> FastPublisher:
        self._ctx._require_api_level(LEVEL_2_14, "fast-ingest batch publish")
        return FastPublisher(
            self._ctx,
            flow=flow,
            max_outstanding_acks=max_outstanding_acks,
            gap=gap,
            ack_timeout=ack_timeout,
            error_cb=error_cb,
        )
