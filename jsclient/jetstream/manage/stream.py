"""A handle on one stream (ADR-37): info, purge, single messages, and its consumers.

``get_msg`` reads through :func:`.direct.get_msg`: by direct get
(``DIRECT.GET``, answered by any replica with the message itself) when the
stream allows it, else ``STREAM.MSG.GET`` (answered by the leader as JSON with
base64 fields). Both give the same ``RawStreamMsg``: the stream's own
bookkeeping headers that direct get adds (``Nats-Stream``, ``Nats-Sequence``,
...) are moved into the fields, so ``headers`` holds only what the publisher
sent.

``get_batch`` and ``get_last_msgs_for`` are the batched direct gets of server
2.11 (ADR-31, see :mod:`.direct`): iterators of the same ``RawStreamMsg``.

The requests that need only the stream's name (:func:`stream_info`,
:func:`purge`, :func:`delete_msg`, :func:`read_msg`, :func:`consumer_infos`)
are functions here too, so that the context's nats-py names
(:mod:`jsclient.jetstream.compat`: ``js.purge_stream(name)`` ...) make one
request, as nats-py's do, instead of a ``STREAM.INFO`` for a handle first.
A handle also answers nats-py's ``StreamInfo`` attributes (``config``,
``state``, ...) from its ``cached_info``, for code that read what nats-py's
``add_stream`` / ``update_stream`` returned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jsclient.api import ConsumerInfo, RawStreamMsg, StreamInfo
from jsclient.jetstream.manage import direct as _direct
from jsclient.protocol import headers as _headers

if TYPE_CHECKING:
    from jsclient.api import ClusterInfo, StreamConfig, StreamSourceInfo, StreamState
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.consume.consumer import Consumer
    from jsclient.jetstream.consume.ordered import OrderedConsumer
    from jsclient.jetstream.manage.names import ConsumerConfigLike

#: The attributes of nats-py's ``StreamInfo`` a handle answers from its cached info.
INFO_FIELDS = frozenset(f.name for f in dataclasses.fields(StreamInfo))


class Stream:
    """A stream; get one from ``js.stream(name)`` or ``js.create_stream(...)``.

    It also answers the attributes of nats-py's ``StreamInfo`` (``config``,
    ``state``, ``cluster``, ``mirror``, ``sources``, ``created``, ...) from
    ``cached_info``: as of when the handle was made or last refreshed by ``info()``.
    """

    if TYPE_CHECKING:  # answered by __getattr__; declared for type checkers
        config: StreamConfig
        state: StreamState
        mirror: StreamSourceInfo | None
        sources: list[StreamSourceInfo] | None
        cluster: ClusterInfo | None
        did_create: bool | None
        created: datetime | None

    def __init__(self, js: Context, info: StreamInfo) -> None:
        self._js = js
        self._cached_info = info
        self.name: str = str(info.config.name)

    def __repr__(self) -> str:
        return f"<Stream {self.name!r}>"

    if not TYPE_CHECKING:  # hidden from type checkers: they see the names above only

        def __getattr__(self, name: str) -> Any:
            # Only reached for names the handle does not have itself; vars() and
            # not self._cached_info, which would recurse on a half-made handle.
            info = vars(self).get("_cached_info")
            if name in INFO_FIELDS and info is not None:
                return getattr(info, name)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def cached_info(self) -> StreamInfo:
        """The info from when this handle was made or last refreshed by ``info()``."""
        return self._cached_info

    def info(self) -> StreamInfo:
        """Fetch the stream's current info (and keep it as ``cached_info``)."""
        self._cached_info = stream_info(self._js, self.name)
        return self._cached_info

    def purge(
        self, subject: str | None = None, seq: int | None = None, keep: int | None = None
    ) -> int:
        """Remove messages (all, or those on ``subject``, below ``seq``, or all but ``keep``).

        Returns how many were purged.
        """
        return purge(self._js, self.name, subject, seq, keep)

    def delete_msg(self, seq: int, *, erase: bool = False) -> None:
        """Delete message ``seq``; ``erase=True`` also overwrites its stored bytes."""
        delete_msg(self._js, self.name, seq, erase)

    def get_msg(
        self,
        seq: int | None = None,
        *,
        last_by_subject: str | None = None,
        next_by_subject: str | None = None,
    ) -> RawStreamMsg:
        """Read one stored message: by sequence, the last on a subject, or the first
        on a subject at or after ``seq``. MessageNotFoundError when there is none."""
        return raw_msg(self.name, self._get(msg_request(seq, last_by_subject, next_by_subject)))

    def _get(self, req: dict[str, Any]) -> _direct.StoredMsg:
        """The one read of one message for this stream, the key-value bucket and
        the object store on it: by direct get when the stream allows it."""
        direct = _direct.allows_direct(self._cached_info.config)
        return _direct.get_msg(self._js, self.name, req, direct)

    # -- batched direct gets (server 2.11+) -----------------------------------

    def get_batch(
        self,
        *,
        seq: int | None = None,
        start_time: datetime | None = None,
        subject: str | None = None,
        batch: int = 100,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> Iterator[RawStreamMsg]:
        """Up to ``batch`` stored messages in sequence order, read by direct get (ADR-31).

        The read starts at sequence ``seq``, or at the first message stored at
        or after ``start_time`` (a datetime; naive means UTC), or at the
        stream's first message. ``subject`` keeps only messages on that subject
        (wildcards allowed). ``batch`` is the number of messages wanted in all:
        the iterator asks the server page by page (at most 10,000 messages and
        8 MiB a page) until it has them, the server has no more, or
        ``max_bytes`` bytes (subjects, headers and payloads as stored; the
        message that reaches the limit is included) have been read. It holds
        at most one page and asks for the next when the last is taken, so a
        slow loop loses nothing. Nothing matching is an empty iterator.

        ``timeout`` (default: the context's) bounds each wait for the server.
        The stream must allow direct gets (DirectGetNotAllowedError) on a
        server 2.11 or later (BatchGetNotSupportedError).
        """
        _direct.check_count("batch", batch)
        _direct.check_count("max_bytes", max_bytes, optional=True)
        _direct.check_count("seq", seq, optional=True)
        if seq is not None and start_time is not None:
            raise ValueError("nats: get_batch takes seq or start_time, not both")
        req: dict[str, Any] = {}
        if start_time is not None:
            req["start_time"] = _direct.rfc3339(start_time)
        elif seq is not None or subject is None:
            req["seq"] = seq or 1
        if subject is not None:
            _direct.check_subject("subject", subject)
            req["next_by_subj"] = subject
        read = _direct.DirectRead(
            self._js, self.name, req, limit=batch, max_bytes=max_bytes, timeout=timeout
        )
        return self._stream_msgs(read)

    def get_last_msgs_for(
        self,
        subjects: str | Iterable[str],
        *,
        up_to_seq: int | None = None,
        up_to_time: datetime | None = None,
        timeout: float | None = None,
    ) -> Iterator[RawStreamMsg]:
        """The last message of every subject matching ``subjects`` (wildcards
        allowed), in sequence order, as one point-in-time read (ADR-31 multi get).

        With ``up_to_seq`` (or ``up_to_time``, a datetime; naive means UTC) it
        is the last of each subject at that sequence (stored before that time).
        Pages of at most 10,000 messages and 8 MiB are read at the same
        sequence, so the whole answer is consistent. The server answers at most
        1024 subjects: more raise TooManyResultsError (code 413) before any is
        sent, since the server counts every match first. Nothing matching is an
        empty iterator.
        """
        subs = [subjects] if isinstance(subjects, str) else list(subjects)
        if not subs:
            raise ValueError("nats: get_last_msgs_for needs at least one subject")
        for s in subs:
            _direct.check_subject("subjects", s)
        _direct.check_count("up_to_seq", up_to_seq, optional=True)
        if up_to_seq is not None and up_to_time is not None:
            raise ValueError("nats: get_last_msgs_for takes up_to_seq or up_to_time, not both")
        req: dict[str, Any] = {"multi_last": subs}
        if up_to_seq is not None:
            req["up_to_seq"] = up_to_seq
        if up_to_time is not None:
            req["up_to_time"] = _direct.rfc3339(up_to_time)
        read = _direct.DirectRead(
            self._js, self.name, req, limit=None, max_bytes=None, timeout=timeout
        )
        return self._stream_msgs(read)

    def _stream_msgs(self, read: _direct.DirectRead) -> Iterator[RawStreamMsg]:
        fields = _direct._direct_headers
        to_datetime = _direct.ns_datetime
        name = self.name
        for msg in read.messages():
            raw = msg._hdr
            assert raw is not None  # messages() yields only answers with headers
            subject, seq, ns, _pending, _last, others = fields(raw)
            hdrs = headers = None
            if others:  # the publisher's own headers
                user = _direct.user_headers(raw)
                if user:
                    hdrs = _headers.encode(user)
                    headers = _first_values(user)
            yield RawStreamMsg(
                subject=subject,
                seq=seq if seq >= 0 else None,
                data=msg.data,
                hdrs=hdrs,
                headers=headers,
                stream=name,
                time=to_datetime(ns)
                if ns is not None
                else _parse_time(_direct._header_value(raw, _direct.TIME_HDR)),
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
        return consumer_infos(self._js, self.name)

    def consumer_names(self) -> Iterator[str]:
        """Names of every consumer of this stream, page by page."""
        yield from self._js._paged(f"CONSUMER.NAMES.{self.name}", "consumers", {})


# -- the requests that need only the stream's name ------------------------------


def stream_info(js: Context, name: str, subjects_filter: str | None = None) -> StreamInfo:
    """``STREAM.INFO``; with ``subjects_filter`` (a wildcard) ``state.subjects`` maps
    each matching subject to its message count, every page of them asked for."""
    if subjects_filter is None:
        info: StreamInfo = StreamInfo.from_response(js._api_request(f"STREAM.INFO.{name}"))
        return info
    subjects: dict[str, int] = {}
    while True:
        req = {"subjects_filter": subjects_filter, "offset": len(subjects)}
        resp = js._api_request(f"STREAM.INFO.{name}", req)
        page = (resp.get("state") or {}).get("subjects") or {}
        subjects.update(page)
        # The server sends at most its page limit of subjects and says how many match.
        if not page or len(subjects) >= int(resp.get("total") or 0):
            break
    if isinstance(resp.get("state"), dict):
        resp["state"]["subjects"] = subjects
    info = StreamInfo.from_response(resp)
    return info


def purge(js: Context, name: str, subject: str | None, seq: int | None, keep: int | None) -> int:
    """``STREAM.PURGE`` (all, or on ``subject``, below ``seq``, all but ``keep``);
    how many messages went."""
    req: dict[str, Any] = {}
    if subject is not None:
        req["filter"] = subject
    if seq is not None:
        req["seq"] = seq
    if keep is not None:
        req["keep"] = keep
    resp = js._api_request(f"STREAM.PURGE.{name}", req or None)
    return int(resp.get("purged", 0))


def delete_msg(js: Context, name: str, seq: int, erase: bool) -> None:
    """``STREAM.MSG.DELETE`` of message ``seq``; ``erase`` overwrites its stored bytes."""
    js._api_request(f"STREAM.MSG.DELETE.{name}", {"seq": seq, "no_erase": not erase})


def msg_request(
    seq: int | None, last_by_subject: str | None, next_by_subject: str | None
) -> dict[str, Any]:
    """The request of a single-message get, checked (ValueError)."""
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
    return req


def read_msg(js: Context, name: str, req: dict[str, Any], direct: bool) -> RawStreamMsg:
    """One stored message of stream ``name``: by direct get, or from the leader."""
    return raw_msg(name, _direct.get_msg(js, name, req, direct))


def raw_msg(name: str, m: _direct.StoredMsg) -> RawStreamMsg:
    """A message of stream ``name`` as ``get_msg`` gives it: the publisher's headers alone."""
    hdrs = m.hdr
    stream = name
    if hdrs is None:
        user = None
    elif m.direct:
        stream = _direct._header_value(hdrs, _direct.STREAM_HDR) or stream
        user = _direct.user_headers(hdrs)
        hdrs = _headers.encode(user) if user else None
    else:
        user = _headers.decode(hdrs)[2]
    return RawStreamMsg(
        subject=m.subject,
        seq=m.seq,
        data=m.data,
        hdrs=hdrs,
        headers=(_first_values(user) or None) if user else None,
        stream=stream,
        time=_direct.ns_datetime(m.time) if isinstance(m.time, int) else _parse_time(m.time),
    )


def consumer_infos(js: Context, name: str) -> Iterator[ConsumerInfo]:
    """Info of every consumer of stream ``name``, page by page."""
    for item in js._paged(f"CONSUMER.LIST.{name}", "consumers", {}):
        yield ConsumerInfo.from_response(item)


def _first_values(multi: dict[str, list[str]]) -> dict[str, str]:
    return {k: v[0] for k, v in multi.items() if v}


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    parsed: datetime = RawStreamMsg._parse_utc_iso(value)
    return parsed
