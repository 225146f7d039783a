"""The ADR-15 subscribe workflow shared by ``pull_subscribe`` (ADR-13) and ``subscribe`` (push).

The order is the design's:

1. checks on the arguments alone (no request is made when one fails);
2. the stream: given, or looked up by subject (``STREAM.NAMES`` with a subject
   filter; none or several matches is an error, the caller must name one);
3. the consumer: looked up by name when one is given; an existing one is
   checked against the subscription (pull vs push, filter subject, queue group
   rules, the given config);
4. the caller makes its NATS subscription (before the consumer exists, so a
   durable push consumer's server sees the interest and can tell whether it is
   already bound);
5. the consumer is created when it did not exist; if another process created
   it in between ("already exists"), it is looked up and checked as in 3.

Every refusal is a :class:`jsclient.errors.SubscribeError` subclass with a
stable ``code``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.api import AckPolicy, ConsumerConfig, ConsumerInfo
from jsclient.jetstream.manage.names import (
    ConsumerConfigLike,
    check_consumer_name,
    check_stream_name,
    consumer_config,
)
from jsclient.protocol import commands

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context

#: Ephemeral consumers made by a subscription are removed by the server after
#: this long without interest, unless the config says otherwise (the server's
#: own default, 5 s, would remove a pull consumer between two slow fetches).
EPHEMERAL_INACTIVE_THRESHOLD = 300.0

# Fields not compared with an existing consumer's config: names, the deliver
# subject (the only field a new subscription may change), and those checked by
# dedicated rules (filter subject, deliver group).
_NOT_COMPARED = frozenset(
    {
        "name",
        "durable_name",
        "deliver_subject",
        "deliver_group",
        "filter_subject",
        "filter_subjects",
        "metadata",
        "pause_until",
    }
)
_FIELDS = tuple(ConsumerConfig.__dataclass_fields__)
# The data model's own defaults (deliver policy all, ack policy explicit, replay
# instant) cannot be told apart from values the user set, so they count as unset.
_DEFAULTS = {name: f.default for name, f in ConsumerConfig.__dataclass_fields__.items()}


def value_of(v: Any) -> Any:
    """An enum's value, or ``v`` (configs hold enums or their strings)."""
    return getattr(v, "value", v)


def user_config(config: ConsumerConfigLike | None) -> ConsumerConfig:
    return ConsumerConfig() if config is None else consumer_config(config, {})


def consumer_name(durable: str | None, cfg: ConsumerConfig) -> str | None:
    """The consumer a subscription names: ``durable=``, else the config's durable or name."""
    names = {n for n in (durable, cfg.durable_name, cfg.name) if n}
    if len(names) > 1:
        raise errors.DurableMismatchError(
            f"durable={durable!r}, durable_name={cfg.durable_name!r} and name={cfg.name!r} "
            "name different consumers; give the name once"
        )
    name = names.pop() if names else None
    if name is not None:
        check_consumer_name(name)
    return name


def check_target(subject: str | None, stream: str | None) -> None:
    """A subject or a stream is needed to find the consumer (ADR-15)."""
    if not subject and not stream:
        raise errors.SubjectRequiredError()
    if subject:
        commands.check_subject(subject)
    if stream is not None:
        check_stream_name(stream)


def check_pull_config(cfg: ConsumerConfig) -> None:
    """The ADR-15 checks that apply to a pull subscription's own config."""
    if value_of(cfg.ack_policy) in ("none", "all"):
        raise errors.PullAckPolicyError(
            f"pull subscriptions need ack policy explicit, got {value_of(cfg.ack_policy)!r} "
            "(ADR-15 makes none and all errors for pull)"
        )
    if cfg.deliver_subject:
        raise errors.PullDeliverSubjectError()
    if cfg.deliver_group:
        raise errors.PullDeliverGroupError()
    if cfg.flow_control or cfg.idle_heartbeat:
        raise errors.PullHeartbeatError()


def find_stream(js: Context, subject: str) -> str:
    """The one stream listening on ``subject`` (``STREAM.NAMES`` with a subject filter)."""
    names = list(js.stream_names(subject))
    if not names:
        raise errors.NoStreamMatchError(
            f"no stream matches subject {subject!r}; create one, or pass stream="
        )
    if len(names) > 1:
        raise errors.MultipleStreamsMatchError(
            f"streams {sorted(names)} all match subject {subject!r}; pass stream= to choose"
        )
    return str(names[0])


def lookup(js: Context, stream: str, name: str) -> ConsumerInfo | None:
    """The consumer's info, or None when it does not exist."""
    try:
        return js._consumer_info(stream, name)
    except errors.NotFoundError:
        return None


def check_existing(
    info: ConsumerInfo,
    *,
    subject: str | None,
    pull: bool,
    user: ConsumerConfig,
    queue: str | None = None,
) -> None:
    """The ADR-15 checks of an existing consumer against the subscription."""
    cfg = info.config
    where = f"consumer {info.name!r} of stream {info.stream_name!r}"
    if pull and cfg.deliver_subject:
        raise errors.PushConsumerError(
            f"{where} is a push consumer (deliver subject {cfg.deliver_subject!r}); "
            "use js.subscribe() for it"
        )
    if not pull and not cfg.deliver_subject:
        raise errors.PullConsumerError(
            f"{where} is a pull consumer; use js.pull_subscribe() for it"
        )
    filters = _filters(cfg)
    if subject and filters and filters != [subject]:
        raise errors.FilterSubjectMismatchError(
            f"subject {subject!r} does not match the filter {_show(filters)} of {where}"
        )
    if not pull:
        _check_queue_rules(info, where, queue)
    diffs = config_differences(user, cfg)
    if diffs:
        raise errors.ConsumerConfigMismatchError(
            f"{where} exists with a different configuration ({'; '.join(diffs)}); only the "
            "deliver subject can change: update the consumer, or drop those fields"
        )


def _check_queue_rules(info: ConsumerInfo, where: str, queue: str | None) -> None:
    group = info.config.deliver_group
    if queue is None:
        if group:
            raise errors.ConsumerIsQueueError(
                f"{where} was created for queue group {group!r}; subscribe with queue={group!r}"
            )
        if info.push_bound:
            raise errors.ConsumerBoundError(
                f"duplicate subscription: {where} is already bound to a subscription; "
                "use a queue group to share it"
            )
        return
    if not group:
        raise errors.ConsumerNotQueueError(
            f"{where} was created without a deliver group; it can't serve queue {queue!r}"
        )
    if group != queue:
        raise errors.QueueMismatchError(
            f"{where} was created for queue group {group!r}, not {queue!r}"
        )
    if info.config.flow_control or info.config.idle_heartbeat:
        raise errors.QueueHeartbeatError(
            f"{where} uses idle heartbeats or flow control, which a queue subscription can't use"
        )


def config_differences(user: ConsumerConfig, existing: ConsumerConfig) -> list[str]:
    """``field: given vs existing`` for each field the user set that the consumer has otherwise.

    Only fields the user set are compared (not None, not false/zero, not the
    data model's default): the server fills in defaults for the others.
    """
    diffs = []
    for name in _FIELDS:
        if name in _NOT_COMPARED:
            continue
        want = getattr(user, name)
        if not want or want == _DEFAULTS[name]:
            continue
        have = getattr(existing, name)
        if not _same(want, have):
            diffs.append(f"{name}: given {value_of(want)!r}, consumer has {value_of(have)!r}")
    return diffs


def _same(a: Any, b: Any) -> bool:
    a, b = value_of(a), value_of(b)
    if isinstance(a, datetime) or isinstance(b, datetime):
        return (
            isinstance(a, datetime)
            and isinstance(b, datetime)
            and math.isclose(a.timestamp(), b.timestamp(), abs_tol=1e-6)
        )
    if isinstance(a, float | int) and not isinstance(a, bool) and isinstance(b, float | int):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
    if isinstance(a, Sequence) and not isinstance(a, str):
        return (
            isinstance(b, Sequence)
            and not isinstance(b, str)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    return bool(a == b)


def _filters(cfg: ConsumerConfig) -> list[str]:
    if cfg.filter_subjects:
        return list(cfg.filter_subjects)
    return [cfg.filter_subject] if cfg.filter_subject else []


def _show(filters: list[str]) -> str:
    return repr(filters[0]) if len(filters) == 1 else repr(filters)


def creation_config(
    user: ConsumerConfig, *, name: str | None, subject: str | None, **overrides: Any
) -> ConsumerConfig:
    """The config to create a subscription's consumer with (ADR-15 "Creating the JS Consumer").

    The filter subject is the subscription's subject (unless the config filters
    already, which must then agree), the ack policy explicit unless given, and
    an ephemeral consumer gets an inactivity threshold.
    """
    fields: dict[str, Any] = {}
    if name is not None and not user.name:
        fields["durable_name"] = name
    filters = _filters(user)
    if subject:
        if filters and filters != [subject]:
            raise errors.FilterSubjectMismatchError(
                f"subject {subject!r} does not match the config's filter {_show(filters)}"
            )
        if not filters:
            fields["filter_subject"] = subject
    if user.ack_policy is None:
        fields["ack_policy"] = AckPolicy.EXPLICIT
    if name is None and user.inactive_threshold is None:
        fields["inactive_threshold"] = EPHEMERAL_INACTIVE_THRESHOLD
    fields.update(overrides)
    return user.evolve(**fields)


def create_or_bind(
    js: Context,
    stream: str,
    cfg: ConsumerConfig,
    *,
    subject: str | None,
    pull: bool,
    user: ConsumerConfig,
    queue: str | None = None,
) -> tuple[ConsumerInfo, bool]:
    """Create the consumer; ``(info, True)``, or ``(info, False)`` when it existed already.

    "Already exists" means another subscriber created it since the lookup: it
    is looked up and checked like any existing consumer.
    """
    try:
        consumer = js._upsert_consumer(stream, cfg, {}, "create")
    except errors.ConsumerAlreadyExistsError:
        name = cfg.name or cfg.durable_name
        info = lookup(js, stream, name) if name else None
        if info is None:
            raise
        check_existing(info, subject=subject, pull=pull, user=user, queue=queue)
        return info, False
    return consumer.cached_info, True
