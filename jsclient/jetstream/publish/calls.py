"""The context's publish calls: ``js.publish`` (a request, retried on 503) and
``js.publish_async`` (headers checked and encoded here; the window of pending
acks is :mod:`jsclient.jetstream.publish.async_pub`, the context's ``_async``).

Both also take nats-py's keywords, so its calls run unchanged: ``stream=`` is
``expected_stream=``, ``msg_ttl=`` is ``ttl=``, and ``publish_async`` takes
``wait_stall=`` (how long this call may wait for room in a full window).

:class:`~jsclient.jetstream.context.JetStream` binds both as its methods.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.api import PubAck
from jsclient.jetstream._wire import (
    PUBLISH_RETRY_WAIT,
    may_resend,
    parse_pub_ack,
    pub_headers,
    status_reply_error,
)
from jsclient.protocol.headers import encode as encode_headers

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.protocol.headers import HeadersIn

__all__ = ["publish", "publish_async"]


def publish(
    js: Context,
    subject: str,
    payload: bytes = b"",
    *,
    headers: HeadersIn | None = None,
    msg_id: str | None = None,
    expected_stream: str | None = None,
    expected_last_seq: int | None = None,
    expected_last_subject_seq: int | None = None,
    expected_last_msg_id: str | None = None,
    ttl: float | str | None = None,
    timeout: float | None = None,
    stream: str | None = None,
    msg_ttl: float | str | None = None,
) -> PubAck:
    """Publish to a stream and wait for its ack.

    A 503 (no stream listening yet) is retried twice, 250 ms apart, within
    ``timeout`` (default: the context's), then NoStreamResponseError. A failed
    expectation raises its API error (WrongLastSequenceError, ...). ``ttl``
    (seconds, or ``"never"``; server 2.11, a stream with ``allow_msg_ttl``)
    removes the message after that long. ``stream`` and ``msg_ttl`` are
    nats-py's names for ``expected_stream`` and ``ttl`` (both at once: TypeError).
    """
    hdrs = _checked_headers(
        js,
        headers,
        msg_id,
        _alias("expected_stream", expected_stream, "stream", stream),
        expected_last_seq,
        expected_last_subject_seq,
        expected_last_msg_id,
        _alias("ttl", ttl, "msg_ttl", msg_ttl),
    )
    total = js._timeout if timeout is None else timeout
    deadline = time.monotonic() + total
    request = js._client.request
    retries = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise errors.TimeoutError(f"nats: timeout waiting for the publish ack on {subject}")
        try:
            msg = request(subject, payload, timeout=left, headers=hdrs)
            break
        except errors.NoRespondersError:
            if not may_resend(retries, deadline - time.monotonic()):
                raise status_reply_error(subject, (503, "No Responders")) from None
            retries += 1
            time.sleep(PUBLISH_RETRY_WAIT)
        except errors.TimeoutError:
            raise errors.TimeoutError(f"nats: timeout waiting for the publish ack on {subject}")
    return parse_pub_ack(msg.data)


def publish_async(
    js: Context,
    subject: str,
    payload: bytes = b"",
    *,
    headers: HeadersIn | None = None,
    msg_id: str | None = None,
    expected_stream: str | None = None,
    expected_last_seq: int | None = None,
    expected_last_subject_seq: int | None = None,
    expected_last_msg_id: str | None = None,
    ttl: float | str | None = None,
    ack_timeout: float | None = None,
    timeout: float | None = None,
    stream: str | None = None,
    msg_ttl: float | str | None = None,
    wait_stall: float | None = None,
) -> Future[PubAck]:
    """Publish without waiting; the future completes with the PubAck or the error.

    ``ack_timeout`` (or its alias ``timeout``) fails the future with
    TimeoutError if no ack arrives in time; by default the context's
    ``publish_async_timeout`` (its ``timeout``, 5 s, unless given). Blocks
    only while ``publish_async_max_pending`` publishes are already in
    flight, for up to the stall wait (``wait_stall`` seconds for this call,
    else the context's ``publish_async_stall_wait``), then raises
    TooManyStalledMsgsError. Done callbacks of the future run on the client's
    callback thread. ``stream`` and ``msg_ttl`` are nats-py's names for
    ``expected_stream`` and ``ttl`` (both at once: TypeError).
    """
    if (
        headers is None
        and msg_id is None
        and expected_stream is None
        and expected_last_seq is None
        and expected_last_subject_seq is None
        and expected_last_msg_id is None
        and ttl is None
        and stream is None
        and msg_ttl is None
        and timeout is None
        and wait_stall is None
    ):
        return js._async.publish(subject, payload, None, ack_timeout)  # the plain publish
    ack_timeout = _alias("ack_timeout", ack_timeout, "timeout", timeout)
    hdrs = _checked_headers(
        js,
        headers,
        msg_id,
        _alias("expected_stream", expected_stream, "stream", stream),
        expected_last_seq,
        expected_last_subject_seq,
        expected_last_msg_id,
        _alias("ttl", ttl, "msg_ttl", msg_ttl),
    )
    if wait_stall is not None:
        _check_stall(wait_stall)
    # Encoded once: retries re-send the same bytes.
    return js._async.publish(
        subject, payload, encode_headers(hdrs) if hdrs else None, ack_timeout, wait_stall
    )


def _alias(name: str, value: Any, alias: str, alias_value: Any) -> Any:
    """The value of an option given by its name or by its alias (TypeError: both)."""
    if alias_value is None:
        return value
    if value is not None:
        raise TypeError(f"give {name} or {alias}, not both")
    return alias_value


def _check_stall(wait_stall: float) -> None:
    """``wait_stall`` (nats-py's): seconds this call may wait for room in a full window."""
    if isinstance(wait_stall, bool) or not isinstance(wait_stall, int | float):
        raise TypeError(f"wait_stall must be seconds, not {type(wait_stall).__name__}")
    if not (wait_stall >= 0 and math.isfinite(wait_stall)):
        raise ValueError(f"wait_stall must be a finite number of seconds >= 0, got {wait_stall!r}")


def _checked_headers(js: Context, headers: HeadersIn | None, *expect_and_ttl: Any) -> Any:
    """The publish headers (``pub_headers``), and the server's API level checked
    for a TTL, after the TTL's own check: bad input asks nothing."""
    hdrs = pub_headers(headers, *expect_and_ttl)
    if expect_and_ttl[-1] is not None:  # ttl
        js._require_api_level(1, "per-message TTL")
    return hdrs
