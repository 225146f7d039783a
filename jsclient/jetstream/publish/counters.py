"""Distributed counters (ADR-49, server 2.12): ``counters = js.counters(stream)``.

A stream with ``allow_msg_counter`` keeps every subject as a counter: a
publish with ``Nats-Incr: <+/-digits>`` and no payload makes the server add
the delta to the subject's last value and store ``{"val":"<digits>"}``; the
PubAck carries the new total in ``val``. Values are decimal strings of any
size on the wire and Python ints here. Reading one counter is a get of the
subject's last message; reading many (wildcards allowed) is one ordered
consumer delivering the last message per subject, read in pulls bounded in
messages and bytes, and in time (see :mod:`jsclient.jetstream.read.scan`).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from jsclient import errors
from jsclient.api import DeliverPolicy
from jsclient.jetstream.read.scan import scan

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.manage.stream import Stream

INCR = "Nats-Incr"
# ASCII digits only, as the server writes them (int() would take " 5", "1_0", "٣").
_VALUE = re.compile(rb"[+-]?[0-9]+")


def parse_value(raw: str | bytes | None, where: str) -> int:
    """A counter value as the server writes it (``"-12"``), as an int."""
    b = raw.encode() if isinstance(raw, str) else raw
    if b is None or not _VALUE.fullmatch(b):
        raise errors.JetStreamError(f"nats: invalid counter value in {where}: {raw!r}")
    return int(b)


def value_of_body(data: bytes, where: str) -> int:
    """The value of a stored counter message, ``{"val":"<digits>"}``."""
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("val"), str):
        raise errors.JetStreamError(f"nats: {where} is not a counter value: {data[:80]!r}")
    return parse_value(body["val"], where)


class Counters:
    """The counters of one stream; get it with ``js.counters(stream)``."""

    def __init__(self, js: Context, stream: Stream) -> None:
        self._js = js
        self._stream = stream

    def __repr__(self) -> str:
        return f"<Counters stream={self._stream.name!r}>"

    @property
    def stream_name(self) -> str:
        """The name of the counters' stream."""
        return self._stream.name

    def add(self, subject: str, delta: int = 1, *, timeout: float | None = None) -> int:
        """Add ``delta`` (any int, negative too) to the counter; returns the new total."""
        if isinstance(delta, bool) or not isinstance(delta, int):
            raise TypeError(f"a counter delta must be an int, not {type(delta).__name__}")
        ack = self._js.publish(subject, b"", headers={INCR: f"{delta:+d}"}, timeout=timeout)
        return parse_value(ack.val, f"the publish ack on {subject}")

    def get(self, subject: str) -> int:
        """The counter's value; CounterNotFoundError when the subject has none."""
        try:
            msg = self._stream.get_msg(last_by_subject=subject)
        except errors.MessageNotFoundError as exc:
            raise errors.CounterNotFoundError(
                code=exc.code,
                description=f"no counter on {subject!r} in stream {self._stream.name}",
                err_code=exc.err_code,
                stream=self._stream.name,
                subject=subject,
            ) from None
        return value_of_body(msg.data or b"", f"the last message on {subject}")

    def get_many(self, *subjects: str, timeout: float | None = None) -> dict[str, int]:
        """The values of every counter the subjects match (wildcards allowed; none
        given: every counter of the stream), by subject. Subjects with no value
        are left out. TimeoutError when no value comes for ``timeout`` seconds
        (default: the JetStream context's timeout), e.g. while the server is away."""
        filters = list(dict.fromkeys(subjects)) or [">"]
        for f in filters:
            if not isinstance(f, str) or not f:
                raise ValueError(f"a counter subject must be a non-empty string, got {f!r}")
        out: dict[str, int] = {}
        for msg, _seq, _pending, _ts in scan(
            self._js,
            self._stream.name,
            filters,
            DeliverPolicy.LAST_PER_SUBJECT,
            name="counters",
            timeout=timeout,
        ):
            out[msg.subject] = value_of_body(msg.data, f"the last message on {msg.subject}")
        return out
