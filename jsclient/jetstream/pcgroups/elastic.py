"""Elastic partitioned consumer groups: a membership that may change while members run.

Creating the group makes a work-queue stream ``<stream>-<group>`` that sources
the original stream through subject transforms putting the partition number
first (``{{Partition(N,w...)}}.<filter>``). Each member's consumer on it is
named after the member, filtered to its partitions, in the ``PCG`` priority
group (``pinned_client``) and removed by the server after ``ack_wait`` of
inactivity. The config (bucket ``elastic-consumer-groups``, key
``<stream>.<group>``) changes by compare-and-set; running members watch it and,
when their partitions move, the pinned instance deletes and recreates its
consumer (the others back off 400-500 ms first), so that newly assigned
partitions are consumed from their first unacknowledged message.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from jsclient import errors
from jsclient._threads import log
from jsclient.api import (
    AckPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StreamConfig,
    StreamSource,
    SubjectTransform,
)
from jsclient.jetstream.pcgroups._common import (
    group_names,
    open_bucket,
    open_or_create_bucket,
    read_entry,
    require_names,
)
from jsclient.jetstream.pcgroups._member import (
    ConsumerGroupContext,
    MessageHandler,
    member_template,
)
from jsclient.jetstream.pcgroups.config import (
    ELASTIC_BUCKET,
    ElasticConsumerGroupConfig,
    MemberMapping,
    PartitioningFilter,
)
from jsclient.jetstream.pcgroups.errors import (
    ConsumerGroupConfigError,
    ConsumerGroupError,
    ConsumerGroupExistsError,
    ConsumerGroupNotFoundError,
    GroupConfigChangedError,
)
from jsclient.jetstream.pcgroups.partitions import (
    PRIORITY_GROUP,
    compose_group_stream_name,
    compose_key,
    elastic_partition_filters,
    partitioning_transform_destination,
)

if TYPE_CHECKING:
    from jsclient.api import ConsumerConfig
    from jsclient.jetstream.context import JetStream
    from jsclient.jetstream.kv import KeyValue, KeyValueEntry
    from jsclient.jetstream.manage.stream import Stream

__all__ = [
    "ElasticConsumeContext",
    "add_members",
    "consume_elastic",
    "create_elastic",
    "delete_elastic",
    "delete_member_mappings",
    "delete_members",
    "get_elastic_config",
    "is_in_membership_and_active",
    "list_elastic",
    "list_elastic_active_members",
    "set_member_mappings",
    "step_down_elastic",
]

#: JSConsumerWQConsumerNotUniqueErr: members disagree for a moment while a change spreads.
_WQ_NOT_UNIQUE = 10100
_CAS_TRIES = 20


def _config_of(kv: KeyValue, stream: str, group: str) -> ElasticConsumerGroupConfig:
    require_names(stream, group)
    entry = read_entry(kv, compose_key(stream, group))
    return ElasticConsumerGroupConfig.from_json(entry.value, entry.revision)


def get_elastic_config(js: JetStream, stream: str, group: str) -> ElasticConsumerGroupConfig:
    """The elastic group's config (``revision``: its KV revision);
    ConsumerGroupNotFoundError when there is none."""
    return _config_of(open_bucket(js, ELASTIC_BUCKET), stream, group)


def _group_stream_config(
    stream: str, group: str, config: ElasticConsumerGroupConfig, replicas: int, storage: object
) -> StreamConfig:
    pfs = config.partitioning_filters or [PartitioningFilter(">", [])]
    transforms = [
        SubjectTransform(
            src=pf.filter, dest=partitioning_transform_destination(pf, config.max_members)
        )
        for pf in pfs
    ]
    return StreamConfig(
        name=compose_group_stream_name(stream, group),
        retention=RetentionPolicy.WORK_QUEUE,
        num_replicas=replicas,
        storage=storage,  # type: ignore[arg-type]
        max_msgs=config.max_buffered_msgs or -1,
        max_bytes=config.max_buffered_bytes or -1,
        discard=DiscardPolicy.NEW,
        sources=[StreamSource(name=stream, subject_transforms=transforms)],
        allow_direct=True,
    )


def _limit(value: int | None) -> int:
    """A buffer limit, with "none" (0, -1, None: each client writes its own) as -1."""
    return -1 if value is None or value <= 0 else value


def create_elastic(
    js: JetStream,
    stream: str,
    group: str,
    max_members: int,
    filter: str | Sequence[PartitioningFilter],
    partitioning_wildcards: Sequence[int] | None = None,
    *,
    max_buffered_msgs: int | None = None,
    max_buffered_bytes: int | None = None,
) -> ElasticConsumerGroupConfig:
    """Create an elastic group on ``stream`` (or return the existing one when it has
    this very shape) and its work-queue stream ``<stream>-<group>``.

    ``filter`` selects the subjects; ``partitioning_wildcards`` are the 1-based
    indexes of its ``*`` wildcards that make the partitioning key (none: the
    whole subject). Several filters: pass a list of :class:`PartitioningFilter`
    as ``filter``. ``max_buffered_msgs`` / ``max_buffered_bytes`` bound the
    work-queue stream (new messages wait in the source when it is full). The
    group starts without members: see :func:`add_members`.
    ConsumerGroupExistsError when it exists with another shape.
    """
    require_names(stream, group)
    if isinstance(filter, str):
        pfs = [PartitioningFilter(filter, list(partitioning_wildcards or []))]
    else:
        if partitioning_wildcards:
            raise TypeError("give partitioning_wildcards in each PartitioningFilter")
        pfs = list(filter)
    config = ElasticConsumerGroupConfig(
        max_members, pfs, int(max_buffered_msgs or 0), int(max_buffered_bytes or 0)
    )
    config.validate()
    info = js.stream(stream).info()
    replicas = info.config.num_replicas or 1
    kv = open_or_create_bucket(js, ELASTIC_BUCKET, replicas)
    key = compose_key(stream, group)
    try:
        config.revision = kv.create(key, config.to_json())
    except errors.KeyExistsError:
        config = _config_of(kv, stream, group)
        if (
            config.max_members != max_members
            or config.partitioning_filters != pfs
            or _limit(config.max_buffered_msgs) != _limit(max_buffered_msgs)
            or _limit(config.max_buffered_bytes) != _limit(max_buffered_bytes)
        ):
            raise ConsumerGroupExistsError(
                f"nats: the existing elastic consumer group {key!r} has another shape; "
                "delete it and create a new one"
            ) from None
    cfg = _group_stream_config(stream, group, config, replicas, info.config.storage)
    try:
        js.create_stream(cfg)
    except errors.APIError as exc:
        raise ConsumerGroupError(
            f"nats: cannot create the elastic consumer group's stream: {exc}"
        ) from exc
    return config


def delete_elastic(js: JetStream, stream: str, group: str) -> None:
    """Delete the group's config (running members end) and its work-queue stream."""
    require_names(stream, group)
    kv = open_bucket(js, ELASTIC_BUCKET)
    try:
        kv.delete(compose_key(stream, group))
    except errors.KeyNotFoundError:
        pass
    try:
        js.delete_stream(compose_group_stream_name(stream, group))
    except errors.NotFoundError:
        pass


def list_elastic(js: JetStream, stream: str) -> list[str]:
    """The names of the elastic groups on ``stream``."""
    return group_names(js, ELASTIC_BUCKET, stream)


def _change(
    js: JetStream, stream: str, group: str, edit: Callable[[ElasticConsumerGroupConfig], None]
) -> ElasticConsumerGroupConfig:
    """Apply ``edit`` to the config and write it back only over the revision read;
    read and apply again when another writer came first."""
    require_names(stream, group)
    kv = open_bucket(js, ELASTIC_BUCKET)
    key = compose_key(stream, group)
    for _ in range(_CAS_TRIES):
        config = _config_of(kv, stream, group)
        edit(config)
        config.validate()
        try:
            config.revision = kv.update(key, config.to_json(), last=config.revision)
            return config
        except errors.KeyWrongLastSequenceError:
            continue
    raise ConsumerGroupError(f"nats: consumer group {key!r} kept changing; try again")


def add_members(js: JetStream, stream: str, group: str, members: Sequence[str]) -> list[str]:
    """Add members (those present stay); returns the new membership.

    ConsumerGroupConfigError when the group uses member mappings."""
    if not members:
        raise ConsumerGroupConfigError("nats: no member names")

    def edit(config: ElasticConsumerGroupConfig) -> None:
        if config.member_mappings:
            raise ConsumerGroupConfigError(
                "nats: can't add members to an elastic consumer group that uses member mappings"
            )
        config.members = list(dict.fromkeys([*config.members, *(m for m in members if m)]))

    return _change(js, stream, group, edit).members


def delete_members(js: JetStream, stream: str, group: str, members: Sequence[str]) -> list[str]:
    """Drop members; returns the new membership (their partitions move to the others)."""
    if not members:
        raise ConsumerGroupConfigError("nats: no member names")
    drop = set(members)

    def edit(config: ElasticConsumerGroupConfig) -> None:
        if config.member_mappings:
            raise ConsumerGroupConfigError(
                "nats: can't drop members from an elastic consumer group that uses member mappings"
            )
        config.members = [m for m in config.members if m not in drop]

    return _change(js, stream, group, edit).members


def set_member_mappings(
    js: JetStream, stream: str, group: str, member_mappings: Sequence[MemberMapping]
) -> None:
    """Assign partitions explicitly (replacing the members list): every partition
    exactly once."""
    if not member_mappings:
        raise ConsumerGroupConfigError("nats: no member mappings")

    def edit(config: ElasticConsumerGroupConfig) -> None:
        config.members = []
        config.member_mappings = list(member_mappings)

    _change(js, stream, group, edit)


def delete_member_mappings(js: JetStream, stream: str, group: str) -> None:
    """Remove the member mappings (the group then has no members)."""

    def edit(config: ElasticConsumerGroupConfig) -> None:
        config.member_mappings = []

    _change(js, stream, group, edit)


def _group_stream(js: JetStream, stream: str, group: str) -> Stream:
    try:
        return js.stream(compose_group_stream_name(stream, group))
    except errors.NotFoundError:
        raise ConsumerGroupNotFoundError(
            f"nats: the stream of elastic consumer group {group!r} does not exist"
        ) from None


def _consumer_names(js: JetStream, stream: str, group: str) -> set[str]:
    return set(_group_stream(js, stream, group).consumer_names())


def list_elastic_active_members(js: JetStream, stream: str, group: str) -> list[str]:
    """The members that have a consumer now (one goes after ``ack_wait`` unused)."""
    config = get_elastic_config(js, stream, group)
    names = config.members or [m.member for m in config.member_mappings]
    if not names:
        return []
    present = _consumer_names(js, stream, group)
    return [m for m in names if m in present]


def is_in_membership_and_active(
    js: JetStream, stream: str, group: str, member: str
) -> tuple[bool, bool]:
    """``(in the membership, has a consumer now)`` for ``member``."""
    config = get_elastic_config(js, stream, group)
    return config.is_in_membership(member), member in _consumer_names(js, stream, group)


def step_down_elastic(js: JetStream, stream: str, group: str, member: str) -> None:
    """Make the instance of ``member`` now pinned step down (another one takes over)."""
    require_names(stream, group)
    js.unpin_consumer(compose_group_stream_name(stream, group), member, PRIORITY_GROUP)


class ElasticConsumeContext(ConsumerGroupContext):
    """A member of an elastic group, consuming while in the membership;
    see :class:`ConsumerGroupContext`."""

    _kind = "elastic"

    def __init__(
        self,
        js: JetStream,
        kv: KeyValue,
        stream: str,
        group: str,
        member: str,
        callback: MessageHandler,
        template: ConsumerConfig,
        config: ElasticConsumerGroupConfig,
    ) -> None:
        self.config = config
        self._group_stream = compose_group_stream_name(stream, group)
        super().__init__(
            js, kv, compose_key(stream, group), stream, group, member, callback, template
        )

    def _join(self) -> None:
        filters = elastic_partition_filters(self.config, self.member)
        if not filters:
            return  # not (or no more) in the membership
        cfg = self._consumer_config(name=self.member, durable=False, filters=filters)
        gs = self._group_stream
        try:
            try:
                consumer = self._js.create_consumer(gs, cfg)
            except errors.ConsumerAlreadyExistsError:
                # Made for another view of the membership: replace it (it would
                # otherwise resume past messages of partitions new to us).
                try:
                    self._js.delete_consumer(gs, self.member)
                except errors.NotFoundError:
                    pass
                consumer = self._js.create_consumer(gs, cfg)
        except errors.APIError as exc:
            if exc.err_code != _WQ_NOT_UNIQUE:  # that one passes as the change spreads
                log.warning("jsclient: %r: creating the member's consumer: %s", self, exc)
            return
        self._start_consuming(consumer)

    def _is_pinned(self) -> bool:
        consumer, pin = self._consumer, self._pin_id
        if consumer is None or pin is None:
            return False
        try:
            info = consumer.info()
        except errors.Error:
            return False
        return any(
            pg.group == PRIORITY_GROUP and pg.pinned_client_id == pin
            for pg in getattr(info, "priority_groups", None) or []
        )

    def _membership_changed(self) -> None:
        pinned = False
        if self._consumer is not None:
            pinned = self._is_pinned()
            self._stop_consuming()
        if pinned:  # only the pinned instance deletes: the others would flap
            try:
                self._js.delete_consumer(self._group_stream, self.member)
            except errors.NotFoundError:
                pass
            except errors.Error as exc:
                log.warning("jsclient: %r: deleting the member's consumer: %s", self, exc)
        elif self._sleep(random.uniform(0.4, 0.5)):
            return  # stopped meanwhile
        self._join()

    def _on_config(self, entry: KeyValueEntry) -> bool:
        try:
            new = ElasticConsumerGroupConfig.from_json(entry.value, entry.revision)
        except ConsumerGroupConfigError as exc:
            raise GroupConfigChangedError(
                f"nats: elastic consumer group {self._key!r} config is not valid: {exc}"
            ) from exc
        if not new.same_shape(self.config):
            raise GroupConfigChangedError(
                f"nats: elastic consumer group {self._key!r}: max members, buffer limits "
                "or partitioning filters changed; the member ends"
            )
        same = (
            new.members == self.config.members
            and new.member_mappings == self.config.member_mappings
        )
        self.config.revision = new.revision
        if same and self._consumer is not None and not self._consume_ended():
            return True
        self.config.members = new.members
        self.config.member_mappings = new.member_mappings
        self._membership_changed()
        return True

    def _on_tick(self) -> None:
        if self._consume_ended():
            self._stop_consuming()
        if self._consumer is None and self.config.is_in_membership(self.member):
            self._join()


def consume_elastic(
    js: JetStream,
    stream: str,
    group: str,
    member: str,
    callback: MessageHandler,
    config: ConsumerConfig | None = None,
) -> ElasticConsumeContext:
    """Consume as ``member`` of an elastic group: ``callback(msg)`` for each message of
    its partitions, on a library thread, ``msg.subject`` without the partition token.

    The member need not be in the membership yet: it starts consuming when it
    is added and stops when it is dropped. The callback must ack each message
    (the group's stream is a work queue; ``ack_policy`` must be explicit).
    ``config`` is a template of the member's consumer (``ack_wait`` in seconds,
    default 5, also sets failover times); the group sets names, filters,
    pinning and the inactivity threshold.
    """
    require_names(stream, group)
    template = member_template(config)
    if AckPolicy(template.ack_policy or AckPolicy.EXPLICIT) != AckPolicy.EXPLICIT:
        raise ConsumerGroupConfigError(
            "nats: the ack policy when consuming from elastic consumer groups must be explicit"
        )
    template.inactive_threshold = template.ack_wait
    _group_stream(js, stream, group)  # ConsumerGroupNotFoundError first
    kv = open_bucket(js, ELASTIC_BUCKET)
    cfg = _config_of(kv, stream, group)
    ctx = ElasticConsumeContext(js, kv, stream, group, member, callback, template, cfg)
    if cfg.is_in_membership(member):
        try:
            ctx._join()
        except BaseException:
            ctx.stop()
            raise
    ctx._start()
    return ctx
