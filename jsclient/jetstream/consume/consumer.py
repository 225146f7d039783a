"""A handle on one consumer (ADR-37): info, delete, pause/resume, unpin and reset here;
fetch, next, consume and messages come from the pull engine's mixin.

A handle also answers the attributes of nats-py's ``ConsumerInfo`` (``config``,
``num_pending``, ``delivered``, ...) from its ``cached_info``, for code that read
what nats-py's ``add_consumer`` returned.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from jsclient.api import ConsumerInfo
from jsclient.jetstream.consume.priority import check_unpin_group
from jsclient.jetstream.consume.pull import PullConsumerMixin

if TYPE_CHECKING:
    from datetime import datetime

    from jsclient.api import ClusterInfo, ConsumerConfig, SequenceInfo
    from jsclient.jetstream._ctx import Context

#: The attributes of ``ConsumerInfo`` a handle answers from its cached info
#: (``name`` and ``stream_name`` it has itself).
INFO_FIELDS = frozenset(f.name for f in dataclasses.fields(ConsumerInfo))


def info_attribute(handle: object, name: str) -> Any:
    """``handle.<name>`` from the handle's cached ``ConsumerInfo`` (a consumer or an
    ordered consumer's ``__getattr__``: only reached for names it lacks itself;
    read through vars(), not the property, which would recurse on a half-made handle)."""
    info = vars(handle).get("_cached_info")
    if name in INFO_FIELDS and info is not None:
        return getattr(info, name)
    raise AttributeError(f"{type(handle).__name__!r} object has no attribute {name!r}")


class Consumer(PullConsumerMixin):
    """A consumer of a stream; get one from ``js.consumer(...)`` or ``js.create_consumer(...)``.

    It also answers the attributes of nats-py's ``ConsumerInfo`` (``config``,
    ``created``, ``delivered``, ``ack_floor``, ``num_ack_pending``,
    ``num_redelivered``, ``num_waiting``, ``num_pending``, ``cluster``,
    ``push_bound``, ...) from ``cached_info``: as of when the handle was made
    or last refreshed by ``info()``.
    """

    if TYPE_CHECKING:  # answered by __getattr__; declared for type checkers
        config: ConsumerConfig
        created: datetime
        delivered: SequenceInfo | None
        ack_floor: SequenceInfo | None
        num_ack_pending: int | None
        num_redelivered: int | None
        num_waiting: int | None
        num_pending: int | None
        cluster: ClusterInfo | None
        push_bound: bool | None
        paused: bool | None
        pause_remaining: Any
        priority_groups: list[Any] | None

    def __init__(self, js: Context, stream_name: str, info: ConsumerInfo) -> None:
        self._js = js
        self.stream_name: str = stream_name
        self.name: str = info.name
        self._cached_info: ConsumerInfo = info
        super().__init__()

    def __repr__(self) -> str:
        return f"<Consumer {self.stream_name!r}/{self.name!r}>"

    if not TYPE_CHECKING:  # hidden from type checkers: they see the names above only

        def __getattr__(self, name: str) -> Any:
            return info_attribute(self, name)

    @property
    def cached_info(self) -> ConsumerInfo:
        """The info from when this handle was made or last refreshed by ``info()``."""
        return self._cached_info

    def info(self) -> ConsumerInfo:
        """Fetch the consumer's current info (and keep it as ``cached_info``)."""
        resp = self._js._api_request(f"CONSUMER.INFO.{self.stream_name}.{self.name}")
        self._cached_info = ConsumerInfo.from_response(resp)
        return self._cached_info

    def delete(self) -> None:
        """Delete this consumer on the server."""
        self._js.delete_consumer(self.stream_name, self.name)

    def pause(self, until: datetime | float) -> datetime:
        """Pause deliveries until ``until`` (a timezone-aware datetime, or seconds from
        now); returns when the server resumes it (UTC). Pulls wait meanwhile.
        Server 2.11+; a time in the past leaves the consumer running."""
        return self._js.pause_consumer(self.stream_name, self.name, until)

    def resume(self) -> None:
        """Resume a paused consumer now. Server 2.11+."""
        self._js.resume_consumer(self.stream_name, self.name)

    def unpin(self, group: str) -> None:
        """Unpin the client pinned to ``group`` (``pinned_client`` policy, ADR-42); the
        server pins another pulling client. If that was this handle, it forgets its
        pin id and competes again as an unpinned client."""
        check_unpin_group(self._cached_info, group)
        self._js.unpin_consumer(self.stream_name, self.name, group)
        engine = self._jsclient_pull_engine
        if engine is not None:
            engine.pin_id = None

    def reset(self, seq: int | None = None) -> int:
        """Reset the delivery state (ADR-60, server 2.14+): pending and redelivered
        messages are forgotten and delivery starts again at stream sequence ``seq``
        (default: just above the ack floor). Returns the sequence reset to, and
        refreshes ``cached_info``. ConsumerInvalidResetError when the deliver
        policy does not allow ``seq``."""
        reset_seq, info = self._js._reset(self.stream_name, self.name, seq)
        self._cached_info = info
        return reset_seq
