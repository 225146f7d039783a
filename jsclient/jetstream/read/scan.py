"""One read of what a stream holds now: :func:`scan`, for KV ``keys``/``history``/
``purge_deletes`` and ``counters.get_many``.

An :class:`~jsclient.jetstream.read.reader.OrderedReader` is made on the
filters and read a routed batch at a time until the message whose delivery
left none pending: what was there when the read began, nothing later. If that
last message went away meanwhile (an age limit or a TTL ran out), the server is
asked whether anything is left instead of waiting for it. The consumer goes to
the connection's deleter when the read ends (it would expire on its own anyway).

A scan is one-shot, so it is bounded in time: when no message comes for
``timeout`` seconds (the JetStream context's timeout by default) while the
messages it waits for are still due -- the server is away, or stopped
answering -- it raises :class:`~jsclient.errors.TimeoutError` (issue 32,
``tests/integration/test_scan_bounds.py``). A server restart shorter than that
is ridden out: the ordered consumer resumes after the last message read.

Memory: what the server may send ahead of the reader is bounded by messages
*and* bytes (issue 32): pulls are counted in messages, the next one asked for
when half of what was asked for is read, and each carries half of
``max_buffered_bytes`` (8 MiB by default) as its ``max_bytes``, so at most two
are open and at most that many bytes are buffered per reader, whatever the
values' sizes (:func:`~jsclient.jetstream.read.reader.bounded_messages`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from jsclient import errors
from jsclient.api import DeliverPolicy
from jsclient.jetstream.read.reader import (
    MAX_BUFFERED_BYTES,
    Entry,
    OrderedReader,
    bounded_messages,
    buffer_limit,
)

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context

__all__ = ["MAX_BUFFERED_BYTES", "SCAN_BATCH", "bounded_messages", "buffer_limit", "scan"]

#: Messages per pull: enough to keep the server busy, small enough to bound memory.
SCAN_BATCH = 1000

_mono = time.monotonic


def scan(
    js: Context,
    stream: str,
    filters: list[str],
    deliver_policy: DeliverPolicy,
    *,
    headers_only: bool = False,
    name: str = "scan",
    timeout: float | None = None,
    max_buffered_bytes: int | None = None,
) -> Iterator[Entry]:
    """``(message, stream sequence, pending, time in ns)`` for what ``filters``
    match now, in stream order (see the module docstring). TimeoutError when
    nothing comes for ``timeout`` seconds (default: the context's timeout).
    ``name`` (who scans) named the cleanup thread of each scan; the
    connection's one deleter has replaced those, and it is kept for callers."""
    del name
    stall = js._timeout if timeout is None else timeout
    if not stall > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    max_bytes = buffer_limit(js, max_buffered_bytes)
    reader = OrderedReader(
        js, stream, filters, deliver_policy, headers_only=headers_only, inactive_threshold=30.0
    )
    try:
        if not reader.pending:
            return
        reader.open(SCAN_BATCH, max_bytes)
        it = reader.it  # the pulls (test_scan_bounds looks at a paused scan's)
        assert it is not None
        read = reader.read
        caught_up = reader.caught_up
        buf: list[Entry] = []
        while True:
            try:
                if not read(buf, _mono() + stall, caught_up):
                    return  # what was pending went away meanwhile
            except errors.TimeoutError:
                raise errors.TimeoutError(
                    f"nats: no message of stream {stream} came in {stall:g} s"
                ) from None
            except errors.Error:
                yield from buf  # what came before the error, then the error
                raise
            for item in buf:
                if item[2] == 0:
                    yield item
                    return
                yield item  # last, not an if: see tests/unit/test_interrupt_cover.py
            buf.clear()
    finally:
        reader.close()
