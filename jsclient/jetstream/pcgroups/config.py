"""The configs of partitioned consumer groups, as their KV entries hold them.

A group's config is one JSON value in a KV bucket (``static-consumer-groups`` or
``elastic-consumer-groups``) under the key ``<stream>.<group>``. The field
names, their order, which are left out when empty and the escaping of ``<``,
``>`` and ``&`` are those of orbit.go's ``pcgroups`` (Go's ``encoding/json``),
so the bytes jsclient writes are the bytes a Go member writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jsclient.jetstream.pcgroups.errors import ConsumerGroupConfigError

__all__ = [
    "ELASTIC_BUCKET",
    "STATIC_BUCKET",
    "ElasticConsumerGroupConfig",
    "MemberMapping",
    "PartitioningFilter",
    "StaticConsumerGroupConfig",
]

#: The KV bucket of static groups' configs.
STATIC_BUCKET = "static-consumer-groups"
#: The KV bucket of elastic groups' configs.
ELASTIC_BUCKET = "elastic-consumer-groups"

_GO_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def go_json(value: Any) -> bytes:
    """``value`` as Go's ``json.Marshal`` writes it: compact, UTF-8, HTML characters escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in _GO_ESCAPES.items():
        if raw in text:
            text = text.replace(raw, escaped)
    return text.encode()


def _int(obj: dict[str, Any], name: str, default: int | None = None) -> int:
    value = obj.get(name, default)
    if value is None and default is not None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConsumerGroupConfigError(f"nats: consumer group config: {name} must be an integer")
    return value


def _list(obj: dict[str, Any], name: str) -> list[Any]:
    value = obj.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConsumerGroupConfigError(f"nats: consumer group config: {name} must be a list")
    return value


def _ints(obj: dict[str, Any], name: str, what: str) -> list[int]:
    out = _list(obj, name)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in out):
        raise ConsumerGroupConfigError(f"nats: consumer group config: {what} must be ints")
    return list(out)


def _strings(obj: dict[str, Any], name: str) -> list[str]:
    out = _list(obj, name)
    if not all(isinstance(s, str) for s in out):
        raise ConsumerGroupConfigError(f"nats: consumer group config: {name} must be strings")
    return list(out)


def _object(data: bytes | str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(data, dict):
        return data
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise ConsumerGroupConfigError(f"nats: consumer group config is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ConsumerGroupConfigError("nats: consumer group config must be a JSON object")
    return obj


@dataclass
class MemberMapping:
    """An explicit assignment: ``member`` consumes the ``partitions`` (0-based) listed."""

    member: str
    partitions: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (``member``, ``partitions``)."""
        return {"member": self.member, "partitions": list(self.partitions)}

    @classmethod
    def from_dict(cls, obj: Any) -> MemberMapping:
        """A mapping from its JSON object; ConsumerGroupConfigError when malformed."""
        if not isinstance(obj, dict) or not isinstance(obj.get("member", ""), str):
            raise ConsumerGroupConfigError("nats: consumer group config: bad member mapping")
        return cls(obj.get("member", ""), _ints(obj, "partitions", "partitions"))


@dataclass
class PartitioningFilter:
    """A subject filter of an elastic group and which of its ``*`` wildcards
    (1-based) make the partitioning key; none: the whole subject."""

    filter: str
    partitioning_wildcards: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (``filter``, ``partitioning_wildcards``)."""
        return {"filter": self.filter, "partitioning_wildcards": list(self.partitioning_wildcards)}

    @classmethod
    def from_dict(cls, obj: Any) -> PartitioningFilter:
        """A filter from its JSON object; ConsumerGroupConfigError when malformed."""
        if not isinstance(obj, dict) or not isinstance(obj.get("filter", ""), str):
            raise ConsumerGroupConfigError("nats: consumer group config: bad partitioning filter")
        wcs = _ints(obj, "partitioning_wildcards", "partitioning wildcards")
        return cls(obj.get("filter", ""), wcs)


def _validate_membership(
    max_members: int, members: list[str], mappings: list[MemberMapping]
) -> None:
    if max_members < 1:
        raise ConsumerGroupConfigError("nats: the max number of members must be >= 1")
    if members and mappings:
        raise ConsumerGroupConfigError(
            "nats: either members or member mappings must be provided, not both"
        )
    if not mappings:
        return  # members are deduplicated and capped to max_members when assigned
    if len(mappings) > max_members:
        raise ConsumerGroupConfigError(
            "nats: the number of member mappings must be between 1 and the max number of members"
        )
    names: set[str] = set()
    parts: set[int] = set()
    for mm in mappings:
        if mm.member in names:
            raise ConsumerGroupConfigError("nats: member names must be unique")
        names.add(mm.member)
        for p in mm.partitions:
            if p in parts:
                raise ConsumerGroupConfigError("nats: partition numbers must be used only once")
            parts.add(p)
            if not 0 <= p < max_members:
                raise ConsumerGroupConfigError(
                    "nats: partition numbers must be between 0 and one less than "
                    "the max number of members"
                )
    if len(parts) != max_members:
        raise ConsumerGroupConfigError(
            "nats: the number of unique partition numbers must be equal to "
            "the max number of members"
        )


def _in_membership(members: list[str], mappings: list[MemberMapping], name: str) -> bool:
    return name in members or any(m.member == name for m in mappings)


@dataclass
class StaticConsumerGroupConfig:
    """A static group: ``max_members`` partitions, optional subject ``filters``, and
    its ``members`` (partitions assigned automatically) or ``member_mappings``."""

    max_members: int
    filters: list[str] = field(default_factory=list)
    members: list[str] = field(default_factory=list)
    member_mappings: list[MemberMapping] = field(default_factory=list)

    def is_in_membership(self, name: str) -> bool:
        """Whether ``name`` is one of the members (or has a mapping)."""
        return _in_membership(self.members, self.member_mappings, name)

    def validate(self) -> None:
        """Raise ConsumerGroupConfigError when the config breaks the rules."""
        _validate_membership(self.max_members, self.members, self.member_mappings)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, empty lists left out (as Go's ``omitempty``)."""
        out: dict[str, Any] = {"max_members": self.max_members}
        if self.filters:
            out["filters"] = list(self.filters)
        if self.members:
            out["members"] = list(self.members)
        if self.member_mappings:
            out["member_mappings"] = [m.to_dict() for m in self.member_mappings]
        return out

    def to_json(self) -> bytes:
        """The KV entry's value: the bytes orbit.go writes for this config."""
        return go_json(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes | str | dict[str, Any]) -> StaticConsumerGroupConfig:
        """Parse (and validate) a KV entry's value; ConsumerGroupConfigError when bad."""
        obj = _object(data)
        cfg = cls(
            _int(obj, "max_members", 0),
            _strings(obj, "filters"),
            _strings(obj, "members"),
            [MemberMapping.from_dict(m) for m in _list(obj, "member_mappings")],
        )
        cfg.validate()
        return cfg


@dataclass
class ElasticConsumerGroupConfig:
    """An elastic group: ``max_members`` partitions of what its
    ``partitioning_filters`` match, the buffer limits of its work-queue stream
    (0: none) and its ``members`` or ``member_mappings``, which may change.

    ``revision`` is the KV revision the config was read at (not in the JSON).
    """

    max_members: int
    partitioning_filters: list[PartitioningFilter] = field(default_factory=list)
    max_buffered_msgs: int = 0
    max_buffered_bytes: int = 0
    members: list[str] = field(default_factory=list)
    member_mappings: list[MemberMapping] = field(default_factory=list)
    revision: int = field(default=0, compare=False)

    def is_in_membership(self, name: str) -> bool:
        """Whether ``name`` is one of the members (or has a mapping)."""
        return _in_membership(self.members, self.member_mappings, name)

    def validate(self) -> None:
        """Raise ConsumerGroupConfigError when the config breaks the rules."""
        if self.max_members < 1:
            raise ConsumerGroupConfigError("nats: the max number of members must be >= 1")
        for pf in self.partitioning_filters:
            if not pf.filter:
                raise ConsumerGroupConfigError(
                    "nats: partitioning filters must have a non-empty filter"
                )
            tokens = pf.filter.split(".")
            stars = tokens.count("*")
            if stars == 0 and tokens[-1] != ">":
                raise ConsumerGroupConfigError(
                    "nats: partitioning filters must have at least one * wildcard "
                    "or end with > wildcard"
                )
            if len(pf.partitioning_wildcards) > stars:
                raise ConsumerGroupConfigError(
                    "nats: the number of partitioning wildcards must not be larger than "
                    "the total number of * wildcards in the filter"
                )
            if len(set(pf.partitioning_wildcards)) != len(pf.partitioning_wildcards):
                raise ConsumerGroupConfigError("nats: partitioning wildcard indexes must be unique")
            if any(not 1 <= w <= stars for w in pf.partitioning_wildcards):
                raise ConsumerGroupConfigError(
                    "nats: partitioning wildcard indexes must be between 1 and "
                    "the number of * wildcards in the filter"
                )
        _validate_membership(self.max_members, self.members, self.member_mappings)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, in orbit.go's field order (``max_buffered_msg``: its name)."""
        out: dict[str, Any] = {
            "max_members": self.max_members,
            "partitioning_filters": [p.to_dict() for p in self.partitioning_filters],
        }
        if self.max_buffered_msgs:
            out["max_buffered_msg"] = self.max_buffered_msgs
        if self.max_buffered_bytes:
            out["max_buffered_bytes"] = self.max_buffered_bytes
        if self.members:
            out["members"] = list(self.members)
        if self.member_mappings:
            out["member_mappings"] = [m.to_dict() for m in self.member_mappings]
        return out

    def to_json(self) -> bytes:
        """The KV entry's value: the bytes orbit.go writes for this config."""
        return go_json(self.to_dict())

    @classmethod
    def from_json(
        cls, data: bytes | str | dict[str, Any], revision: int = 0
    ) -> ElasticConsumerGroupConfig:
        """Parse (and validate) a KV entry's value; ConsumerGroupConfigError when bad."""
        obj = _object(data)
        cfg = cls(
            _int(obj, "max_members", 0),
            [PartitioningFilter.from_dict(p) for p in _list(obj, "partitioning_filters")],
            _int(obj, "max_buffered_msg", 0),
            _int(obj, "max_buffered_bytes", 0),
            _strings(obj, "members"),
            [MemberMapping.from_dict(m) for m in _list(obj, "member_mappings")],
            revision,
        )
        cfg.validate()
        return cfg

    def same_shape(self, other: ElasticConsumerGroupConfig) -> bool:
        """Whether the parts a running member cannot follow a change of are equal:
        max members, buffer limits, partitioning filters."""
        return (
            self.max_members == other.max_members
            and self.max_buffered_msgs == other.max_buffered_msgs
            and self.max_buffered_bytes == other.max_buffered_bytes
            and self.partitioning_filters == other.partitioning_filters
        )
