"""The JetStream data model, re-exported from nats-py's ``nats.js.api``.

jsclient does not hand-write these classes: ``StreamConfig``, ``ConsumerConfig``,
``PubAck`` and the rest are nats-py's, so values move freely between the two
clients. Where nats-py's class lacks fields a server feature needs, the class
here extends it with just those fields (``KeyValueConfig``: ``mirror``,
``sources``, ``compression``; ``ConsumerConfig`` and ``ConsumerInfo``: priority
groups and pausing, see :mod:`jsclient._api_consumer`); it is nats-py's own
class once that has them, with the same fields and values, so a nats-py upgrade
changes nothing for users.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nats.js.api import (
    AccountInfo,
    AccountLimits,
    AckPolicy,
    APIStats,
    ClusterInfo,
    DeliverPolicy,
    DiscardPolicy,
    ExternalStream,
    Header,
    LostStreamData,
    PeerInfo,
    Placement,
    PubAck,
    RawStreamMsg,
    ReplayPolicy,
    RePublish,
    RetentionPolicy,
    SequenceInfo,
    StatusCode,
    StorageType,
    StoreCompression,
    StreamConfig,
    StreamInfo,
    StreamPurgeRequest,
    StreamSource,
    StreamSourceInfo,
    StreamState,
    SubjectTransform,
    Tier,
)
from nats.js.api import (
    KeyValueConfig as _NatsKeyValueConfig,
)

from jsclient._api_consumer import (
    ConsumerConfig,
    ConsumerInfo,
    PriorityGroupState,
    PriorityPolicy,
)

_KV_EXTRA = ("mirror", "sources", "compression")
if {f.name for f in dataclasses.fields(_NatsKeyValueConfig)} >= set(_KV_EXTRA):
    KeyValueConfig = _NatsKeyValueConfig
else:

    @dataclasses.dataclass
    class KeyValueConfig(_NatsKeyValueConfig):  # type: ignore[no-redef]
        """nats-py's KeyValueConfig plus a bucket's mirror, sources and compression."""

        mirror: StreamSource | None = None
        sources: list[StreamSource] | None = None
        compression: StoreCompression | None = None

        @classmethod
        def from_response(cls, resp: dict[str, Any]) -> Any:
            cls._convert(resp, "mirror", StreamSource)
            cls._convert(resp, "sources", StreamSource)
            return super().from_response(resp)


__all__ = [
    "APIStats",
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "ClusterInfo",
    "ConsumerConfig",
    "ConsumerInfo",
    "DeliverPolicy",
    "DiscardPolicy",
    "ExternalStream",
    "Header",
    "KeyValueConfig",
    "LostStreamData",
    "PeerInfo",
    "Placement",
    "PriorityGroupState",
    "PriorityPolicy",
    "PubAck",
    "RawStreamMsg",
    "RePublish",
    "ReplayPolicy",
    "RetentionPolicy",
    "SequenceInfo",
    "StatusCode",
    "StorageType",
    "StoreCompression",
    "StreamConfig",
    "StreamInfo",
    "StreamPurgeRequest",
    "StreamSource",
    "StreamSourceInfo",
    "StreamState",
    "SubjectTransform",
    "Tier",
]
