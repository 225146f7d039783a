"""Which partitions a member consumes, and the names and subjects of a group.

The assignment is orbit.go's: the members are deduplicated, sorted, capped to
``max_members``; with ``n`` of them each gets a contiguous run of
``max_members // n`` partitions in member order, and the remainder goes round
robin from the first member. Explicit member mappings instead give each member
the partitions listed. A member's consumer filters are ``<partition>.<filter>``
(``<partition>.>`` for a mapping).
"""

from __future__ import annotations

from collections.abc import Sequence

from jsclient.jetstream.pcgroups.config import (
    ElasticConsumerGroupConfig,
    MemberMapping,
    PartitioningFilter,
    StaticConsumerGroupConfig,
)

__all__ = [
    "PRIORITY_GROUP",
    "assignment",
    "compose_group_stream_name",
    "compose_key",
    "compose_static_consumer_name",
    "elastic_partition_filters",
    "generate_partition_filters",
    "partitioning_transform_destination",
    "static_partition_filters",
    "strip_partition",
]

#: The priority group of every member's consumer (policy ``pinned_client``).
PRIORITY_GROUP = "PCG"


def compose_key(stream: str, group: str) -> str:
    """The KV key of a group's config: ``<stream>.<group>``."""
    return f"{stream}.{group}"


def compose_static_consumer_name(group: str, member: str) -> str:
    """A static member's durable consumer on the stream: ``<group>-<member>``."""
    return f"{group}-{member}"


def compose_group_stream_name(stream: str, group: str) -> str:
    """An elastic group's work-queue stream: ``<stream>-<group>``."""
    return f"{stream}-{group}"


def strip_partition(subject: str) -> str:
    """The subject without its first token (the partition number)."""
    dot = subject.find(".")
    return subject if dot < 0 else subject[dot + 1 :]


def assignment(members: Sequence[str], max_members: int) -> dict[str, list[int]]:
    """Each member's partitions under automatic assignment (members not served: absent)."""
    ms = sorted(dict.fromkeys(members))[:max_members]
    n = len(ms)
    out: dict[str, list[int]] = {}
    if n == 0:
        return out
    per = max_members // n
    full = n * per
    for i in range(max_members):
        owner = ms[(i // per) % n] if i < full else ms[(i - full) % n]
        out.setdefault(owner, []).append(i)
    return out


def generate_partition_filters(
    members: Sequence[str],
    max_members: int,
    member_mappings: Sequence[MemberMapping],
    member: str,
    filter: str,
) -> list[str]:
    """``member``'s consumer filters: ``<partition>.<filter>`` for each of its
    partitions (``<partition>.>`` under member mappings); ``[]`` when it has none."""
    if members:
        return [f"{p}.{filter}" for p in assignment(members, max_members).get(member, [])]
    out: list[str] = []
    for mm in member_mappings:
        if mm.member == member:
            out.extend(f"{p}.>" for p in mm.partitions)
    return out


def _filters_for(
    filters: Sequence[str],
    members: Sequence[str],
    max_members: int,
    mappings: Sequence[MemberMapping],
    member: str,
) -> list[str]:
    out: list[str] = []
    for f in filters or [">"]:
        out.extend(generate_partition_filters(members, max_members, mappings, member, f))
    # Under mappings every filter gives the same "<p>.>": the server takes each once.
    return list(dict.fromkeys(out))


def static_partition_filters(config: StaticConsumerGroupConfig, member: str) -> list[str]:
    """The filters of ``member``'s consumer in a static group (its config's filters, else ``>``)."""
    return _filters_for(
        config.filters, config.members, config.max_members, config.member_mappings, member
    )


def elastic_partition_filters(config: ElasticConsumerGroupConfig, member: str) -> list[str]:
    """The filters of ``member``'s consumer on an elastic group's work-queue stream."""
    return _filters_for(
        [p.filter for p in config.partitioning_filters],
        config.members,
        config.max_members,
        config.member_mappings,
        member,
    )


def partitioning_transform_destination(pf: PartitioningFilter, max_members: int) -> str:
    """The subject transform's destination that prefixes the partition number:
    ``{{Partition(N,w...)}}.`` then the filter with each ``*`` as ``{{Wildcard(i)}}``."""
    tokens = pf.filter.split(".")
    index = 1
    for i, token in enumerate(tokens):
        if token == "*":
            tokens[i] = f"{{{{Wildcard({index})}}}}"
            index += 1
    dest = ".".join(tokens)
    if not pf.partitioning_wildcards:
        return f"{{{{Partition({max_members})}}}}.{dest}"
    wildcards = ",".join(str(w) for w in pf.partitioning_wildcards)
    return f"{{{{Partition({max_members},{wildcards})}}}}.{dest}"
