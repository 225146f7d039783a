"""The JetStream data model, re-exported from nats-py's ``nats.js.api``.

jsclient does not hand-write these classes: ``StreamConfig``, ``ConsumerConfig``,
``PubAck`` and the rest are nats-py's, so values move freely between the two
clients. Where nats-py's class lacks fields a server feature needs, the class
here extends it with just those fields (``KeyValueConfig``: ``mirror``,
``sources``, ``compression``; ``ObjectStoreConfig``: ``metadata``,
``compression``; ``ObjectMeta`` and ``ObjectInfo``: ``metadata``;
``ConsumerConfig`` and ``ConsumerInfo``: priority groups and pausing, see
:mod:`jsclient._api_consumer`); it is nats-py's own class once that has them,
with the same fields and values, so a nats-py upgrade changes nothing for users.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

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
    ObjectLink,
    ObjectMetaOptions,
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
from nats.js.api import (
    ObjectInfo as _NatsObjectInfo,
)
from nats.js.api import (
    ObjectMeta as _NatsObjectMeta,
)
from nats.js.api import (
    ObjectStoreConfig as _NatsObjectStoreConfig,
)

from jsclient._api_consumer import (
    ConsumerConfig,
    ConsumerInfo,
    PriorityGroupState,
    PriorityPolicy,
)


def _has(cls: type, *names: str) -> bool:
    return {f.name for f in dataclasses.fields(cls)} >= set(names)


_KV_EXTRA = ("mirror", "sources", "compression")
if _has(_NatsKeyValueConfig, *_KV_EXTRA):
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


# Typed as the extended class; nats-py's own once it has the fields.
if TYPE_CHECKING or not _has(_NatsObjectStoreConfig, "metadata", "compression"):

    @dataclasses.dataclass
    class ObjectStoreConfig(_NatsObjectStoreConfig):
        """nats-py's ObjectStoreConfig plus a bucket's metadata and compression (S2)."""

        metadata: dict[str, str] | None = None
        compression: bool = False

else:
    ObjectStoreConfig = _NatsObjectStoreConfig


# Typed as the extended class; nats-py's own once it has the fields.
if TYPE_CHECKING or not _has(_NatsObjectMeta, "metadata"):

    @dataclasses.dataclass
    class ObjectMeta(_NatsObjectMeta):
        """nats-py's ObjectMeta plus the object's ``metadata`` (str to str)."""

        metadata: dict[str, str] | None = None

else:
    ObjectMeta = _NatsObjectMeta


# Typed as the extended class; nats-py's own once it has the fields.
if TYPE_CHECKING or not _has(_NatsObjectInfo, "metadata"):

    @dataclasses.dataclass
    class ObjectInfo(_NatsObjectInfo):
        """nats-py's ObjectInfo plus the object's ``metadata`` (str to str)."""

        metadata: dict[str, str] | None = None

        @property
        def meta(self) -> ObjectMeta:
            return ObjectMeta(
                name=self.name,
                description=self.description,
                headers=self.headers,
                options=self.options,
                metadata=self.metadata,
            )

else:
    ObjectInfo = _NatsObjectInfo


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
    "ObjectInfo",
    "ObjectLink",
    "ObjectMeta",
    "ObjectMetaOptions",
    "ObjectStoreConfig",
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
