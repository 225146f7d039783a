"""Static partitioned consumer groups: a fixed membership on a partitioned stream.

The stream's subjects already start with the partition number (a subject
transform with ``{{Partition(N,...)}}`` put it there on ingest). Each member
has a durable consumer ``<group>-<member>`` on that stream, filtered to its
partitions, in the ``PCG`` priority group with policy ``pinned_client``: run a
member in several processes and one of them consumes at a time. The config
(bucket ``static-consumer-groups``, key ``<stream>.<group>``) never changes; a
running member ends when it does, or when the group is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from jsclient import errors
from jsclient._threads import log
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
    STATIC_BUCKET,
    MemberMapping,
    StaticConsumerGroupConfig,
)
from jsclient.jetstream.pcgroups.errors import (
    ConsumerGroupConfigError,
    ConsumerGroupExistsError,
    GroupConfigChangedError,
    MemberNotInGroupError,
)
from jsclient.jetstream.pcgroups.partitions import (
    PRIORITY_GROUP,
    compose_key,
    compose_static_consumer_name,
    static_partition_filters,
)

if TYPE_CHECKING:
    from jsclient.api import ConsumerConfig
    from jsclient.jetstream.context import JetStream
    from jsclient.jetstream.kv import KeyValue, KeyValueEntry

__all__ = [
    "StaticConsumeContext",
    "consume_static",
    "create_static",
    "delete_static",
    "get_static_config",
    "list_static",
    "list_static_active_members",
    "step_down_static",
]


def _config_of(kv: KeyValue, stream: str, group: str) -> StaticConsumerGroupConfig:
    require_names(stream, group)
    entry = read_entry(kv, compose_key(stream, group))
    return StaticConsumerGroupConfig.from_json(entry.value)


def get_static_config(js: JetStream, stream: str, group: str) -> StaticConsumerGroupConfig:
    """The static group's config; ConsumerGroupNotFoundError when there is none."""
    return _config_of(open_bucket(js, STATIC_BUCKET), stream, group)


def create_static(
    js: JetStream,
    stream: str,
    group: str,
    max_members: int,
    filter: str | Sequence[str] | None = None,
    *,
    members: Sequence[str] | None = None,
    member_mappings: Sequence[MemberMapping] | None = None,
) -> StaticConsumerGroupConfig:
    """Create a static group on ``stream`` (whose subjects start with the partition
    number), or return the existing one when it has this very config.

    ``filter``: the subject filter(s) after the partition token (default all).
    Give ``members`` (partitions assigned automatically) or ``member_mappings``.
    ConsumerGroupExistsError when the group exists with another config;
    ConsumerGroupConfigError for a config that breaks the rules.
    """
    require_names(stream, group)
    filters = [] if filter is None else [filter] if isinstance(filter, str) else list(filter)
    config = StaticConsumerGroupConfig(
        max_members, filters, list(members or []), list(member_mappings or [])
    )
    config.validate()
    info = js.stream(stream).info()
    kv = open_or_create_bucket(js, STATIC_BUCKET, info.config.num_replicas or 1)
    key = compose_key(stream, group)
    try:
        kv.create(key, config.to_json())
        return config
    except errors.KeyExistsError:
        pass
    existing = _config_of(kv, stream, group)
    if existing != config:
        raise ConsumerGroupExistsError(
            f"nats: the existing static consumer group {key!r} has another config"
        )
    return existing


def delete_static(js: JetStream, stream: str, group: str) -> None:
    """Delete the group's config and its members' consumers (``<group>-*``)."""
    require_names(stream, group)
    s = js.stream(stream)
    kv = open_bucket(js, STATIC_BUCKET)
    try:
        kv.delete(compose_key(stream, group))
    except errors.KeyNotFoundError:
        pass
    for name in list(s.consumer_names()):
        if name.startswith(group + "-"):
            try:
                s.delete_consumer(name)
            except errors.NotFoundError:
                pass


def list_static(js: JetStream, stream: str) -> list[str]:
    """The names of the static groups on ``stream``."""
    return group_names(js, STATIC_BUCKET, stream)


def list_static_active_members(js: JetStream, stream: str, group: str) -> list[str]:
    """The members whose consumer has a pull waiting now (an instance is consuming)."""
    config = get_static_config(js, stream, group)
    names = config.members or [m.member for m in config.member_mappings]
    by_consumer = {compose_static_consumer_name(group, m): m for m in names}
    out: list[str] = []
    for info in js.stream(stream).consumers():
        member = by_consumer.get(info.name)
        if member is not None and info.num_waiting:
            out.append(member)
    return out


def step_down_static(js: JetStream, stream: str, group: str, member: str) -> None:
    """Make the instance of ``member`` now pinned step down (another one takes over)."""
    require_names(stream, group)
    js.unpin_consumer(stream, compose_static_consumer_name(group, member), PRIORITY_GROUP)


class StaticConsumeContext(ConsumerGroupContext):
    """A member of a static group, consuming; see :class:`ConsumerGroupContext`."""

    _kind = "static"

    def __init__(
        self,
        js: JetStream,
        kv: KeyValue,
        stream: str,
        group: str,
        member: str,
        callback: MessageHandler,
        template: ConsumerConfig,
        config: StaticConsumerGroupConfig,
    ) -> None:
        self.config = config
        super().__init__(
            js, kv, compose_key(stream, group), stream, group, member, callback, template
        )

    @property
    def _consumer_name(self) -> str:
        return compose_static_consumer_name(self.group, self.member)

    def _join(self) -> None:
        filters = static_partition_filters(self.config, self.member)
        if not filters:
            return
        cfg = self._consumer_config(name=self._consumer_name, durable=True, filters=filters)
        self._start_consuming(self._js.create_consumer(self.stream, cfg))

    def _delete_consumer(self) -> None:
        try:
            self._js.delete_consumer(self.stream, self._consumer_name)
        except errors.NotFoundError:
            pass
        except errors.Error as exc:
            log.warning("jsclient: %r: deleting the member's consumer: %s", self, exc)

    def _on_config(self, entry: KeyValueEntry) -> bool:
        try:
            new = StaticConsumerGroupConfig.from_json(entry.value)
        except ConsumerGroupConfigError as exc:
            self._stop_consuming()
            self._delete_consumer()
            raise GroupConfigChangedError(
                f"nats: static consumer group {self._key!r} config is not valid: {exc}"
            ) from exc
        if new != self.config:
            self._stop_consuming()
            self._delete_consumer()
            raise GroupConfigChangedError(
                f"nats: static consumer group {self._key!r} config changed, the member ends"
            )
        return True

    def _on_deleted(self) -> None:
        self._stop_consuming()
        self._delete_consumer()

    def _on_tick(self) -> None:
        if self._consume_ended():  # its consumer went away: make it again
            self._stop_consuming()
            self._join()


def consume_static(
    js: JetStream,
    stream: str,
    group: str,
    member: str,
    callback: MessageHandler,
    config: ConsumerConfig | None = None,
) -> StaticConsumeContext:
    """Consume as ``member`` of a static group: ``callback(msg)`` for each message of
    its partitions, on a library thread, ``msg.subject`` without the partition token.

    ``config`` is a template of the member's consumer (``ack_wait`` in seconds,
    default 5; the group sets names, filters and pinning). MemberNotInGroupError
    when the config does not name ``member``; ConsumerGroupNotFoundError without
    the group.
    """
    require_names(stream, group)
    js.stream(stream)  # StreamNotFoundError first
    kv = open_bucket(js, STATIC_BUCKET)
    cfg = _config_of(kv, stream, group)
    if not cfg.is_in_membership(member):
        raise MemberNotInGroupError(
            f"nats: {member!r} is not a member of static consumer group {group!r}"
        )
    ctx = StaticConsumeContext(
        js, kv, stream, group, member, callback, member_template(config), cfg
    )
    try:
        ctx._join()
    except BaseException:
        ctx.stop()
        raise
    ctx._start()
    return ctx
