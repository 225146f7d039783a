"""Partitioned consumer groups: static and elastic, wire-compatible with orbit.go's ``pcgroups``.

A group splits what a stream holds into ``max_members`` partitions by a key
taken from the subject, and gives each member some of them: members consume
side by side while the messages of one key are still handled one at a time,
in order. Run a member in several processes for failover: its consumer is in
the ``PCG`` priority group with policy ``pinned_client``, so one instance
consumes at a time.

- *Static* (:mod:`.static`): the stream's subjects already start with the
  partition number; the membership is fixed when the group is made.
- *Elastic* (:mod:`.elastic`): the group makes a work-queue stream
  ``<stream>-<group>`` that sources the stream and adds the partition number;
  members may be added and dropped while the others run.

Configs are JSON in KV buckets ``static-consumer-groups`` and
``elastic-consumer-groups`` under ``<stream>.<group>`` (:mod:`.config`), the
assignment of partitions is in :mod:`.partitions`, a running member is a
:class:`ConsumerGroupContext` (``_member.py``). Go members and members of
other clients that follow orbit.go share a group with jsclient's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from jsclient.jetstream.pcgroups._member import (
    DEFAULT_ACK_WAIT,
    ConsumerGroupContext,
    MessageHandler,
)
from jsclient.jetstream.pcgroups.config import (
    ELASTIC_BUCKET,
    STATIC_BUCKET,
    ElasticConsumerGroupConfig,
    MemberMapping,
    PartitioningFilter,
    StaticConsumerGroupConfig,
)
from jsclient.jetstream.pcgroups.elastic import (
    ElasticConsumeContext,
    add_members,
    consume_elastic,
    create_elastic,
    delete_elastic,
    delete_member_mappings,
    delete_members,
    get_elastic_config,
    is_in_membership_and_active,
    list_elastic,
    list_elastic_active_members,
    set_member_mappings,
    step_down_elastic,
)
from jsclient.jetstream.pcgroups.errors import (
    ConsumerGroupConfigError,
    ConsumerGroupError,
    ConsumerGroupExistsError,
    ConsumerGroupNotFoundError,
    GroupConfigChangedError,
    MemberNotInGroupError,
)
from jsclient.jetstream.pcgroups.partitions import (
    PRIORITY_GROUP,
    assignment,
    compose_group_stream_name,
    compose_key,
    compose_static_consumer_name,
    elastic_partition_filters,
    generate_partition_filters,
    partitioning_transform_destination,
    static_partition_filters,
    strip_partition,
)
from jsclient.jetstream.pcgroups.static import (
    StaticConsumeContext,
    consume_static,
    create_static,
    delete_static,
    get_static_config,
    list_static,
    list_static_active_members,
    step_down_static,
)

if TYPE_CHECKING:
    from jsclient.jetstream.context import JetStream

__all__ = [
    "DEFAULT_ACK_WAIT",
    "ELASTIC_BUCKET",
    "PRIORITY_GROUP",
    "STATIC_BUCKET",
    "ConsumerGroupConfigError",
    "ConsumerGroupContext",
    "ConsumerGroupError",
    "ConsumerGroupExistsError",
    "ConsumerGroupNotFoundError",
    "ElasticConsumeContext",
    "ElasticConsumerGroupConfig",
    "GroupConfigChangedError",
    "MemberMapping",
    "MemberNotInGroupError",
    "MessageHandler",
    "PartitioningFilter",
    "StaticConsumeContext",
    "StaticConsumerGroupConfig",
    "add_members",
    "assignment",
    "compose_group_stream_name",
    "compose_key",
    "compose_static_consumer_name",
    "consume_elastic",
    "consume_static",
    "create_elastic",
    "create_static",
    "delete_elastic",
    "delete_member_mappings",
    "delete_members",
    "delete_static",
    "elastic_partition_filters",
    "generate_partition_filters",
    "get_elastic_config",
    "get_static_config",
    "is_in_membership_and_active",
    "list_active_members",
    "list_elastic",
    "list_elastic_active_members",
    "list_static",
    "list_static_active_members",
    "partitioning_transform_destination",
    "set_member_mappings",
    "static_partition_filters",
    "step_down_elastic",
    "step_down_static",
    "strip_partition",
]


def list_active_members(
    js: JetStream,
    stream: str,
    group: str,
    kind: Literal["elastic", "static"] | None = None,
) -> list[str]:
    """The group's members that are consuming now.

    ``kind`` picks the group's kind; by default the elastic group of that name
    when there is one, else the static one. See
    :func:`list_elastic_active_members` and :func:`list_static_active_members`.
    """
    if kind == "static":
        return list_static_active_members(js, stream, group)
    if kind == "elastic":
        return list_elastic_active_members(js, stream, group)
    if kind is not None:
        raise ValueError(f"kind must be 'elastic' or 'static', not {kind!r}")
    try:
        get_elastic_config(js, stream, group)
    except ConsumerGroupNotFoundError:
        return list_static_active_members(js, stream, group)
    return list_elastic_active_members(js, stream, group)
