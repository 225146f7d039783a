"""One read of what a stream holds now: :func:`scan`, for KV ``keys``/``history``/
``purge_deletes`` and ``counters.get_many``; and :func:`bounded_messages`, the
pull every library reader of an ordered consumer uses (scans, watchers, object
reads).

An ordered consumer (ack none, in memory) is made on the filters and read a
routed batch at a time until the message whose delivery left none pending:
what was there when the read began, nothing later. If that last message went
away meanwhile (an age limit or a TTL ran out), the server is asked whether
anything is left instead of waiting for it. The consumer is deleted on a
helper thread when the read ends (it would expire on its own anyway).

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
values' sizes (:func:`bounded_messages`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from jsclient import errors
from jsclient.api import DeliverPolicy
from jsclient.jetstream.consume.contexts import MessagesContext
from jsclient.jetstream.consume.engine import PullOptions, positive_int

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.consume.ordered import OrderedConsumer
    from jsclient.msg import Msg

#: Messages per pull: enough to keep the server busy, small enough to bound memory.
SCAN_BATCH = 1000
#: Bytes of messages a reader (scan, watcher, object read) lets the server send
#: ahead of what it took: its buffer's bound (``max_buffered_bytes``).
MAX_BUFFERED_BYTES = 8 * 1024 * 1024
#: Room for a message's subject, reply and headers beyond the largest payload.
_MSG_OVERHEAD = 64 * 1024
#: How long a read waits for a message before it asks whether any is left.
_WAIT = 1.0

_mono = time.monotonic


def buffer_limit(js: Context, max_buffered_bytes: int | None) -> int:
    """What a reader buffers at most: ``max_buffered_bytes`` (default
    :data:`MAX_BUFFERED_BYTES`), raised to two messages of the largest size the
    server accepts (each of its two open pulls carries half of it, and a pull
    whose ``max_bytes`` is below a message's size never gets that message)."""
    limit = MAX_BUFFERED_BYTES if max_buffered_bytes is None else max_buffered_bytes
    positive_int("max_buffered_bytes", limit)
    largest = int(getattr(js._client, "max_payload", 0) or 0)
    # Two pulls of half of it each (see bounded_messages).
    return max(limit, 2 * (largest + _MSG_OVERHEAD)) if largest else limit


def bounded_messages(
    oc: OrderedConsumer,
    max_messages: int,
    max_bytes: int,
    *,
    expires: float = 30.0,
    heartbeat: float = 5.0,
) -> MessagesContext:
    """``oc.messages()`` buffering at most ``max_messages`` and ``max_bytes``
    (``messages()`` bounds one or the other), no missed-heartbeat errors.

    Pulls are counted in messages with the threshold at half, so the next pull
    goes out while the last is still delivering (as ``messages()`` does), and
    each carries half of ``max_bytes``: at most two are open, so at most
    ``max_bytes`` is buffered (``PullOptions.pull_bytes``).
    """
    opts = PullOptions(
        positive_int("max_messages", max_messages),
        0,
        expires,
        heartbeat,
        max(1, max_messages // 2),
        0,
        pull_bytes=max(1, positive_int("max_bytes", max_bytes) // 2),
    )
    return oc._open_messages(opts, None)


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
) -> Iterator[tuple[Msg, int, int, int]]:
    """``(message, stream sequence, pending, time in ns)`` for what ``filters``
    match now, in stream order (see the module docstring); ``name`` names the
    cleanup thread. TimeoutError when nothing comes for ``timeout`` seconds
    (default: the context's timeout)."""
    stall = js._timeout if timeout is None else timeout
    if not stall > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    max_bytes = buffer_limit(js, max_buffered_bytes)
    oc = js.ordered_consumer(
        stream,
        filter_subjects=filters,
        deliver_policy=deliver_policy,
        headers_only=headers_only or None,
        inactive_threshold=30.0,
    )
    try:
        info = oc.cached_info
        if info is None or not info.num_pending:
            return
        client = js._client
        with bounded_messages(oc, SCAN_BATCH, max_bytes) as it:
            next_batch = it._next_batch
            buf: list[tuple[Msg, int, int, int]] = []
            deadline = _mono() + stall
            while True:
                try:
                    next_batch(min(_WAIT, max(deadline - _mono(), 0.001)), buf)
                except errors.TimeoutError:
                    # Only a server that answers can say nothing is left (an
                    # age limit or TTL took what was pending); asked while
                    # disconnected, the question would wait out its own timeout.
                    if client.is_connected and oc._caught_up():
                        return
                    if _mono() >= deadline:
                        raise errors.TimeoutError(
                            f"nats: no message of stream {stream} came in {stall:g} s"
                        ) from None
                    continue
                except errors.Error:
                    yield from buf  # what came before the error, then the error
                    raise
                if not buf:
                    continue  # a control item: no progress
                for item in buf:
                    yield item
                    if item[2] == 0:
                        return
                buf.clear()
                deadline = _mono() + stall
    finally:
        delete_later(oc, name)


def delete_later(oc: OrderedConsumer, what: str, action: str = "cleanup") -> None:
    """Delete a read's consumer off the caller's path (``jsclient-<what>-<action>-…``)."""
    oc._delete_in_background(oc.name, f"jsclient-{what}-{action}-{oc.name}")
