"""``ConsumerConfig`` and ``ConsumerInfo`` with the fields of server 2.11-2.14 consumers.

Priority groups (ADR-42) add ``priority_groups``, ``priority_policy`` and
``priority_timeout`` (seconds here, nanoseconds on the wire) to the config, and
the state of each group (:class:`PriorityGroupState`) to the info; pausing adds
``pause_until`` to the config and ``paused``, ``pause_remaining`` to the info.

Where the installed nats-py has every one of these fields its own classes are
used as they are. Otherwise the classes here extend nats-py's with the missing
ones, holding them as nats-py does (``pause_until`` the server's RFC 3339 text,
``pause_remaining`` the server's value): once an upgraded nats-py has them, its
classes take over and nothing changes for code that reads them.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any

import nats.js.api as _api

_NatsConsumerConfig = _api.ConsumerConfig
_NatsConsumerInfo = _api.ConsumerInfo
_NANOSECOND = 1_000_000_000


def _has(cls: type, names: tuple[str, ...]) -> bool:
    return {f.name for f in dataclasses.fields(cls)} >= set(names)


if hasattr(_api, "PriorityPolicy"):
    PriorityPolicy = _api.PriorityPolicy
else:

    class PriorityPolicy(enum.StrEnum):  # type: ignore[no-redef]
        """How a consumer with priority groups hands out messages (ADR-42)."""

        NONE = "none"
        OVERFLOW = "overflow"
        PINNED_CLIENT = "pinned_client"
        PRIORITIZED = "prioritized"


if hasattr(_api, "PriorityGroupState"):
    PriorityGroupState = _api.PriorityGroupState
else:

    @dataclasses.dataclass
    class PriorityGroupState(_api.Base):  # type: ignore[no-redef]
        """One priority group of a consumer: its name and the client pinned to it, if any."""

        group: str
        pinned_client_id: str | None = None
        pinned_ts: datetime.datetime | None = None

        @classmethod
        def from_response(cls, resp: dict[str, Any]) -> Any:
            ts = resp.get("pinned_ts")
            # Go writes an unset time as year 1: no client is pinned.
            if isinstance(ts, str) and ts.startswith("0001-01-01"):
                resp["pinned_ts"] = None
            else:
                cls._convert_utc_iso(resp, "pinned_ts")
            return super().from_response(resp)


_CONFIG_EXTRA = ("priority_groups", "priority_policy", "priority_timeout", "pause_until")
_INFO_EXTRA = ("priority_groups", "paused", "pause_remaining")

if _has(_NatsConsumerConfig, _CONFIG_EXTRA):
    ConsumerConfig = _NatsConsumerConfig
else:

    @dataclasses.dataclass
    class ConsumerConfig(_NatsConsumerConfig):  # type: ignore[no-redef]
        """nats-py's ConsumerConfig plus priority groups and ``pause_until``."""

        # RFC 3339, as nats-py holds it (create_consumer also takes a datetime).
        pause_until: str | None = None
        priority_groups: list[str] | None = None
        priority_policy: str | None = None  # a PriorityPolicy (a str) or its value
        priority_timeout: float | None = None  # seconds

        @classmethod
        def from_response(cls, resp: dict[str, Any]) -> Any:
            cls._convert_nanoseconds(resp, "priority_timeout")
            return super().from_response(resp)

        def as_dict(self) -> dict[str, object]:
            result = super().as_dict()
            if self.priority_timeout is not None:
                result["priority_timeout"] = int(self.priority_timeout * _NANOSECOND)
            return result


if _has(_NatsConsumerInfo, _INFO_EXTRA) and ConsumerConfig is _NatsConsumerConfig:
    ConsumerInfo = _NatsConsumerInfo
else:

    @dataclasses.dataclass
    class ConsumerInfo(_NatsConsumerInfo):  # type: ignore[no-redef]
        """nats-py's ConsumerInfo plus the priority groups' state and the pause fields.

        Its ``config`` is this module's :class:`ConsumerConfig`.
        """

        paused: bool | None = None
        pause_remaining: Any = None  # as the server sends it (nanoseconds)
        priority_groups: list[Any] | None = None  # of PriorityGroupState

        @classmethod
        def from_response(cls, resp: dict[str, Any]) -> Any:
            config = resp.get("config")
            resp["config"] = None  # nats-py would build its own ConsumerConfig
            cls._convert(resp, "priority_groups", PriorityGroupState)
            info = super().from_response(resp)
            if config is not None:
                info.config = ConsumerConfig.from_response(config)
            return info
