"""A window of JetStream publishes sent in batches, for the data source's writers.

A Spark write publishes millions of rows from one thread, each with its own
``Nats-Msg-Id``; what it needs from the client is throughput and, per message,
"stored (new or duplicate) at sequence N" or "failed, with this error". Going
through ``publish_async`` costs a future, a headers dict and its encoding per
message. Here each message is an :class:`Ack` whose header block is built
once as bytes; a batch of them goes out in one write through the client's
request mux (``RequestMux.send_batch``: each request is its own reply
waiter, as the managed publisher's flights are), and the reader thread
completes each one with its PubAck, parsed by the C twin of
``jsack.pub_ack_fields`` in the common case.

At most ``window`` publishes wait for their acks; a sender waits for room for
at most ``timeout`` seconds. The window is the async-publish engine's
(:mod:`jsclient.jetstream.publish.engine`), with its one disconnect rule: a
publish whose frame the writer recorded as written whole to the socket that
was then lost is marked lost (the caller sends it again: same id, stored
once); every other one waits in the reconnect buffer, goes out on reconnect
and is acked normally, whenever the "disconnected" event comes. Acks that do
not come within ``timeout`` are marked lost too, and those still queued are
withdrawn first, so a row is never on its way twice. Every wait is bounded.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from jsclient import errors
from jsclient.api import PubAck
from jsclient.jetstream._wire import pub_headers
from jsclient.jetstream.publish.engine import PublishEngine, decode_reply
from jsclient.protocol.headers import encode as encode_headers

__all__ = ["FAILED", "LOST", "OK", "PENDING", "Ack", "AckWindow", "header_block"]

PENDING, OK, FAILED, LOST = 0, 1, 2, 3


def header_block(
    msg_id: str, expected_stream: str | None = None, headers: dict[str, Any] | None = None
) -> bytes:
    """``NATS/1.0`` header block with the user's headers, the Msg-Id and the expected stream.

    A ``Nats-Msg-Id`` among ``headers`` is dropped: the id is the data source's.
    """
    if not msg_id or "\r" in msg_id or "\n" in msg_id:
        raise errors.BadHeaderError(f"jetstream: invalid message id {msg_id!r}")
    own = {k: v for k, v in headers.items() if k.lower() != "nats-msg-id"} if headers else None
    return encode_headers(pub_headers(own, msg_id, expected_stream or None, None, None, None))


class Ack:
    """One publish: the request the client sends and the outcome the reader fills in."""

    __slots__ = (
        "_hdr",
        "_token",
        "_wend",
        "_wlen",
        "body",
        "duplicate",
        "error",
        "row",
        "seq",
        "state",
        "subject",
        "win",
    )

    def __init__(self, win: AckWindow, row: int, subject: str, body: bytes, hdr: bytes) -> None:
        self.win = win
        self.row = row
        self.subject = subject
        self.body = body
        self._hdr = hdr
        self._token: str | None = None
        self.state = PENDING
        self.seq = 0
        self.duplicate = False
        self.error: BaseException | None = None
        self._wend = 0  # where its frame ends in the write stream (the engine's rule)
        self._wlen = 0

    def again(self) -> Ack:
        """The same message (same subject, payload, headers, id) as a new request."""
        return Ack(self.win, self.row, self.subject, self.body, self._hdr)

    def deliver(self, msg: Any) -> None:
        # The request mux's waiter protocol, on the reader thread (None: the
        # connection closed). Decode (the engine's ack matching) and record;
        # never block.
        win = self.win
        r = decode_reply(self.subject, msg)
        if isinstance(r, tuple):
            win.finish_ok(self, r[1], False)
        elif isinstance(r, PubAck):
            win.finish_ok(self, r.seq, bool(r.duplicate))
        elif msg is None or isinstance(r, errors.NoStreamResponseError):
            # Closed, or a 503: lost, not failed: the writer sends lost rows
            # again (same ids), the publish paths' 503 rule at batch scale.
            win.finish(self, LOST, r)
        else:
            win.finish(self, FAILED, r)


class AckWindow(PublishEngine[Ack]):
    """Sends :class:`Ack` batches with at most ``window`` unacknowledged (see module doc)."""

    def __init__(self, nc: Any, window: int, timeout: float) -> None:
        self.nc = nc
        self.window = max(1, window)
        self.timeout = timeout
        self._lock = threading.Lock()  # an ack's state changes once, under it
        # The engine's pending set and window: full at ``window``, resumes at half.
        self._init_engine(nc, self.window, self.window // 2)
        # Sent and not yet taken by the caller, in send order (the caller pops
        # finished ones from the left).
        self.inflight: deque[Ack] = deque()
        self._listen()

    def close(self) -> None:
        self._unlisten()

    # -- reader / callback threads -------------------------------------------

    def finish_ok(self, ack: Ack, seq: int, duplicate: bool) -> None:
        with self._lock:
            if ack.state != PENDING:
                return
            ack.seq = seq
            ack.duplicate = duplicate
            ack.state = OK
            self._pending.pop(ack, None)
        self._window.released()

    def finish(self, ack: Ack, state: int, error: BaseException) -> None:
        with self._lock:
            if ack.state != PENDING:
                return
            ack.error = error
            ack.state = state
            self._pending.pop(ack, None)
        self._window.released()

    def _lost(self, ack: Ack, exc: BaseException) -> None:
        # Events thread: the engine took the token back (a disconnect, or the
        # close): the writer sends the message again, same id.
        self.finish(ack, LOST, exc)

    # -- the sending thread ----------------------------------------------------

    def submit(self, acks: list[Ack]) -> None:
        """Send ``acks`` once there is room, a window at most per write; they join ``inflight``.

        Those that cannot go (bad subject, too large, connection closed) finish at once.
        """
        window = self.window
        for i in range(0, len(acks), window):
            self._submit(acks[i : i + window] if len(acks) > window else acks)

    def _submit(self, acks: list[Ack]) -> None:
        self._wait(self.window - len(acks), what="room in the publish window")
        self._pending.update(dict.fromkeys(acks))  # before the write: the ack may come first
        self.inflight.extend(acks)
        failed = self.nc._mux.send_batch(acks)
        for ack, exc in failed:
            refused = isinstance(exc, errors.BadSubjectError | errors.MaxPayloadError)
            self.finish(ack, FAILED if refused else LOST, exc)
        if acks[-1]._wend <= self._conn.lost_written:  # a loss during the write
            for ack in acks:
                if ack.state == PENDING:
                    self._check_sent(ack)

    def drain(self) -> None:
        """Wait (at most ``timeout``) for every outstanding ack; mark the missing ones lost."""
        try:
            self._wait(0, what="the last acks")
        except errors.TimeoutError as exc:
            self._give_up(self.inflight, exc)

    def _give_up(self, acks: Iterable[Ack], exc: BaseException) -> None:
        # The engine's claim: the token back (a reply that came wins), the frame
        # out of the queue if it is still there; the caller sends the row again.
        for ack, _ in self._claim([a for a in list(acks) if a.state == PENDING]):
            self.finish(ack, LOST, exc)

    def _wait(self, limit: int, what: str) -> None:
        """Until at most ``limit`` are outstanding (TimeoutError after ``timeout`` s).

        The acks of messages written to a socket that was lost will not come:
        the engine marks them lost (the caller sends them again) and the
        window wakes this wait.
        """
        deadline = time.monotonic() + self.timeout
        if not self._window.wait_below(max(0, limit), deadline):
            raise errors.TimeoutError(
                f"nats: no acks for {self.timeout:g} s while waiting for {what} "
                f"({len(self._pending)} publishes unacknowledged)"
            )
