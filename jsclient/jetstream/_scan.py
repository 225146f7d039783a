"""One read of what a stream holds now: :func:`scan`, for KV ``keys``/``history``/
``purge_deletes`` and ``counters.get_many``.

An ordered consumer (ack none, in memory) is made on the filters and read a
routed batch at a time until the message whose delivery left none pending:
what was there when the read began, nothing later. If that last message went
away meanwhile (an age limit or a TTL ran out), the server is asked whether
anything is left instead of waiting for it. The consumer is deleted on a
helper thread when the read ends (it would expire on its own anyway).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.api import DeliverPolicy

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.msg import Msg

#: Messages per pull: enough to keep the server busy, small enough to bound memory.
SCAN_BATCH = 1000
#: How long a read waits for a message before it asks whether any is left.
_WAIT = 1.0


def scan(
    js: Context,
    stream: str,
    filters: list[str],
    deliver_policy: DeliverPolicy,
    *,
    headers_only: bool = False,
    name: str = "scan",
) -> Iterator[tuple[Msg, int, int, int]]:
    """``(message, stream sequence, pending, time in ns)`` for what ``filters``
    match now, in stream order (see the module docstring); ``name`` names the
    cleanup thread."""
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
        with oc.messages(max_messages=SCAN_BATCH, err_on_missing_heartbeat=False) as it:
            buf: list[tuple[Msg, int, int, int]] = []
            while True:
                try:
                    it._next_batch(_WAIT, buf)
                except errors.TimeoutError:
                    if oc._caught_up():
                        return  # what was pending went away (age limit, TTL)
                    continue
                except errors.Error:
                    yield from buf  # what came before the error, then the error
                    raise
                for item in buf:
                    yield item
                    if item[2] == 0:
                        return
                buf.clear()
    finally:
        delete_later(oc, name)


def delete_later(oc: Any, what: str) -> None:
    """Delete a read's consumer off the caller's path (``jsclient-<what>-cleanup-…``)."""
    threading.Thread(
        target=oc._delete_quietly,
        args=(oc.name,),
        name=f"jsclient-{what}-cleanup-{oc.name}",
        daemon=True,
    ).start()
