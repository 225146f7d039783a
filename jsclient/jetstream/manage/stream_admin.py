"""The streams of a JetStream context: create, update, bind, delete, list.

:class:`StreamAdmin` is the context's stream area; ``js.create_stream`` and the
rest delegate to it. Each call is one request (``STREAM.CREATE.<name>``,
``STREAM.UPDATE``, ``STREAM.INFO``, ``STREAM.DELETE``; ``STREAM.LIST`` and
``STREAM.NAMES`` page by page); the handle it returns is
:class:`~jsclient.jetstream.manage.stream.Stream`. A config with fields of a
newer server (``allow_msg_ttl``, ``persist_mode="async"``, ...) is checked
against the server's API level and sent with ``Nats-Required-Api-Level`` by
the context's ``_api_request`` (:mod:`.api_level` says which level).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.api import StreamInfo
from jsclient.jetstream.manage.names import StreamConfigLike, check_stream_name, stream_config
from jsclient.jetstream.manage.stream import Stream

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context


class StreamAdmin:
    """The streams of a JetStream context (its ``_streams``).

    :class:`~jsclient.jetstream.context.JetStream`'s stream methods delegate to
    the methods of the same name here and document them.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def create_stream(self, config: StreamConfigLike | None, fields: dict[str, Any]) -> Stream:
        cfg = stream_config(config, fields)
        resp = self._ctx._api_request(f"STREAM.CREATE.{cfg.name}", cfg.as_dict())
        return Stream(self._ctx, StreamInfo.from_response(resp))

    def update_stream(self, config: StreamConfigLike | None, fields: dict[str, Any]) -> Stream:
        cfg = stream_config(config, fields)
        resp = self._ctx._api_request(f"STREAM.UPDATE.{cfg.name}", cfg.as_dict())
        return Stream(self._ctx, StreamInfo.from_response(resp))

    def create_or_update_stream(
        self, config: StreamConfigLike | None, fields: dict[str, Any]
    ) -> Stream:
        cfg = stream_config(config, fields)
        try:
            return self.update_stream(cfg, {})
        except errors.StreamNotFoundError:
            return self.create_stream(cfg, {})

    def stream(self, name: str) -> Stream:
        check_stream_name(name)
        resp = self._ctx._api_request(f"STREAM.INFO.{name}")
        return Stream(self._ctx, StreamInfo.from_response(resp))

    def delete_stream(self, name: str) -> None:
        check_stream_name(name)
        self._ctx._api_request(f"STREAM.DELETE.{name}")

    def streams(self, subject: str | None) -> Iterator[StreamInfo]:
        extra = {} if subject is None else {"subject": subject}
        for item in self._ctx._paged("STREAM.LIST", "streams", extra):
            yield StreamInfo.from_response(item)

    def stream_names(self, subject: str | None) -> Iterator[str]:
        extra = {} if subject is None else {"subject": subject}
        yield from self._ctx._paged("STREAM.NAMES", "streams", extra)
