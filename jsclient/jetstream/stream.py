"""A handle on one stream (ADR-37): info, purge, single messages, and its consumers.

``get_msg`` uses the direct-get API (``DIRECT.GET``, answered by any replica
with the message itself) when the stream allows it, else ``STREAM.MSG.GET``
(answered by the leader as JSON with base64 fields). Both return the same
``RawStreamMsg``: the stream's own bookkeeping headers that direct get adds
(``Nats-Stream``, ``Nats-Sequence``, ...) are moved into the fields, so
``headers`` holds only what the publisher sent.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.api import ConsumerInfo, RawStreamMsg, StreamInfo
from jsclient.protocol import headers as _headers

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream._names import ConsumerConfigLike
    from jsclient.jetstream.consumer import Consumer
    from jsclient.jetstream.ordered import OrderedConsumer

# Headers the server adds to a direct-get answer; they describe the stored
# message rather than belong to it.
_DIRECT_STREAM = "Nats-Stream"
_DIRECT_SEQ = "Nats-Sequence"
_DIRECT_TIME = "Nats-Time-Stamp"
_DIRECT_SUBJECT = "Nats-Subject"
_DIRECT_META = frozenset(
    {
        _DIRECT_STREAM,
        _DIRECT_SEQ,
        _DIRECT_TIME,
        _DIRECT_SUBJECT,
        "Nats-Last-Sequence",
        "Nats-Num-Pending",
        "Nats-UpTo-Sequence",
    }
)


class Stream:
    """A stream; get one from ``js.stream(name)`` or ``js.create_stream(...)``."""

    def __init__(self, js: Context, info: StreamInfo) -> None:
        self._js = js
        self._cached_info = info
        self.name: str = str(info.config.name)

    def __repr__(self) -> str:
        return f"<Stream {self.name!r}>"

    @property
    def cached_info(self) -> StreamInfo:
        """The info from when this handle was made or last refreshed by ``info()``."""
        return self._cached_info

    def info(self) -> StreamInfo:
        """Fetch the stream's current info (and keep it as ``cached_info``)."""
        resp = self._js._api_request(f"STREAM.INFO.{self.name}")
        self._cached_info = StreamInfo.from_response(resp)
        return self._cached_info

    def purge(
        self, subject: str | None = None, seq: int | None = None, keep: int | None = None
    ) -> int:
        """Remove messages (all, or those on ``subject``, below ``seq``, or all but ``keep``).

        Returns how many were purged.
        """
        req: dict[str, Any] = {}
        if subject is not None:
            req["filter"] = subject
        if seq is not None:
            req["seq"] = seq
        if keep is not None:
            req["keep"] = keep
        resp = self._js._api_request(f"STREAM.PURGE.{self.name}", req or None)
        return int(resp.get("purged", 0))

    def delete_msg(self, seq: int, *, erase: bool = False) -> None:
        """Delete message ``seq``; ``erase=True`` also overwrites its stored bytes."""
        self._js._api_request(f"STREAM.MSG.DELETE.{self.name}", {"seq": seq, "no_erase": not erase})

    def get_msg(
        self,
        seq: int | None = None,
        *,
        last_by_subject: str | None = None,
        next_by_subject: str | None = None,
    ) -> RawStreamMsg:
        """Read one stored message: by sequence, the last on a subject, or the first
        on a subject at or after ``seq``. MessageNotFoundError when there is none."""
        if last_by_subject is not None and (seq is not None or next_by_subject is not None):
            raise ValueError("nats: last_by_subject cannot be combined with seq or next_by_subject")
        if seq is None and last_by_subject is None and next_by_subject is None:
            raise ValueError("nats: get_msg needs seq, last_by_subject or next_by_subject")
        req: dict[str, Any] = {}
        if seq is not None:
            req["seq"] = seq
        if last_by_subject is not None:
            req["last_by_subj"] = last_by_subject
        if next_by_subject is not None:
            req["next_by_subj"] = next_by_subject
        if self._cached_info.config.allow_direct:
            return self._direct_get(req, last_by_subject)
        resp = self._js._api_request(f"STREAM.MSG.GET.{self.name}", req)
        return self._from_json(resp["message"])

    def _from_json(self, m: dict[str, Any]) -> RawStreamMsg:
        hdrs = base64.b64decode(m["hdrs"]) if m.get("hdrs") else None
        headers = _first_values(_headers.decode(hdrs)[2]) if hdrs else None
        data = m.get("data")
        return RawStreamMsg(
            subject=m.get("subject"),
            seq=m.get("seq"),
            data=base64.b64decode(data) if data else b"",
            hdrs=hdrs,
            headers=headers or None,
            stream=self.name,
            time=_parse_time(m.get("time")),
        )

    def _direct_get(self, req: dict[str, Any], last_by_subject: str | None) -> RawStreamMsg:
        js = self._js
        if last_by_subject is not None:
            # The subject form needs no body (and is what mirrors answer too).
            subject = f"{js._prefix}.DIRECT.GET.{self.name}.{last_by_subject}"
            body = b""
        else:
            subject = f"{js._prefix}.DIRECT.GET.{self.name}"
            body = json.dumps(req).encode()
        try:
            msg = js._client.request(subject, body, timeout=js._timeout)
        except errors.NoRespondersError:
            raise errors.ServiceUnavailableError(
                code=503, description=f"no responders on {subject}"
            )
        except errors.TimeoutError:
            raise errors.TimeoutError(f"nats: timeout waiting for the JetStream API ({subject})")
        hdr = msg.raw_headers
        if hdr is None:
            raise errors.JetStreamError(f"nats: direct get answer without headers on {subject}")
        code, description, multi = _headers.decode(hdr)
        if code is not None and code >= 300:
            if code == 404:
                raise errors.MessageNotFoundError(
                    code=404, description=description or "Message Not Found", err_code=10037
                )
            raise errors.api_error({"code": code, "description": description})
        seq = multi.get(_DIRECT_SEQ, [""])[0]
        user = {k: v for k, v in multi.items() if k not in _DIRECT_META}
        return RawStreamMsg(
            subject=multi.get(_DIRECT_SUBJECT, [None])[0],
            seq=int(seq) if seq.isascii() and seq.isdigit() else None,
            data=msg.data,
            hdrs=_headers.encode(user) if user else None,
            headers=_first_values(user) or None,
            stream=multi.get(_DIRECT_STREAM, [self.name])[0],
            time=_parse_time(multi.get(_DIRECT_TIME, [None])[0]),
        )

    # -- consumers of this stream --------------------------------------------

    def create_consumer(self, config: ConsumerConfigLike | None = None, **fields: Any) -> Consumer:
        """``js.create_consumer`` on this stream."""
        consumer: Consumer = self._js.create_consumer(self.name, config, **fields)
        return consumer

    def update_consumer(self, config: ConsumerConfigLike | None = None, **fields: Any) -> Consumer:
        """``js.update_consumer`` on this stream."""
        consumer: Consumer = self._js.update_consumer(self.name, config, **fields)
        return consumer

    def create_or_update_consumer(
        self, config: ConsumerConfigLike | None = None, **fields: Any
    ) -> Consumer:
        """``js.create_or_update_consumer`` on this stream."""
        consumer: Consumer = self._js.create_or_update_consumer(self.name, config, **fields)
        return consumer

    def consumer(self, name: str) -> Consumer:
        """A handle on an existing consumer of this stream; ConsumerNotFoundError otherwise."""
        consumer: Consumer = self._js.consumer(self.name, name)
        return consumer

    def delete_consumer(self, name: str) -> None:
        """Delete a consumer of this stream."""
        self._js.delete_consumer(self.name, name)

    def pause_consumer(self, name: str, until: datetime | float) -> datetime:
        """``js.pause_consumer`` on this stream."""
        return self._js.pause_consumer(self.name, name, until)

    def resume_consumer(self, name: str) -> None:
        """``js.resume_consumer`` on this stream."""
        self._js.resume_consumer(self.name, name)

    def unpin_consumer(self, name: str, group: str) -> None:
        """``js.unpin_consumer`` on this stream."""
        self._js.unpin_consumer(self.name, name, group)

    def reset_consumer(self, name: str, seq: int | None = None) -> int:
        """``js.reset_consumer`` on this stream."""
        return self._js._reset(self.name, name, seq)[0]

    def ordered_consumer(self, **options: Any) -> OrderedConsumer:
        """``js.ordered_consumer`` on this stream."""
        ordered: OrderedConsumer = self._js.ordered_consumer(self.name, **options)
        return ordered

    def consumers(self) -> Iterator[ConsumerInfo]:
        """Info of every consumer of this stream, page by page."""
        for item in self._js._paged(f"CONSUMER.LIST.{self.name}", "consumers", {}):
            yield ConsumerInfo.from_response(item)

    def consumer_names(self) -> Iterator[str]:
        """Names of every consumer of this stream, page by page."""
        yield from self._js._paged(f"CONSUMER.NAMES.{self.name}", "consumers", {})


def _first_values(multi: dict[str, list[str]]) -> dict[str, str]:
    return {k: v[0] for k, v in multi.items() if v}


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    parsed: datetime = RawStreamMsg._parse_utc_iso(value)
    return parsed
