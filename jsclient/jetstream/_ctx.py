"""The JetStream context as its areas, handles and subscriptions use it.

:class:`~jsclient.jetstream.context.JetStream` makes its areas (``StreamAdmin``,
``ConsumerAdmin``, ``MessageFeatures``, ``KeyValueBuckets``, ``ObjectStoreBuckets``,
``ApiLevel``) and the objects it hands out (Stream, Consumer, OrderedConsumer, KeyValue,
ObjectStore, the subscriptions, batches, counters), passing itself; they hold
it typed as :class:`Context` so that none of their modules imports
``context.py`` (no import circle). This protocol lists exactly what they use
of it; mypy checks that ``JetStream`` satisfies it where it passes itself.
The objects it returns appear as ``Any`` here: their modules sit above this one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from datetime import datetime

    from jsclient._core import Core
    from jsclient.api import ConsumerInfo
    from jsclient.jetstream.publish.async_pub import AsyncPublisher


class Context(Protocol):
    """What the objects a JetStream context makes use of it."""

    _client: Core
    _prefix: str
    _timeout: float
    _async: AsyncPublisher  # publish_async's window (publish/calls.py uses it)

    # The API plumbing (context.py) and the API level (manage/api_level.py).
    def _api_request(
        self,
        subject_suffix: str,
        payload: dict[str, Any] | bytes | None = None,
        timeout: float | None = None,
        *,
        required: tuple[int, str] | None = None,
    ) -> dict[str, Any]: ...
    def _paged(self, suffix: str, key: str, extra: dict[str, Any]) -> Iterator[Any]: ...
    def _new_name(self) -> str: ...
    def _api_level(self) -> int: ...
    def _require_api_level(self, level: int, feature: str) -> None: ...

    # Streams (manage/stream_admin.py).
    def stream(self, name: str) -> Any: ...
    def stream_names(self, subject: str | None = None) -> Iterator[str]: ...

    # Consumers (manage/consumer_admin.py; ordered_consumer: consume/ordered.py).
    def _consumer_info(self, stream: str, name: str) -> ConsumerInfo: ...
    def _upsert_consumer(
        self, stream: str, config: Any, fields: dict[str, Any], action: str | None
    ) -> Any: ...
    def _reset(self, stream: str, name: str, seq: int | None) -> tuple[int, ConsumerInfo]: ...
    def consumer(self, stream: str, name: str) -> Any: ...
    def create_consumer(self, stream: str, config: Any = None, **fields: Any) -> Any: ...
    def update_consumer(self, stream: str, config: Any = None, **fields: Any) -> Any: ...
    def create_or_update_consumer(self, stream: str, config: Any = None, **fields: Any) -> Any: ...
    def delete_consumer(self, stream: str, name: str) -> bool: ...
    def pause_consumer(self, stream: str, name: str, until: object) -> datetime: ...
    def resume_consumer(self, stream: str, name: str) -> None: ...
    def unpin_consumer(self, stream: str, consumer: str, group: str) -> None: ...
    def ordered_consumer(self, stream: str, **options: Any) -> Any: ...

    # Publishing (context.py; publish_async: publish/async_pub.py).
    def publish(
        self, subject: str, payload: bytes = b"", *, headers: Any = None, timeout: Any = None
    ) -> Any: ...
    def publish_async(self, subject: str, payload: bytes = b"", *, headers: Any = None) -> Any: ...
