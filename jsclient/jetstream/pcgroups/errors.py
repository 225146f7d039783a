"""The errors of partitioned consumer groups; each is a :class:`jsclient.errors.JetStreamError`."""

from __future__ import annotations

from jsclient import errors

__all__ = [
    "ConsumerGroupConfigError",
    "ConsumerGroupError",
    "ConsumerGroupExistsError",
    "ConsumerGroupNotFoundError",
    "GroupConfigChangedError",
    "MemberNotInGroupError",
]


class ConsumerGroupError(errors.JetStreamError):
    """Base of every consumer-group error."""

    default_message = "nats: consumer group error"


class ConsumerGroupConfigError(ConsumerGroupError, ValueError):
    """A group config that breaks the rules: no partitions, bad wildcards or mappings,
    members and mappings both, a JSON value that is not a group config."""

    default_message = "nats: invalid consumer group config"


class ConsumerGroupNotFoundError(ConsumerGroupError):
    """The group's config entry (or its bucket, or its stream) does not exist."""

    default_message = "nats: consumer group not found"


class ConsumerGroupExistsError(ConsumerGroupError):
    """A group of that name exists with a config other than the one asked for."""

    default_message = "nats: consumer group exists with another config"


class MemberNotInGroupError(ConsumerGroupError):
    """A static group's member that its config does not name."""

    default_message = "nats: member is not in the consumer group"


class GroupConfigChangedError(ConsumerGroupError):
    """A running member saw a change of the group's config it cannot follow (it ended)."""

    default_message = "nats: consumer group config changed"
