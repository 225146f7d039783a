"""Wire formats of JetStream: API answers, publish acks, publish headers.

One decoder for every API answer (a JSON object, or the typed error its
``error`` object names), one PubAck parser (the common ack is read by the
C-accelerated ``jsack.pub_ack_fields``; this runs on the reader thread once
per async publish), one place that turns publish options (and a per-message TTL) into headers.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from jsclient import _impl, errors
from jsclient.api import PubAck

if TYPE_CHECKING:
    from jsclient.protocol.headers import HeadersIn

_PUBACK_FIELDS = frozenset({"stream", "seq", "domain", "duplicate", "val"})
_pub_ack_fields = _impl.jsack.pub_ack_fields

#: The one 503 rule of every publish path (sync and async publish, the managed
#: Publisher, the Spark sink): a "no responders" answer means the stream may be
#: starting or electing a leader, so the same message is sent again after
#: PUBLISH_RETRY_WAIT seconds, at most PUBLISH_RETRY_ATTEMPTS times (nats.go's
#: defaults) and only within the publish's time; then NoStreamResponseError.
PUBLISH_RETRY_ATTEMPTS = 2
PUBLISH_RETRY_WAIT = 0.25

MSG_ID = "Nats-Msg-Id"
EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
TTL = "Nats-TTL"


def ttl_value(ttl: float | str) -> str:
    """A per-message TTL (ADR-43) as the ``Nats-TTL`` header gives it.

    Seconds (at least one; the server keeps whole seconds) or ``"never"``
    (the message outlives the stream's max_age).
    """
    if isinstance(ttl, str):
        if ttl.lower() == "never":
            return "never"
        raise ValueError(f"a TTL must be seconds or 'never', got {ttl!r}")
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl >= 1:
        raise ValueError(f"a TTL must be at least 1 second, got {ttl!r}")
    if ttl == int(ttl):
        return f"{int(ttl)}s"
    return f"{round(ttl * 1000)}ms"


def decode_api(data: bytes, what: str) -> dict[str, Any]:
    """The JSON object of an API answer, or the typed error it carries."""
    try:
        resp = json.loads(data)
    except ValueError:
        resp = None
    if not isinstance(resp, dict):
        raise errors.JetStreamError(f"nats: invalid JetStream response ({what}): {data[:80]!r}")
    err = resp.get("error")
    if err is not None:
        raise errors.api_error(err if isinstance(err, dict) else {"description": str(err)})
    return resp


def parse_pub_ack(data: bytes) -> PubAck:
    # The common ack, exactly {"stream":"<name>","seq":<digits>}, is read by the
    # (C-accelerated) jsack.pub_ack_fields: this runs on the reader thread once
    # per publish. Anything else (escapes, duplicate, domain, errors) goes
    # through the JSON decoder.
    fields = _pub_ack_fields(data)
    if fields is not None:
        return PubAck(stream=fields[0], seq=fields[1])
    resp = decode_api(data, "publish ack")
    seq = resp.get("seq")
    if not resp.get("stream") or type(seq) is not int:
        raise errors.JetStreamError(
            f"nats: JetStream publish response without stream or seq: {data[:80]!r}"
        )
    if resp.keys() <= _PUBACK_FIELDS:
        # The usual {"stream", "seq"[, "duplicate", "domain"]}: skip from_response's
        # per-call dataclass field scan (this runs on the reader thread per ack).
        return PubAck(**resp)
    pub_ack: PubAck = PubAck.from_response(resp)
    return pub_ack


def may_resend(resends: int, time_left: float | None = None) -> bool:
    """The 503 rule: may a publish answered 503 after ``resends`` re-sends go again?"""
    return resends < PUBLISH_RETRY_ATTEMPTS and (
        time_left is None or time_left > PUBLISH_RETRY_WAIT
    )


def status_reply_error(subject: str, status: tuple[int, str] | None) -> errors.Error:
    """The error of a publish answered by a status instead of an ack (503 no longer resent)."""
    if status is not None and status[0] == 503:
        return errors.NoStreamResponseError(f"nats: no stream answered a publish on {subject}")
    why = f" (status {status[0]} {status[1]})" if status is not None else ""
    return errors.JetStreamError(f"nats: empty JetStream publish response{why}")


def pub_headers(
    headers: HeadersIn | None,
    msg_id: str | None,
    expected_stream: str | None,
    expected_last_seq: int | None,
    expected_last_subject_seq: int | None,
    expected_last_msg_id: str | None,
    ttl: float | str | None = None,
) -> HeadersIn | None:
    if (
        msg_id is None
        and expected_stream is None
        and expected_last_seq is None
        and expected_last_subject_seq is None
        and expected_last_msg_id is None
        and ttl is None
    ):
        return headers
    h: dict[str, Any] = dict(headers) if headers else {}
    if msg_id is not None:
        h[MSG_ID] = msg_id
    if expected_stream is not None:
        h[EXPECTED_STREAM] = expected_stream
    if expected_last_seq is not None:
        h[EXPECTED_LAST_SEQ] = str(int(expected_last_seq))
    if expected_last_subject_seq is not None:
        h[EXPECTED_LAST_SUBJECT_SEQ] = str(int(expected_last_subject_seq))
    if expected_last_msg_id is not None:
        h[EXPECTED_LAST_MSG_ID] = expected_last_msg_id
    if ttl is not None:
        h[TTL] = ttl_value(ttl)
    return h
