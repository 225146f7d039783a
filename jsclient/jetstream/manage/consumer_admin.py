"""Consumer lifecycle of servers 2.11-2.14 on the JetStream context: pause, resume,
unpin, reset, and the JetStream API level check they need.

:class:`ConsumerAdmin` is a mixin of :class:`~jsclient.jetstream.context.JetStream`.
Each call is one request:

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
from typing import TYPE_CHECKING, Any, cast

from jsclient import errors
from jsclient.api import ConsumerInfo, RawStreamMsg
from jsclient.jetstream.consume.priority import check_group_name, consumer_groups
from jsclient.jetstream.manage.api_level import ApiLevel
from jsclient.jetstream.manage.names import check_consumer_name, check_stream_name, utc_rfc3339

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
    """The API level a consumer config needs, and the feature needing it (0, "": none)."""
    policy = getattr(cfg, "priority_policy", None)
    policy = str(getattr(policy, "value", policy) or "none")
    if policy == "prioritized":
        return LEVEL_PRIORITIZED, "the prioritized priority policy"
    if policy != "none" or getattr(cfg, "priority_groups", None):
        return LEVEL_PRIORITY_GROUPS, "consumer priority groups"
    if getattr(cfg, "pause_until", None):
        return LEVEL_PAUSE, "consumer pause_until"
    return 0, ""


class ConsumerAdmin(ApiLevel):
    """Pause, resume, unpin and reset of consumers: the JetStream context's part."""

    def _check_consumer_config(self, cfg: Any) -> None:
        """Refuse a consumer config the server is too old for (it would drop the fields)."""
        level, feature = needed_level(cfg)
        self._require_api_level(level, feature)

    def pause_consumer(self, stream: str, name: str, until: object) -> _dt.datetime:
        """Pause a consumer (no deliveries) until ``until``: a timezone-aware datetime,
        or seconds from now. Returns the time the server will resume it (UTC); a time
        in the past leaves it running. Server 2.11+."""
        deadline = pause_deadline(until)
        resp = self._pause(stream, name, {"pause_until": utc_rfc3339(deadline)})
        return _parse_time(resp.get("pause_until") or utc_rfc3339(deadline))

    def resume_consumer(self, stream: str, name: str) -> None:
        """Resume a paused consumer now. Server 2.11+."""
        self._pause(stream, name, {})

    def _pause(self, stream: str, name: str, req: dict[str, Any]) -> dict[str, Any]:
        check_stream_name(stream)
        check_consumer_name(name)
        self._require_api_level(LEVEL_PAUSE, "consumer pause")
        js = cast("Context", self)
        return js._api_request(f"CONSUMER.PAUSE.{stream}.{name}", req)

    def unpin_consumer(self, stream: str, consumer: str, group: str) -> None:
        """Unpin the client pinned to a ``pinned_client`` priority group; the server
        pins another pulling client. Server 2.11+."""
        check_stream_name(stream)
        check_consumer_name(consumer)
        check_group_name(group)
        self._require_api_level(LEVEL_PRIORITY_GROUPS, "consumer unpin")
        js = cast("Context", self)
        js._api_request(f"CONSUMER.UNPIN.{stream}.{consumer}", {"group": group})

    def reset_consumer(self, stream: str, name: str, seq: int | None = None) -> int:
        """Reset a consumer's delivery state (ADR-60): pending and redelivered messages
        are forgotten and delivery starts again at stream sequence ``seq`` (default:
        just above the ack floor). Returns the sequence the server reset to.

        ConsumerInvalidResetError when the consumer's deliver policy does not allow
        ``seq``. Server 2.14+.
        """
        return self._reset(stream, name, seq)[0]

    def _reset(self, stream: str, name: str, seq: int | None) -> tuple[int, ConsumerInfo]:
        check_stream_name(stream)
        check_consumer_name(name)
        if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or seq < 1):
            raise ValueError(f"seq must be a positive int (a stream sequence), got {seq!r}")
        self._require_api_level(LEVEL_RESET, "consumer reset")
        js = cast("Context", self)
        js._consumer_info(stream, name)  # a typed not-found now, not a timeout later
        body: dict[str, Any] | bytes = b"" if seq is None else {"seq": seq}
        resp = js._api_request(f"CONSUMER.RESET.{stream}.{name}", body)
        reset_seq = resp.pop("reset_seq", 0)
        info: ConsumerInfo = ConsumerInfo.from_response(resp)
        return int(reset_seq or 0), info


def check_unpin_group(info: Any, group: str) -> None:
    """A consumer's own ``unpin(group)``: the group must be one of its groups."""
    groups, _ = consumer_groups(info)
    if group not in groups:
        name = getattr(info, "name", "?")
        if not groups:
            raise errors.InvalidPriorityGroupError(
                f"nats: consumer {name!r} has no priority groups"
            )
        raise errors.InvalidPriorityGroupError(
            f"nats: consumer {name!r} has no priority group {group!r}; its groups are {groups}"
        )
