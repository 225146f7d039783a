"""The one ordered reader of the stores: :class:`OrderedReader`, what scans
(:mod:`~jsclient.jetstream.read.scan`), watchers
(:mod:`~jsclient.jetstream.read.watcher`) and object reads
(:class:`~jsclient.jetstream.obj._reader.ObjectReader`) read a stream with.

It makes an ordered consumer (ack none, in memory) on the subjects it reads and
takes what it delivers a routed batch at a time, each message with its stream
sequence, pending count and time in ns (``Entry``). Waits are cut in slices of
at most 1 s: after a slice in which nothing came, the caller may end the wait
(``idle``), e.g. a scan asking the server whether anything is left. Closing it
stops the pulls and hands its consumer to the connection's deleter
(:mod:`jsclient.jetstream.consume.deleter`).

Memory: what the server may send ahead of the reader is bounded by messages
*and* bytes (issue 32): pulls are counted in messages, the next one asked for
when half of what was asked for is read, and each carries half of
``max_buffered_bytes`` (8 MiB by default) as its ``max_bytes``, so at most two
are open and at most that many bytes are buffered per reader, whatever the
values' sizes (:func:`bounded_messages`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from jsclient import errors
from jsclient.jetstream.consume.contexts import MessagesContext
from jsclient.jetstream.consume.deleter import delete_later
from jsclient.jetstream.consume.engine import PullOptions, positive_int

if TYPE_CHECKING:
    from jsclient.api import DeliverPolicy
    from jsclient.jetstream._ctx import Context
    from jsclient.jetstream.consume.ordered import OrderedConsumer
    from jsclient.msg import Msg

__all__ = ["MAX_BUFFERED_BYTES", "Entry", "OrderedReader", "bounded_messages", "buffer_limit"]

#: What a reader hands out: (message, stream sequence, pending, time in ns).
Entry = tuple["Msg", int, int, int]

#: Bytes of messages a reader (scan, watcher, object read) lets the server send
#: ahead of what it took: its buffer's bound (``max_buffered_bytes``).
MAX_BUFFERED_BYTES = 8 * 1024 * 1024
#: Room for a message's subject, reply and headers beyond the largest payload.
_MSG_OVERHEAD = 64 * 1024
#: Longest single wait: how often a blocked reader looks at ``idle`` again.
SLICE = 1.0

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


class OrderedReader:
    """An ordered consumer on ``filters`` of ``stream``, read a batch at a time.

    Made, it has made its consumer (``pending`` is what that had to deliver
    then); :meth:`open` starts the bounded pulls, :meth:`read` takes what they
    deliver, :meth:`close` (idempotent, never blocks) ends it.
    """

    __slots__ = ("_closed", "_it", "oc")

    def __init__(
        self,
        js: Context,
        stream: str,
        filters: list[str],
        policy: DeliverPolicy,
        *,
        start_seq: int | None = None,
        headers_only: bool = False,
        inactive_threshold: float = 300.0,
    ) -> None:
        self._it: MessagesContext | None = None
        self._closed = False
        self.oc: OrderedConsumer = js.ordered_consumer(
            stream,
            filter_subjects=filters,
            deliver_policy=policy,
            opt_start_seq=start_seq,
            headers_only=headers_only or None,
            inactive_threshold=inactive_threshold,
        )

    @property
    def it(self) -> MessagesContext | None:
        """The bounded pulls (None until :meth:`open`)."""
        return self._it

    @property
    def pending(self) -> int:
        """What the consumer had to deliver when it was made (its info's ``num_pending``)."""
        info = self.oc.cached_info
        return int(info.num_pending or 0) if info is not None else 0

    def open(self, max_messages: int, max_bytes: int) -> None:
        """Start pulling: at most ``max_messages`` and ``max_bytes`` ahead of what
        was read (see :func:`bounded_messages`)."""
        try:
            self._it = bounded_messages(self.oc, max_messages, max_bytes)
        except BaseException:
            self.close()
            raise

    def read(
        self,
        out: list[Entry],
        deadline: float | None,
        idle: Callable[[], bool] | None = None,
    ) -> bool:
        """Wait for the next routed batch and append what it delivers to ``out``:
        True once ``out`` holds something.

        Waits in slices of at most :data:`SLICE` until ``deadline`` (monotonic;
        None: no limit), then raises TimeoutError; after each slice in which
        nothing came, ``idle()`` may end the wait (False). MsgIteratorClosedError
        once closed; another error is raised with ``out`` holding what came before it.
        """
        it = self._it
        if it is None:
            raise errors.MsgIteratorClosedError()
        next_batch = it._next_batch
        while True:
            wait = SLICE if deadline is None else min(SLICE, deadline - _mono())
            if wait <= 0:
                raise errors.TimeoutError()
            try:
                next_batch(wait, out)
            except errors.TimeoutError:
                if idle is not None and idle():
                    return False
                continue
            if out:
                return True

    def caught_up(self) -> bool:
        """Has the consumer nothing left to deliver beyond what was read?

        Asked of the server (``OrderedConsumer._caught_up``), and only of one
        that answers: asked while disconnected, the question would wait out its
        own timeout. What was pending may have gone meanwhile (an age limit or
        a TTL ran out) and will never come."""
        oc = self.oc
        return bool(oc._js._client.is_connected and oc._caught_up())

    def close(self) -> None:
        """Stop pulling; the consumer is deleted off the caller's path."""
        if self._closed:
            return
        self._closed = True
        it = self._it
        if it is not None:
            it.stop()
        oc = self.oc
        delete_later(oc._js, oc.stream_name, oc.name)
