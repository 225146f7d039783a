"""``js.subscribe(...)``: the ADR-15 subscribe workflow that makes a
:class:`~jsclient.jetstream.subscribe.push.JsSubscription` (plain, queue group, or ordered)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.api import AckPolicy, ConsumerConfig, DeliverPolicy
from jsclient.jetstream.subscribe import workflow as wf
from jsclient.msg import Msg
from jsclient.subscription import Subscription

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.manage.names import ConsumerConfigLike
from jsclient.jetstream.subscribe.push import (
    DEFAULT_HEARTBEAT,
    DELETE_POLICIES,
    ORDERED_ACK_WAIT,
    JsSubscription,
    _State,
)

__all__ = ["subscribe"]


#: Idle heartbeat used when flow control or an ordered consumer needs one and none is given.
#: Ordered consumers: ack wait far beyond any use (acks are never sent), as other clients.


def subscribe(
    js: Context,
    subject: str | None,
    queue: str | None = None,
    *,
    cb: Callable[[Msg], Any] | None = None,
    durable: str | None = None,
    stream: str | None = None,
    consumer: str | None = None,
    config: ConsumerConfigLike | None = None,
    manual_ack: bool = False,
    ordered_consumer: bool = False,
    idle_heartbeat: float | None = None,
    flow_control: bool = False,
    deliver_policy: DeliverPolicy | str | None = None,
    pending_msgs_limit: int = 65536,
    pending_bytes_limit: int = 64 * 1024 * 1024,
    heartbeat_alarm_factor: float = 3.0,
    delete_consumer: str = "if_created",
    error_cb: Callable[[BaseException], Any] | None = None,
) -> JsSubscription:
    """A push subscription (ADR-15) with automatic status management.

    Without ``cb`` read it with ``next_msg``/iteration; with ``cb`` the
    callback runs on a library thread and the message is acked after it
    returns (unless ``manual_ack``). The stream is looked up by ``subject``
    unless given; ``consumer`` binds to an existing consumer, ``durable``
    uses or creates one; a ``queue`` without either uses the queue name as
    durable. ``ordered_consumer`` reads the stream in order through an
    ephemeral consumer that is remade on gaps. Heartbeat alarms, gaps and
    error statuses of a callback subscription go to ``error_cb`` (default:
    the connection's). See :mod:`jsclient.jetstream.subscribe.push`.
    """
    if delete_consumer not in DELETE_POLICIES:
        raise errors.DeleteConsumerPolicyError(
            f"delete_consumer must be one of {DELETE_POLICIES}, got {delete_consumer!r}"
        )
    if not heartbeat_alarm_factor > 0:
        raise ValueError(f"heartbeat_alarm_factor must be positive, got {heartbeat_alarm_factor!r}")
    user = wf.user_config(config)
    changes: dict[str, Any] = {}
    if idle_heartbeat is not None:
        changes["idle_heartbeat"] = float(idle_heartbeat)
    if flow_control:
        changes["flow_control"] = True
    if deliver_policy is not None:
        changes["deliver_policy"] = DeliverPolicy(wf.value_of(deliver_policy))
    if changes:
        user = user.evolve(**changes)
    if user.deliver_group:
        if queue is not None and queue != user.deliver_group:
            raise errors.QueueMismatchError(
                f"queue {queue!r} and the config's deliver_group {user.deliver_group!r} differ"
            )
        queue = user.deliver_group
    if ordered_consumer:
        _check_ordered(queue, durable, consumer, manual_ack, user)
    if queue is not None and (user.idle_heartbeat or user.flow_control):
        raise errors.QueueHeartbeatError()
    if user.max_waiting:
        raise errors.SubscribeError(
            "max_waiting is for pull consumers; a push subscription can't set it"
        )
    wf.check_target(subject, stream)
    if consumer is not None:
        if durable is not None and durable != consumer:
            raise errors.DurableMismatchError(
                f"consumer={consumer!r} and durable={durable!r} name different consumers"
            )
        name: str | None = wf.consumer_name(consumer, user)
    else:
        # ADR-15: a queue subscription without consumer or durable uses the queue
        # name as durable, so that its members share one consumer.
        name = wf.consumer_name(durable or (queue if not user.durable_name else None), user)
    if stream is None:
        assert subject
        stream = wf.find_stream(js, subject)
    client = js._client
    common: dict[str, Any] = {
        "js": js,
        "stream": stream,
        "delete_consumer": delete_consumer,
        "manual_ack": manual_ack,
        "alarm_factor": heartbeat_alarm_factor,
        "error_cb": error_cb,
    }
    limits = (pending_msgs_limit, pending_bytes_limit)
    if ordered_consumer:
        return _subscribe_ordered(js, subject, cb, user, limits, common)
    info = wf.lookup(js, stream, name) if name else None
    if info is None and consumer is not None:
        raise errors.ConsumerRequiredError(
            f"consumer {consumer!r} does not exist on stream {stream!r}; create it first, "
            "or pass durable= to have it created"
        )
    if info is not None:
        wf.check_existing(info, subject=subject, pull=False, user=user, queue=queue)
        sub = _js_sub(client, str(info.config.deliver_subject), queue, limits)
        sub._bind(_State(info=info, created=False, track_gaps=queue is None, **common), cb)
        return sub
    # To be created: the NATS subscription comes first (ADR-15), on the deliver subject.
    deliver = user.deliver_subject or client.new_inbox()
    overrides: dict[str, Any] = {"deliver_subject": deliver}
    if queue is not None:
        overrides["deliver_group"] = queue
    if user.idle_heartbeat is None and user.flow_control:
        overrides["idle_heartbeat"] = DEFAULT_HEARTBEAT  # the server requires one with FC
    cfg = wf.creation_config(user, name=name, subject=subject, **overrides)
    sub = _js_sub(client, deliver, queue, limits)
    try:
        info, created = wf.create_or_bind(
            js, stream, cfg, subject=subject, pull=False, user=user, queue=queue
        )
        if info.config.deliver_subject != deliver:
            # Another member created the (queue) consumer first: move to its subject.
            Subscription.unsubscribe(sub)
            sub = _js_sub(client, str(info.config.deliver_subject), queue, limits)
    except BaseException:
        if not sub.is_closed:
            Subscription.unsubscribe(sub)
        raise
    sub._bind(_State(info=info, created=created, track_gaps=queue is None, **common), cb)
    return sub


def _js_sub(
    client: Core, subject: str, queue: str | None, limits: tuple[int, int]
) -> JsSubscription:
    sub: JsSubscription = client._subscribe_as(
        JsSubscription, subject, queue, None, 0, limits[0], limits[1]
    )
    return sub


def _check_ordered(
    queue: str | None,
    durable: str | None,
    consumer: str | None,
    manual_ack: bool,
    user: ConsumerConfig,
) -> None:
    if queue is not None:
        raise errors.OrderedQueueError()
    bad = []
    if durable or user.durable_name:
        bad.append("durable")
    if consumer or user.name:
        bad.append("consumer")
    if manual_ack:
        bad.append("manual_ack")
    if wf.value_of(user.ack_policy) not in (None, "none", "explicit"):  # explicit: the default
        bad.append(f"ack_policy {wf.value_of(user.ack_policy)!r}")
    if user.deliver_subject:
        bad.append("deliver_subject")
    if user.max_deliver and user.max_deliver != 1:
        bad.append("max_deliver")
    if bad:
        raise errors.OrderedConfigError(
            f"an ordered consumer is ephemeral and acks nothing; it can't take {', '.join(bad)}"
        )


def _subscribe_ordered(
    js: Context,
    subject: str | None,
    cb: Callable[[Msg], Any] | None,
    user: ConsumerConfig,
    limits: tuple[int, int],
    common: dict[str, Any],
) -> JsSubscription:
    client = js._client
    prefix = client.new_inbox() + "."
    base = wf.creation_config(
        user,
        name=None,
        subject=subject,
        ack_policy=AckPolicy.NONE,
        flow_control=True,
        idle_heartbeat=user.idle_heartbeat or DEFAULT_HEARTBEAT,
        mem_storage=True,
        num_replicas=1,
        max_deliver=1,
        ack_wait=ORDERED_ACK_WAIT,
    )
    first = base.evolve(deliver_subject=prefix + "1", name=f"{js._new_name()}_1")
    # Each consumer the ordered subscription makes gets deliver subject
    # <prefix><serial>; a reset moves the NATS subscription to the next one
    # (the server takes only a literal subscription as a push consumer's interest).
    sub = _js_sub(client, prefix + "1", None, limits)
    try:
        consumer = js._upsert_consumer(str(common["stream"]), first, {}, "create")
    except BaseException:
        Subscription.unsubscribe(sub)
        raise
    common = {**common, "delete_consumer": "always"}
    state = _State(
        info=consumer.cached_info,
        created=True,
        track_gaps=True,
        ordered=base,
        prefix=prefix,
        **common,
    )
    sub._bind(state, cb)
    return sub
