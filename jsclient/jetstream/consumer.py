"""A handle on one consumer (ADR-37): info and delete here; fetch, next, consume and
messages come from the pull engine's mixin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jsclient.api import ConsumerInfo
from jsclient.jetstream.pull import PullConsumerMixin

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context


class Consumer(PullConsumerMixin):
    """A consumer of a stream; get one from ``js.consumer(...)`` or ``js.create_consumer(...)``."""

    def __init__(self, js: Context, stream_name: str, info: ConsumerInfo) -> None:
        self._js = js
        self.stream_name: str = stream_name
        self.name: str = info.name
        self._cached_info: ConsumerInfo = info
        super().__init__()

    def __repr__(self) -> str:
        return f"<Consumer {self.stream_name!r}/{self.name!r}>"

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
