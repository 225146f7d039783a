"""A pull's priority-group options (ADR-42), checked against the consumer before sending.

A consumer with priority groups (``priority_groups`` and a ``priority_policy``)
needs ``group`` on every pull; the server answers a pull without one with
``400 Bad Request - Priority Group missing``, and silently ignores a group on a
consumer without groups. The checks here read the consumer's cached info, so
either mistake is a typed error and nothing is sent:

- ``group`` is required on a consumer with groups and must be one of them;
  it is refused on a consumer without groups;
- ``min_pending`` / ``min_ack_pending`` (serve this pull only while the
  consumer has at least that many messages pending / awaiting acks) need the
  ``overflow`` policy;
- ``priority`` (0-9, lower served first) needs the ``prioritized`` policy.

With the ``pinned_client`` policy the engine adds the pin id it was given
(``"id"``) to every pull of the group; see ``Engine.publish_pull``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from jsclient import errors

#: ADR-42 group names: ADR-6 "limited-term" characters, at most 16.
_GROUP_RE = re.compile(r"[a-zA-Z0-9/_=-]{1,16}")
MAX_PRIORITY = 9


@dataclass(frozen=True, slots=True)
class Priority:
    """The priority-group fields of a pull request (0: not sent)."""

    group: str
    min_pending: int = 0
    min_ack_pending: int = 0
    priority: int = 0

    def add_to(self, req: dict[str, Any]) -> None:
        """Put these fields into a ``CONSUMER.MSG.NEXT`` request body."""
        req["group"] = self.group
        if self.min_pending:
            req["min_pending"] = self.min_pending
        if self.min_ack_pending:
            req["min_ack_pending"] = self.min_ack_pending
        if self.priority:
            req["priority"] = self.priority


def _policy(cfg: Any) -> str:
    policy = getattr(cfg, "priority_policy", None)
    return str(getattr(policy, "value", policy) or "none")


def consumer_groups(info: Any) -> tuple[list[str], str]:
    """``(priority_groups, priority_policy)`` of a ConsumerInfo (``[]``, ``"none"`` without)."""
    cfg = getattr(info, "config", None)
    return list(getattr(cfg, "priority_groups", None) or []), _policy(cfg)


def _count(name: str, value: object) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def check_group_name(group: object) -> str:
    """``group`` if it can name a priority group, else InvalidPriorityGroupError."""
    if not isinstance(group, str) or not _GROUP_RE.fullmatch(group):
        raise errors.InvalidPriorityGroupError(
            f"nats: invalid priority group {group!r} (1 to 16 of A-Z, a-z, 0-9, '-', '_', '/', '=')"
        )
    return group


def priority_options(
    info: Any,
    group: str | None,
    min_pending: int | None = None,
    min_ack_pending: int | None = None,
    priority: int | None = None,
) -> Priority | None:
    """The checked priority fields of a pull on the consumer ``info`` describes.

    ``info`` None (a pull subscription bound without lookups) skips the checks
    against the consumer; the server then decides.
    """
    mp = _count("min_pending", min_pending)
    map_ = _count("min_ack_pending", min_ack_pending)
    if priority is not None and (
        not isinstance(priority, int)
        or isinstance(priority, bool)
        or not 0 <= priority <= MAX_PRIORITY
    ):
        raise ValueError(f"priority must be an int from 0 to {MAX_PRIORITY}, got {priority!r}")
    prio = priority or 0
    if info is not None:
        _check_against(info, group, mp or map_, priority is not None)
    if group is None:
        if mp or map_ or priority is not None:
            raise errors.PriorityGroupRequiredError(
                "nats: min_pending, min_ack_pending and priority apply to a priority group: "
                "pass group="
            )
        return None
    return Priority(check_group_name(group), mp, map_, prio)


def _check_against(info: Any, group: str | None, overflow: int, prioritized: bool) -> None:
    groups, policy = consumer_groups(info)
    where = f"consumer {getattr(info, 'name', '?')!r}"
    if not groups:
        if group is not None:
            raise errors.InvalidPriorityGroupError(
                f"nats: {where} has no priority groups; pull without group="
            )
    elif group is None:
        raise errors.PriorityGroupRequiredError(
            f"nats: {where} has priority groups {groups}: every pull needs group= (one of them)"
        )
    elif group not in groups:
        raise errors.InvalidPriorityGroupError(
            f"nats: {where} has no priority group {group!r}; its groups are {groups}"
        )
    if overflow and policy != "overflow":
        raise errors.PriorityPolicyError(
            f"nats: min_pending and min_ack_pending need the overflow priority policy; "
            f"{where} has {policy!r}"
        )
    if prioritized and policy != "prioritized":
        raise errors.PriorityPolicyError(
            f"nats: priority needs the prioritized priority policy; {where} has {policy!r}"
        )


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
