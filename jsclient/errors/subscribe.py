"""Legacy subscribe refusals (ADR-13 ``pull_subscribe``, ADR-15 ``subscribe``).

Checks made before anything is created. Each has a stable numeric ``code``;
where the same check exists in nats.java's client-error catalogue the number is
the same.
"""

from __future__ import annotations

from jsclient.errors._base import JetStreamError


class SubscribeError(JetStreamError):
    """A ``subscribe``/``pull_subscribe`` call was refused; nothing was created.

    ``code`` is stable across releases (``id`` is ``"SUB-<code>"``); the message
    says what to change.
    """

    code = 90000
    default_message = "nats: invalid JetStream subscription"

    @property
    def id(self) -> str:
        """``SUB-<code>``: the stable identifier of this refusal."""
        return f"SUB-{self.code}"

    def __str__(self) -> str:
        return f"nats: [{self.id}] {self.message or self.default_message.removeprefix('nats: ')}"


class PullDeliverGroupError(SubscribeError):
    """A pull subscription's consumer config names a deliver group."""

    code = 90001
    default_message = "pull subscriptions can't have a deliver group (deliver_group is for push)"


class PullDeliverSubjectError(SubscribeError):
    """A pull subscription's consumer config names a deliver subject."""

    code = 90002
    default_message = (
        "pull subscriptions can't have a deliver subject (deliver_subject is for push)"
    )


class PullHeartbeatError(SubscribeError):
    """Flow control or idle heartbeats in a pull subscription's consumer config."""

    code = 90005
    default_message = (
        "flow control and idle heartbeats are for push subscriptions; "
        "remove them from the pull consumer's config"
    )


class QueueHeartbeatError(SubscribeError):
    """A queue subscription with idle heartbeats or flow control."""

    code = 90006
    default_message = (
        "a queue subscription can't use idle heartbeats or flow control (the server would send "
        "them to one random member); remove them or subscribe without a queue"
    )


class NoStreamMatchError(SubscribeError):
    """No stream listens on the subscription's subject."""

    code = 90007
    default_message = "no stream matches the subject; create one, or pass stream="


class PushConsumerError(SubscribeError):
    """``pull_subscribe`` on a push consumer (it has a deliver subject)."""

    code = 90008
    default_message = "the consumer is a push consumer; use js.subscribe() for it"


class PullConsumerError(SubscribeError):
    """``subscribe`` (push) on a pull consumer (it has no deliver subject)."""

    code = 90009
    default_message = "the consumer is a pull consumer; use js.pull_subscribe() for it"


class FilterSubjectMismatchError(SubscribeError):
    """The existing consumer filters on another subject than the one subscribed to."""

    code = 90011
    default_message = "the subject does not match the consumer's filter subject"


class ConsumerBoundError(SubscribeError):
    """The push consumer is already bound to a subscription (duplicate subscription)."""

    code = 90012
    default_message = (
        "duplicate subscription: the consumer is already bound to a subscription; "
        "use a queue group (deliver_group) to share it"
    )


class ConsumerNotQueueError(SubscribeError):
    """A queue subscription to a consumer made without a deliver group."""

    code = 90013
    default_message = (
        "the consumer was created without a deliver group; it can't serve a queue subscription"
    )


class ConsumerIsQueueError(SubscribeError):
    """A plain subscription to a consumer made for a queue group."""

    code = 90014
    default_message = "the consumer was created for a queue group; subscribe with that queue name"


class QueueMismatchError(SubscribeError):
    """A queue subscription whose queue is not the consumer's deliver group."""

    code = 90015
    default_message = "the consumer was created for a different queue group"


class ConsumerConfigMismatchError(SubscribeError):
    """The given config differs from the existing consumer's (only deliver_subject may change)."""

    code = 90016
    default_message = (
        "the consumer exists with a different configuration (only the deliver subject can "
        "change); update the consumer or drop the differing fields"
    )


class ConsumerRequiredError(SubscribeError):
    """``consumer=`` names a consumer that does not exist (binding needs an existing one)."""

    code = 90017
    default_message = "the named consumer does not exist; create it first, or pass durable="


class OrderedQueueError(SubscribeError):
    """An ordered consumer with a queue group."""

    code = 90018
    default_message = "an ordered consumer can't be used with a queue group"


class SubjectRequiredError(SubscribeError):
    """Neither a subject nor a stream was given, so no stream can be found."""

    code = 90021
    default_message = "a subject is required when no stream is given"


class MultipleStreamsMatchError(SubscribeError):
    """More than one stream listens on the subject; the caller must name one."""

    code = 90022
    default_message = "more than one stream matches the subject; pass stream="


class PullAckPolicyError(SubscribeError):
    """A pull subscription with ack policy ``none`` or ``all``."""

    code = 90023
    default_message = (
        "pull subscriptions need ack policy explicit (ADR-15: none and all are errors for pull)"
    )


class OrderedConfigError(SubscribeError):
    """An ordered consumer combined with an option it cannot honour."""

    code = 90024
    default_message = (
        "an ordered consumer is ephemeral and acks nothing: durable=, consumer=, manual_ack "
        "and ack policies other than none can't be used with it"
    )


class DeleteConsumerPolicyError(SubscribeError):
    """``delete_consumer`` is not one of ``"if_created"``, ``"never"``, ``"always"``."""

    code = 90025
    default_message = 'delete_consumer must be "if_created", "never" or "always"'


class DurableMismatchError(SubscribeError):
    """``durable=`` and the config's ``durable_name`` (or ``name``) name different consumers."""

    code = 90026
    default_message = "durable= and the config's durable_name differ; give the name once"
