"""The JetStream context as streams, consumers and subscriptions use it.

:class:`~jsclient.jetstream.context.JetStream` makes Stream, Consumer,
OrderedConsumer and the subscriptions; they hold it typed as :class:`Context`
so that none of their modules imports ``context.py`` (no import circle). The
objects it returns appear as ``Any`` here: their modules sit above this one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jsclient._core import Core
    from jsclient.api import ConsumerInfo


class Context(Protocol):
    """What the objects a JetStream context makes use of it."""

    _client: Core
    _prefix: str
    _timeout: float

    def _api_request(
        self,
        subject_suffix: str,
        payload: dict[str, Any] | bytes | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    def _paged(self, suffix: str, key: str, extra: dict[str, Any]) -> Iterator[Any]: ...
    def _new_name(self) -> str: ...
    def _consumer_info(self, stream: str, name: str) -> ConsumerInfo: ...
    def _upsert_consumer(
        self, stream: str, config: Any, fields: dict[str, Any], action: str | None
    ) -> Any: ...

    def stream(self, name: str) -> Any: ...
    def create_stream(self, config: Any = None, **fields: Any) -> Any: ...
    def stream_names(self, subject: str | None = None) -> Iterator[str]: ...
    def consumer(self, stream: str, name: str) -> Any: ...
    def create_consumer(self, stream: str, config: Any = None, **fields: Any) -> Any: ...
    def update_consumer(self, stream: str, config: Any = None, **fields: Any) -> Any: ...
    def create_or_update_consumer(self, stream: str, config: Any = None, **fields: Any) -> Any: ...
    def delete_consumer(self, stream: str, name: str) -> None: ...
    def ordered_consumer(self, stream: str, **options: Any) -> Any: ...
    def publish(
        self, subject: str, payload: bytes = b"", *, headers: Any = None, timeout: Any = None
    ) -> Any: ...
