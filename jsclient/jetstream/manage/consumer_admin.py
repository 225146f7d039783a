"""The consumers of a JetStream context: create, update, bind, delete, and the
lifecycle calls of servers 2.11-2.14 (pause, resume, unpin, reset).

:class:`ConsumerAdmin` is the context's consumer area; ``js.create_consumer``
and the rest delegate to it. Creating is ``CONSUMER.CREATE.<stream>.<name>``
(plus ``.<filter>`` for a single filter subject) with ``action`` "create",
"update" or none; an ephemeral consumer gets a generated name. The lifecycle
calls are one request each:

- ``CONSUMER.PAUSE.<stream>.<consumer>`` with ``{"pause_until": <RFC 3339>}``
  (server 2.11, API level 1); an empty ``{}`` resumes;
- ``CONSUMER.UNPIN.<stream>.<consumer>`` with ``{"group": ...}`` (ADR-42,
  server 2.11): the group's pinned client loses its pin, the server picks another;
- ``CONSUMER.RESET.<stream>.<consumer>`` (ADR-60, server 2.14, API level 4),
  with ``{"seq": N}`` or an empty body: pending and redelivered messages are
  forgotten and delivery starts again at stream sequence ``N`` (without one:
  just above the ack floor). The answer is the consumer's info plus
  ``reset_seq``. Each consumer answers its own reset subject, and the API's
  wildcard takes the request even for a consumer that does not exist, so
  nothing would answer until the timeout: the consumer's info is asked first
  (``ConsumerNotFoundError`` at once).

An older server would ignore fields it does not know, or not answer an API
subject it lacks, so the server's API level (``$JS.API.INFO``, asked once per
context) is checked first: FeatureNotSupportedError, nothing sent.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.api import ConsumerInfo, RawStreamMsg
from jsclient.jetstream.consume.consumer import Consumer
from jsclient.jetstream.consume.priority import check_group_name
from jsclient.jetstream.manage.api_level import consumer_level
from jsclient.jetstream.manage.names import (
    ConsumerConfigLike,
    check_consumer_name,
    check_stream_name,
    consumer_config,
    utc_rfc3339,
)

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context

LEVEL_PAUSE = 1
LEVEL_PRIORITY_GROUPS = 1
LEVEL_PRIORITIZED = 2
LEVEL_RESET = 4


def pause_deadline(until: object) -> _dt.datetime:
    """``until`` as an aware UTC datetime: a timezone-aware datetime, or seconds from now."""
    if isinstance(until, _dt.datetime):
        if until.tzinfo is None or until.utcoffset() is None:
            raise ValueError(
                "until must be a timezone-aware datetime (e.g. datetime.now(timezone.utc) "
                "+ timedelta(...)) or seconds from now; got a naive datetime"
            )
        return until.astimezone(_dt.UTC)
    if isinstance(until, int | float) and not isinstance(until, bool):
        if not math.isfinite(until):
            raise ValueError(f"until must be a finite number of seconds, got {until!r}")
        try:
            return _dt.datetime.now(_dt.UTC) + _dt.timedelta(seconds=until)
        except OverflowError:
            raise ValueError(f"until is out of range: {until!r} seconds") from None
    raise TypeError(f"until must be a datetime or seconds from now, not {type(until).__name__}")


def _parse_time(value: Any) -> _dt.datetime:
    parsed: _dt.datetime = RawStreamMsg._parse_utc_iso(value)
    return parsed


def needed_level(cfg: Any) -> tuple[int, str]:
    """The API level a consumer config needs, and the feature needing it (0, "": none).

    The same computation the request's ``Nats-Required-Api-Level`` header comes from.
    """
    return consumer_level(cfg.as_dict())


class ConsumerAdmin:
    """The consumers of a JetStream context (its ``_consumers``): create, update,
    bind and delete, and pause, resume, unpin and reset.

    :class:`~jsclient.jetstream.context.JetStream`'s consumer methods delegate
    to the methods of the same name here and document them (``reset_consumer``
    to ``reset``); the subscriptions and handles reach ``upsert_consumer``,
    ``consumer_info`` and ``reset`` through the context's ``_upsert_consumer``,
    ``_consumer_info`` and ``_reset``.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def create_consumer(
        self, stream: str, config: ConsumerConfigLike | None, fields: dict[str, Any]
    ) -> Consumer:
        return self.upsert_consumer(stream, config, fields, "create")

    def update_consumer(
        self, stream: str, config: ConsumerConfigLike | None, fields: dict[str, Any]
    ) -> Consumer:
        return self.upsert_consumer(stream, config, fields, "update")

    def create_or_update_consumer(
        self, stream: str, config: ConsumerConfigLike | None, fields: dict[str, Any]
    ) -> Consumer:
        return self.upsert_consumer(stream, config, fields, None)

    def upsert_consumer(
        self,
        stream: str,
        config: ConsumerConfigLike | None,
        fields: dict[str, Any],
        action: str | None,
        timeout: float | None = None,
    ) -> Consumer:
        """``CONSUMER.CREATE`` with ``action`` "create", "update" or None (either);
        ``timeout`` bounds the request (default: the context's)."""
        check_stream_name(stream)
        cfg = consumer_config(config, fields)
        if cfg.name is not None:
            check_consumer_name(cfg.name)
        if cfg.durable_name is not None:
            check_consumer_name(cfg.durable_name)
        # An older server would drop the fields it does not know: refuse first.
        self._ctx._require_api_level(*needed_level(cfg))
        name = cfg.name or cfg.durable_name
        if name is None:
            if action == "update":
                raise errors.InvalidConsumerNameError(
                    "nats: update_consumer needs the consumer's name or durable_name"
                )
            name = self._ctx._new_name()
            cfg = cfg.evolve(name=name)
        suffix = f"CONSUMER.CREATE.{stream}.{name}"
        if cfg.filter_subject and not cfg.filter_subjects:
            suffix += f".{cfg.filter_subject}"
        req: dict[str, Any] = {"stream_name": stream, "config": cfg.as_dict()}
        if action is not None:
            req["action"] = action
        resp = self._ctx._api_request(suffix, req, timeout)
        return Consumer(self._ctx, stream, ConsumerInfo.from_response(resp))

    def consumer(self, stream: str, name: str) -> Consumer:
        check_stream_name(stream)
        check_consumer_name(name)
        return Consumer(self._ctx, stream, self.consumer_info(stream, name))

    def consumer_info(self, stream: str, name: str, timeout: float | None = None) -> ConsumerInfo:
        """A consumer's info from the server (names already checked); ``timeout``
        bounds the request (default: the context's)."""
        info: ConsumerInfo = ConsumerInfo.from_response(
            self._ctx._api_request(f"CONSUMER.INFO.{stream}.{name}", None, timeout)
        )
        return info

    def delete_consumer(self, stream: str, name: str) -> None:
        check_stream_name(stream)
        check_consumer_name(name)
        self._ctx._api_request(f"CONSUMER.DELETE.{stream}.{name}")

    def pause_consumer(self, stream: str, name: str, until: object) -> _dt.datetime:
        deadline = pause_deadline(until)
        resp = self._pause(stream, name, {"pause_until": utc_rfc3339(deadline)})
        return _parse_time(resp.get("pause_until") or utc_rfc3339(deadline))

    def resume_consumer(self, stream: str, name: str) -> None:
        self._pause(stream, name, {})

    def _pause(self, stream: str, name: str, req: dict[str, Any]) -> dict[str, Any]:
        check_stream_name(stream)
        check_consumer_name(name)
        self._ctx._require_api_level(LEVEL_PAUSE, "consumer pause")
        return self._ctx._api_request(f"CONSUMER.PAUSE.{stream}.{name}", req)

    def unpin_consumer(self, stream: str, consumer: str, group: str) -> None:
        check_stream_name(stream)
        check_consumer_name(consumer)
        check_group_name(group)
        self._ctx._require_api_level(LEVEL_PRIORITY_GROUPS, "consumer unpin")
        self._ctx._api_request(f"CONSUMER.UNPIN.{stream}.{consumer}", {"group": group})

    def reset(self, stream: str, name: str, seq: int | None) -> tuple[int, ConsumerInfo]:
        """The sequence the server reset to, and the consumer's info after the reset."""
        check_stream_name(stream)
        check_consumer_name(name)
        if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or seq < 1):
            raise ValueError(f"seq must be a positive int (a stream sequence), got {seq!r}")
        self._ctx._require_api_level(LEVEL_RESET, "consumer reset")
        self.consumer_info(stream, name)  # a typed not-found now, not a timeout later
        body: dict[str, Any] | bytes = b"" if seq is None else {"seq": seq}
        resp = self._ctx._api_request(f"CONSUMER.RESET.{stream}.{name}", body)
        reset_seq = resp.pop("reset_seq", 0)
        info: ConsumerInfo = ConsumerInfo.from_response(resp)
        return int(reset_seq or 0), info
