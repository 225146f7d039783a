"""Atomic batch publish (ADR-50, server 2.12): ``with js.atomic_batch() as b``.

Every message of a batch carries ``Nats-Batch-Id`` (a NUID) and
``Nats-Batch-Sequence`` (1, 2, ...). The server stages them and stores all of
them when the commit arrives, or none: the commit is the last message with
``Nats-Batch-Commit: 1``, or (server 2.14) an end-of-batch marker
``Nats-Batch-Commit: eob`` that is not stored itself. Its reply is the PubAck
of the last message, with the batch id and size.

The first message is a request: the server answers it at once with an empty
ack or an error (a stream without ``allow_atomic``, too many open batches), so
such refusals raise from the first ``add``. The following messages are plain
publishes (``ack_every=n`` makes every n-th a request too); anything the
server refuses among them, a gap (a message lost to a reconnect) or its
inactivity timeout abandons the batch, and the commit raises the typed error
(``AtomicPublishIncompleteBatchError``, ...). Leaving the ``with`` block without
a commit sends nothing more: the server drops the staged messages when the
batch times out (10 s), and nothing of it is ever stored.

A batch belongs to the thread that fills it: ``add`` and ``commit`` are not
meant to be called from several threads at once.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient.api import PubAck
from jsclient.jetstream._wire import decode_api, parse_pub_ack, pub_headers

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.protocol.headers import HeadersIn

BATCH_ID = "Nats-Batch-Id"
BATCH_SEQ = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"
COMMIT = "1"
COMMIT_EOB = "eob"

_OPEN, _COMMITTED, _DISCARDED, _FAILED = range(4)


class AtomicBatch:
    """An atomic batch; get one from ``js.atomic_batch()`` (see the module docstring)."""

    def __init__(
        self,
        js: Context,
        *,
        ack_every: int | None = None,
        timeout: float | None = None,
    ) -> None:
        if ack_every is not None and (
            isinstance(ack_every, bool) or not isinstance(ack_every, int) or ack_every < 1
        ):
            raise ValueError(f"ack_every must be a positive int or None, got {ack_every!r}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self._js = js
        self._client = js._client
        self._id = js._new_name()
        self._ack_every = ack_every
        self._timeout = js._timeout if timeout is None else float(timeout)
        self._seq = 0
        self._state = _OPEN
        self._failure: BaseException | None = None

    def __repr__(self) -> str:
        return f"<AtomicBatch id={self._id!r} size={self._seq}>"

    @property
    def batch_id(self) -> str:
        """The batch's ``Nats-Batch-Id``."""
        return self._id

    @property
    def size(self) -> int:
        """How many messages were added so far."""
        return self._seq

    @property
    def closed(self) -> bool:
        """True once committed, discarded or failed."""
        return self._state != _OPEN

    def __enter__(self) -> AtomicBatch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state == _OPEN:
            self.discard()

    def discard(self) -> None:
        """Give the batch up: nothing more is sent and nothing of it is stored."""
        if self._state == _OPEN:
            self._state = _DISCARDED

    def add(
        self,
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
    ) -> None:
        """Add a message (staged by the server, stored only by the commit).

        Expectations are checked by the server at the commit, against the stream
        as it was before the batch (``expected_last_seq`` only on the first
        message). Raises the server's error at once for the first message (and
        every ``ack_every``-th); BatchClosedError after commit/discard/failure.
        """
        self._check_open()
        seq = self._seq + 1
        hdrs = self._headers(
            seq,
            None,
            headers,
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_subject_seq,
            expected_last_msg_id,
            ttl,
        )
        if seq == 1 or (self._ack_every is not None and seq % self._ack_every == 0):
            reply = self._request(subject, payload, hdrs)
            try:
                if reply:
                    decode_api(reply, "atomic batch ack")
            except errors.Error as exc:
                self._fail(exc)
                raise
        else:
            # Not sent (bad subject, too big): the batch goes on without it.
            self._client.publish(subject, payload, headers=hdrs)
        self._seq = seq
        self._last_subject = subject

    def commit(
        self,
        subject: str | None = None,
        payload: bytes | None = None,
        *,
        headers: HeadersIn | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        ttl: float | str | None = None,
    ) -> PubAck:
        """Store the whole batch; returns the PubAck of its last message, with
        ``batch_id`` and ``batch_size``.

        With ``subject`` the commit is one more message of the batch; without, an
        end-of-batch marker (server 2.14) that is not stored. Raises the server's
        error (nothing stored) or TimeoutError (the outcome is unknown).
        """
        self._check_open()
        if subject is None:
            if payload is not None or headers is not None or msg_id is not None or ttl is not None:
                raise ValueError("commit() without a subject takes no message to store")
            if self._seq == 0:
                raise ValueError("nothing to commit: the batch is empty")
            self._js._require_api_level(4, "an atomic batch commit without a message")
            subject = self._last_subject
            payload = b""
            seq, commit = self._seq + 1, COMMIT_EOB
        else:
            seq, commit = self._seq + 1, COMMIT
        hdrs = self._headers(
            seq,
            commit,
            headers,
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_subject_seq,
            expected_last_msg_id,
            ttl,
        )
        data = self._request(subject, payload or b"", hdrs)
        try:
            ack = parse_pub_ack(data)
        except errors.Error as exc:
            self._fail(exc)
            raise
        self._state = _COMMITTED
        return ack

    # -- internals -------------------------------------------------------------

    _last_subject = ""

    def _check_open(self) -> None:
        if self._state == _OPEN:
            return
        what = {_COMMITTED: "committed", _DISCARDED: "discarded", _FAILED: "failed"}[self._state]
        raise errors.BatchClosedError(f"nats: atomic batch {self._id} was {what}") from (
            self._failure
        )

    def _fail(self, exc: BaseException) -> None:
        self._state = _FAILED
        self._failure = exc

    def _headers(
        self,
        seq: int,
        commit: str | None,
        headers: HeadersIn | None,
        *options: Any,
    ) -> dict[str, Any]:
        base = pub_headers(headers, *options)
        h: dict[str, Any] = dict(base) if base else {}
        h[BATCH_ID] = self._id
        h[BATCH_SEQ] = str(seq)
        if commit is not None:
            h[BATCH_COMMIT] = commit
        return h

    def _request(self, subject: str, payload: bytes, hdrs: dict[str, Any]) -> bytes:
        """Send a message that wants the server's answer; its body."""
        try:
            msg = self._client.request(subject, payload, timeout=self._timeout, headers=hdrs)
        except errors.NoRespondersError:
            exc: errors.Error = errors.NoStreamResponseError(
                f"nats: no stream answered the atomic batch message on {subject}"
            )
            self._fail(exc)
            raise exc from None
        except errors.TimeoutError:
            exc = errors.TimeoutError(
                f"nats: timeout waiting for the server's answer to atomic batch {self._id}"
            )
            self._fail(exc)
            raise exc from None
        except errors.ConnectionClosedError as closed:
            self._fail(closed)
            raise
        data: bytes = msg.data
        return data
