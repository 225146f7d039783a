"""Direct gets: the one path for reading stored messages by direct get.

**When.** ``$JS.API.DIRECT.GET.<stream>`` is answered (by any replica) when
the stream's own ``allow_direct`` is set: :func:`allows_direct`, the rule for
``Stream.get_msg``, ``KeyValue.get`` and the object store's meta reads alike.
``mirror_direct`` does not make a mirror answer on its own name: it makes it
answer its *origin's* direct gets beside the origin (nats-server
``subscribeToMirrorDirect``), so it says nothing about a request addressed to
the mirror; nats.go (``stream.getMsg``, ``kv.go``) decides on ``AllowDirect``
alone too. Where the rule says no, :func:`get_msg` asks the leader
(``STREAM.MSG.GET``) and returns the same :class:`StoredMsg`.

**Errors.** One mapping (:func:`status_error`): ``404`` (the leader's
``10037``) is MessageNotFoundError, which ``KeyValue.get`` turns into
KeyNotFoundError and a meta read into "no such object"; no responders is
ServiceUnavailableError (code 503); no answer in time is TimeoutError.

**Batched** (ADR-31, nats-server 2.11+): one read over many pages.
A batched direct get is one request on ``$JS.API.DIRECT.GET.<stream>`` whose
answers come to an inbox: the stored messages (each with the headers
``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence``, ``Nats-Time-Stamp``,
``Nats-Num-Pending`` and ``Nats-Last-Sequence``), then a ``204 EOB`` status
carrying how many matching messages are left (``Nats-Num-Pending``), the last
sequence sent (``Nats-Last-Sequence``) and, for a multi-subject get, the
sequence the read is pinned to (``Nats-UpTo-Sequence``). A request that
matches nothing is answered ``404`` alone. The server sends a page without
flow control, so :class:`DirectRead` asks for at most ``page_msgs`` messages
and ``page_bytes`` bytes per request, sizes the inbox's pending limits to
one page (nothing is dropped however slowly the caller iterates), and sends
the next request only once the caller has taken the page's last message:
never more than one page is buffered.

What the server says, as nats-server 2.15.1 sends it:

- the byte limit counts subject + stored headers + payload, and the message
  that reaches it is still sent (so every page brings at least one);
- ``404 Message Not Found`` (``No Results`` for multi-subject) when nothing
  matches from the start of the request; running out mid-page ends the page
  with an EOB instead;
- ``413 Too Many Results`` when a multi-subject get matches more than 1024
  subjects up to its sequence (counted before anything is sent, whatever
  ``seq`` or ``batch`` say, so paging cannot avoid it);
- no responders (a ``503`` status) when the stream does not allow direct
  gets or does not exist;
- a server older than 2.11 ignores ``batch``: it answers one message without
  ``Nats-Num-Pending`` and no EOB, or ``408`` for a request it cannot read
  (``start_time``, ``multi_last``). Both are checked against the JetStream
  API level (``$JS.API.INFO``), asked only then.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Generator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from jsclient import _impl, errors
from jsclient.protocol import headers as _headers

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.msg import Msg

_status_of = _impl.status.status_of
_header_value = _impl.jsheaders.header_value
_direct_headers = _impl.jsheaders.direct_headers

STREAM_HDR = "Nats-Stream"
SUBJECT_HDR = "Nats-Subject"
SEQ_HDR = "Nats-Sequence"
TIME_HDR = "Nats-Time-Stamp"
PENDING_HDR = "Nats-Num-Pending"
LAST_SEQ_HDR = "Nats-Last-Sequence"
UPTO_HDR = "Nats-UpTo-Sequence"
#: The headers the server adds to a direct get's answer: they describe the
#: stored message rather than belong to it.
SERVER_HEADERS = frozenset(
    {STREAM_HDR, SUBJECT_HDR, SEQ_HDR, TIME_HDR, PENDING_HDR, LAST_SEQ_HDR, UPTO_HDR}
)

#: Messages and bytes one request asks for at most (one page).
PAGE_MSGS = 10_000
PAGE_BYTES = 8 * 1024 * 1024
#: A page's last message may pass the byte limit by up to one message, and a
#: message is at most the server's max_payload (64 MiB at most).
_ONE_MESSAGE = 64 * 1024 * 1024
#: The JetStream API level of nats-server 2.11, the first with batched gets.
REQUIRED_API_LEVEL = 1


def rfc3339(when: datetime) -> str:
    """A time as the direct-get API takes it (UTC, RFC 3339); naive means UTC."""
    if not isinstance(when, datetime):
        raise TypeError(f"a time must be a datetime, not {type(when).__name__}")
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def uint(raw: str | None) -> int | None:
    """A header's ASCII-digit value as an int, else None."""
    if raw is None or not (raw.isascii() and raw.isdigit()):
        return None
    return int(raw)


def check_count(name: str, value: Any, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def check_subject(name: str, subject: Any) -> None:
    if not isinstance(subject, str) or not subject or any(c in subject for c in " \t\r\n"):
        raise errors.BadSubjectError(f"nats: {name} must be a subject, got {subject!r}")


# -- one message ------------------------------------------------------------------


def allows_direct(config: Any) -> bool:
    """Whether a stream with this config answers direct gets on its own name."""
    return bool(config.allow_direct)


class StoredMsg(NamedTuple):
    """One stored message as :func:`get_msg` read it, by direct get or from the leader."""

    subject: str | None
    seq: int | None
    data: bytes
    #: A direct get's whole header block (the server's :data:`SERVER_HEADERS`
    #: in it: ``direct``), else the stored headers; None when there are none.
    hdr: bytes | None
    #: When it was stored: ns since the epoch (a direct get), else the server's
    #: RFC 3339 text (the leader's answer, or a stamp not in the server's form).
    time: int | str | None
    direct: bool


_stored = tuple.__new__  # a StoredMsg without the Python-level __new__ (hot: KeyValue.get)


def get_msg(js: Context, stream: str, req: dict[str, Any], direct: bool) -> StoredMsg:
    """The message ``req`` names (``seq``, ``last_by_subj``, ``next_by_subj``).

    By direct get when ``direct`` (see :func:`allows_direct`), else from the
    leader. MessageNotFoundError when there is none; ServiceUnavailableError
    when no server answers the direct get; TimeoutError.
    """
    if not direct:
        return _leader_get(js, stream, req)
    last = req.get("last_by_subj")
    if last is not None and len(req) == 1:
        # The subject form: no body to write or for the server to parse.
        subject = f"{js._prefix}.DIRECT.GET.{stream}.{last}"
        body = b""
    else:
        subject = f"{js._prefix}.DIRECT.GET.{stream}"
        body = json.dumps(req, separators=(",", ":")).encode()
    try:
        msg = js._client.request(subject, body, timeout=js._timeout)
    except errors.NoRespondersError:
        raise errors.ServiceUnavailableError(
            code=503, description=f"no responders on {subject}", stream=stream
        ) from None
    except errors.TimeoutError:
        asked = f"{subject} {body.decode()}" if body else subject
        raise errors.TimeoutError(
            f"nats: timeout waiting for a direct get answer on {asked}"
        ) from None
    raw = msg._hdr
    if raw is None:
        raise errors.JetStreamError(f"nats: direct get answer without headers on {subject}")
    st = _status_of(raw)
    if st is not None and st[0] >= 300:
        raise status_error(st[0], st[1], stream)
    # The fields as the batched read finds them: one (C-accelerated) pass.
    subj, seq, ns, _pending, _last, _others = _direct_headers(raw)
    if ns is None:
        ns = _header_value(raw, TIME_HDR)
    return _stored(StoredMsg, (subj, seq if seq >= 0 else None, msg.data, raw, ns, True))


def _leader_get(js: Context, stream: str, req: dict[str, Any]) -> StoredMsg:
    m = js._api_request(f"STREAM.MSG.GET.{stream}", req)["message"]
    hdrs = m.get("hdrs")
    data = m.get("data")
    return StoredMsg(
        m.get("subject"),
        m.get("seq"),
        base64.b64decode(data) if data else b"",
        base64.b64decode(hdrs) if hdrs else None,
        m.get("time"),
        False,
    )


def user_headers(raw: bytes) -> dict[str, list[str]]:
    """The publisher's own headers in a direct get's answer (the server's left out)."""
    return {k: v for k, v in _headers.decode(raw)[2].items() if k not in SERVER_HEADERS}


def status_error(code: int, description: str, stream: str) -> errors.APIError:
    """The typed error of a direct get's status answer."""
    if code == 404:
        return errors.MessageNotFoundError(
            code=404,
            description=description or "Message Not Found",
            err_code=10037,
            stream=stream,
        )
    if code == 413:
        return errors.TooManyResultsError(
            code=413,
            description=(
                f"{description or 'Too Many Results'}: the subjects match more than the "
                f"server answers at once (1024); narrow or split them"
            ),
            stream=stream,
        )
    return errors.api_error({"code": code, "description": description, "stream": stream})


class DirectRead:
    """One batched direct get over as many pages as it takes.

    ``request`` is the first request's body without ``batch``/``max_bytes``;
    later pages continue after the last sequence read (and, for a
    multi-subject get, at the ``up_to_seq`` of the first page's EOB). The read
    ends after ``limit`` messages, once ``max_bytes`` have been read, or when
    the server has nothing more.
    """

    def __init__(
        self,
        js: Context,
        stream: str,
        request: dict[str, Any],
        *,
        limit: int | None,
        max_bytes: int | None,
        timeout: float | None = None,
        page_msgs: int | None = None,
        page_bytes: int | None = None,
    ) -> None:
        self._js = js
        self.stream = stream
        self._request = request
        self._limit = limit
        self._max_bytes = max_bytes
        self._timeout = js._timeout if timeout is None else timeout
        self._page_msgs = PAGE_MSGS if page_msgs is None else page_msgs
        self._page_bytes = PAGE_BYTES if page_bytes is None else page_bytes
        self._subject = f"{js._prefix}.DIRECT.GET.{stream}"
        self._multi = "multi_last" in request
        #: The last sequence read (0 before the first).
        self.last_seq = 0

    def messages(self) -> Generator[Msg, None, None]:
        """The stored messages as the server sends them (core messages; the
        stored subject, sequence and time are in their direct-get headers)."""
        client = self._js._client
        inbox = client.new_inbox()
        left = self._limit
        bytes_left = self._max_bytes
        page_msgs = self._page_msgs if left is None else min(self._page_msgs, left)
        page_bytes = self._page_bytes if bytes_left is None else min(self._page_bytes, bytes_left)
        sub = client.subscribe(
            inbox,
            pending_msgs_limit=page_msgs + 2,
            pending_bytes_limit=page_bytes + _ONE_MESSAGE,
        )
        next_msg = sub.next_msg
        timeout = self._timeout
        try:
            body = dict(self._request)
            first_page = True
            while True:
                n = page_msgs if left is None else min(page_msgs, left)
                nbytes = page_bytes if bytes_left is None else min(page_bytes, bytes_left)
                body["batch"] = n
                body["max_bytes"] = nbytes
                client.publish(self._subject, json.dumps(body).encode(), reply=inbox)
                msg = self._next(sub, first_page)
                raw = self._header(msg)
                st = _status_of(raw)
                any_msg = st is None
                if any_msg and _header_value(raw, PENDING_HDR) is None:
                    what = "an answer without Nats-Num-Pending"
                    self._old_server(what)
                    raise errors.JetStreamError(
                        f"nats: unexpected direct get answer from stream {self.stream!r}: {what}"
                    )
                while True:  # the test inside: see tests/unit/test_interrupt_cover.py
                    if st is not None:
                        break
                    if left is not None:
                        left -= 1
                    if bytes_left is not None:
                        bytes_left -= stored_size(msg, raw)
                    yield msg
                    try:
                        msg = next_msg(timeout)
                    except errors.TimeoutError:
                        msg = self._next(sub, False)  # raises the right error
                    raw = msg._hdr or self._header(msg)
                    st = _status_of(raw)
                code = st[0]
                if code == 404:
                    return
                if code != 204:
                    self._status_error(code, st[1], first_page)
                if sub.dropped:
                    raise errors.SlowConsumerError(sub.subject, sub.sid, sub.dropped)
                pending = uint(_header_value(raw, PENDING_HDR))
                last = uint(_header_value(raw, LAST_SEQ_HDR))
                if last:
                    self.last_seq = last
                if pending == 0 or (left is not None and left <= 0):
                    return
                if bytes_left is not None and bytes_left <= 0:
                    return
                if not any_msg and not last:
                    return  # an empty page (a multi get past its last match)
                if self._multi:
                    upto = uint(_header_value(raw, UPTO_HDR))
                    body.pop("up_to_time", None)
                    if upto:
                        body["up_to_seq"] = upto
                # The loop's body ends with plain statements, not an if: see
                # tests/unit/test_interrupt_cover.py.
                first_page = False
                body.pop("start_time", None)
                body["seq"] = self.last_seq + 1
        finally:
            try:
                sub.unsubscribe()
            except errors.Error:
                pass

    def _header(self, msg: Msg) -> bytes:
        raw = msg._hdr
        if raw is None:
            raise errors.JetStreamError(
                f"nats: direct get answer without headers on {self._subject}"
            )
        return raw

    def _next(self, sub: Any, first: bool) -> Msg:
        try:
            msg: Msg = sub.next_msg(timeout=self._timeout)
            return msg
        except errors.TimeoutError:
            if sub.dropped:
                raise errors.SlowConsumerError(sub.subject, sub.sid, sub.dropped) from None
            if first:
                self._unavailable(f"no answer within {self._timeout:g} s")
            raise errors.TimeoutError(
                f"nats: timeout waiting for a direct get answer from stream {self.stream!r} "
                f"after sequence {self.last_seq}"
            ) from None

    def _status_error(self, code: int, description: str, first: bool) -> None:
        if code == 503:
            self._unavailable("no responders")
        if code == 408:
            if first:
                self._old_server(f"408 {description}")
            raise errors.BadRequestError(code=408, description=description, stream=self.stream)
        raise status_error(code, description, self.stream)

    def _unavailable(self, why: str) -> None:
        """No server answered: a missing stream, or one without ``allow_direct``."""
        try:
            info = self._js._api_request(f"STREAM.INFO.{self.stream}")
        except errors.StreamNotFoundError:
            raise
        except errors.Error:
            info = {}
        if info and not (info.get("config") or {}).get("allow_direct"):  # see allows_direct
            raise errors.DirectGetNotAllowedError(
                code=503,
                description=f"stream {self.stream!r} does not allow direct gets (allow_direct "
                f"is false): {why}",
                stream=self.stream,
            )
        if why == "no responders":
            raise errors.ServiceUnavailableError(
                code=503, description=f"no responders on {self._subject}", stream=self.stream
            )
        raise errors.TimeoutError(
            f"nats: timeout waiting for a direct get answer from stream {self.stream!r} ({why})"
        )

    def _old_server(self, what: str) -> None:
        """A reply that a server without batched gets would send: raise
        BatchGetNotSupportedError if the API level says so, else return."""
        try:
            level = (self._js._api_request("INFO").get("api") or {}).get("level") or 0
        except errors.Error:
            level = None
        if level is not None and level < REQUIRED_API_LEVEL:
            raise errors.BatchGetNotSupportedError(
                f"nats: batched direct get needs nats-server 2.11 or later (JetStream API "
                f"level {REQUIRED_API_LEVEL}); the server reports level {level} and sent {what}",
                api_level=level,
            )


def stored_size(msg: Msg, raw: bytes) -> int:
    """What the server counts against ``max_bytes``: subject, stored headers, payload.

    The stored header block is the reply's less the direct-get headers the
    server added; when they are all there is, nothing was stored.
    """
    subject = _header_value(raw, SUBJECT_HDR) or ""
    size = len(subject) + len(msg.data)
    lines = raw.count(b"\r\n") - 2  # header lines: less the first line and the blank end
    if lines > 6:
        added = 0
        for name in (STREAM_HDR, SUBJECT_HDR, SEQ_HDR, TIME_HDR, PENDING_HDR, LAST_SEQ_HDR):
            value = _header_value(raw, name)
            if value is not None:
                added += len(name) + len(value) + 4
        size += len(raw) - added
    return size


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ns_datetime(ns: int) -> datetime:
    """Nanoseconds since the epoch as a UTC datetime (microseconds, exactly)."""
    return _EPOCH + timedelta(microseconds=ns // 1000)
