"""Fast-ingest batch publish (ADR-50, server 2.14): ``with js.fast_publisher() as fp``.

No header and no ack per message: each message's reply subject carries the
batch, ``<inbox>.<id>.<flow>.<gap>.<seq>.<op>.$FI`` (op 0 start, 1 append,
2 commit with this message, 3 commit without one, 4 ping), and the server
answers on the batch's own inbox subscription only now and then:

- ``{"type":"ack","seq":n,"msgs":m}``: messages up to ``n`` are in; the next
  ack comes after ``m`` more. The first message waits for the first such ack
  (the server's starting pace). After that the publisher waits only when
  ``max_outstanding_acks`` acks are due, so the server sets the pace.
- ``{"type":"gap","last_seq":e,"seq":n}``: messages ``e`` to ``n-1`` were lost.
- ``{"type":"err","seq":n,"error":{...}}``: message ``n`` was refused (a
  failed expectation...).
- a PubAck (``batch``, ``count``): the batch ended, on the commit or, with gap
  mode ``fail``, on the first gap or error; or an error PubAck (the stream has
  no ``allow_batched``, too many batches, an unknown batch).

With ``gap="fail"`` (the default) the batch stops at the first gap or
refused message: the messages before it are stored, ``add``/``commit`` raise
:class:`~jsclient.errors.BatchPublishGapError` or the refusal's API error.
With ``gap="ok"`` the batch goes on, and gaps and refusals go to ``error_cb``
(default: the connection's error callback).

Not atomic: messages are stored as they arrive. Leaving the ``with`` block
commits (an end-of-batch marker) unless an exception is on its way out, which
just stops. A publisher belongs to the thread that fills it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from jsclient import errors
from jsclient._threads import Signal
from jsclient.api import PubAck
from jsclient.jetstream._wire import TTL, ttl_value
from jsclient.jetstream.publish.window import WAIT_SLICE

if TYPE_CHECKING:
    from jsclient.jetstream._ctx import Context
    from jsclient.msg import Msg
    from jsclient.protocol.headers import HeadersIn

SUFFIX = "$FI"
OP_START, OP_APPEND, OP_COMMIT, OP_COMMIT_EOB, OP_PING = range(5)
GAP_MODES = ("fail", "ok")
MAX_FLOW = 65535  # the server's bound (uint16)

ErrorCallback = Callable[[BaseException], Any]


class FastPublisher:
    """A fast-ingest batch; get one from ``js.fast_publisher()`` (see the module docstring).

    ``flow`` is the most messages per ack the server may choose (it starts
    lower and adapts); ``max_outstanding_acks`` (1-3) how many acks may be
    due before ``add`` waits; ``ack_timeout`` how long it waits for one
    (then it pings the batch once, then TimeoutError).
    """

    def __init__(
        self,
        js: Context,
        *,
        flow: int = 100,
        max_outstanding_acks: int = 2,
        gap: str = "fail",
        ack_timeout: float | None = None,
        error_cb: ErrorCallback | None = None,
    ) -> None:
        if isinstance(flow, bool) or not isinstance(flow, int) or not 1 <= flow <= MAX_FLOW:
            raise ValueError(f"flow must be an int from 1 to {MAX_FLOW}, got {flow!r}")
        if max_outstanding_acks not in (1, 2, 3) or isinstance(max_outstanding_acks, bool):
            raise ValueError(
                f"max_outstanding_acks must be 1, 2 or 3, got {max_outstanding_acks!r}"
            )
        if gap not in GAP_MODES:
            raise ValueError(f"gap must be 'fail' or 'ok', got {gap!r}")
        if ack_timeout is not None and not ack_timeout > 0:
            raise ValueError(f"ack_timeout must be positive, got {ack_timeout!r}")
        self._client = js._client
        self._id = js._new_name()
        self._gap_ok = gap == "ok"
        self._max_out = max_outstanding_acks
        self._ack_timeout = js._timeout if ack_timeout is None else float(ack_timeout)
        self._error_cb = error_cb
        self._inbox = self._client.new_inbox()
        self._reply_pre = f"{self._inbox}.{self._id}.{flow}.{gap}."
        self._sid: int | None = None
        self._lock = threading.Lock()  # the answers' state (entered with ``with``)
        self._signal = Signal(self._lock)  # the filling thread waits on it for answers
        # Written by the filling thread only.
        self._seq = 0  # last batch sequence sent
        self._last_subject = ""
        self._closed = False
        # Written by the reader thread (under _lock), read without it for the pace check.
        self._acked = 0  # highest batch sequence the server acked
        self._msgs = flow  # the server's current messages per ack
        self._started = False  # the first flow ack came
        self._final: PubAck | None = None  # the batch's PubAck
        self._failure: BaseException | None = None  # what ended the batch early
        self._ended = False  # a final PubAck or error PubAck came
        self.gaps = 0  # gap reports received
        self.refused = 0  # message refusals received

    def __repr__(self) -> str:
        return f"<FastPublisher id={self._id!r} sent={self._seq} acked={self._acked}>"

    @property
    def batch_id(self) -> str:
        """The batch's id (sent in every message's ``Nats-Batch-Id``)."""
        return self._id

    @property
    def size(self) -> int:
        """How many messages were sent so far."""
        return self._seq

    @property
    def acked(self) -> int:
        """The highest batch sequence the server confirmed (the messages up to it
        are in, except lost ones with gap mode ``ok``)."""
        return self._acked

    def __enter__(self) -> FastPublisher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._closed:
            return
        if exc_type is None and self._seq and not self._ended:
            self.commit()
        else:
            self.close()

    def close(self) -> None:
        """Stop without a commit: nothing more is sent (the server ends the batch
        after 10 s); the messages it acknowledged stay stored."""
        self._closed = True
        self._unsubscribe()

    def _unsubscribe(self) -> None:
        sid, self._sid = self._sid, None
        if sid is not None:
            self._client._unsubscribe_internal(sid)

    # -- publishing --------------------------------------------------------------

    def add(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: HeadersIn | None = None,
        ttl: float | str | None = None,
    ) -> int:
        """Send a message; returns its batch sequence. Waits only when the server's
        pace says so. ``ttl`` as for ``js.publish``."""
        self._check_usable()
        if ttl is not None:
            headers = {**(headers or {}), TTL: ttl_value(ttl)}
        seq = self._seq + 1
        if seq == 1:
            self._start()
            try:
                self._send(subject, payload, headers, seq, OP_START)
            except BaseException:
                self._unsubscribe()  # not sent: a retry subscribes again
                raise
            self._wait(lambda: self._started, "the first flow ack")
            return seq
        self._send(subject, payload, headers, seq, OP_APPEND)
        if self._acked + self._msgs * self._max_out <= seq:
            self._wait(lambda: self._acked + self._msgs * self._max_out > self._seq, "a flow ack")
        return seq

    def commit(
        self,
        subject: str | None = None,
        payload: bytes | None = None,
        *,
        headers: HeadersIn | None = None,
    ) -> PubAck:
        """End the batch once the server has it all; returns its PubAck
        (``batch_id``, ``batch_size``: the messages stored, the seq of the last).

        With ``subject`` the commit is one more message; without, an end-of-batch
        marker that is not stored.
        """
        self._check_usable()
        seq = self._seq + 1
        if subject is None:
            if payload is not None or headers is not None:
                raise ValueError("commit() without a subject takes no message to store")
            if self._seq == 0:
                raise ValueError("nothing to commit: the batch is empty")
        try:
            if subject is None:
                self._send(self._last_subject, b"", None, seq, OP_COMMIT_EOB)
            else:
                if seq == 1:
                    self._start()
                self._send(subject, payload or b"", headers, seq, OP_COMMIT)
            self._wait(lambda: self._ended, "the batch's publish ack")
        finally:
            self.close()
        if self._failure is not None and not self._gap_ok:
            raise self._failure
        if self._final is None:  # ended without an ack: the failure says why
            raise self._failure or errors.JetStreamError("nats: fast batch ended without an ack")
        return self._final

    # -- internals ---------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._closed:
            raise errors.BatchClosedError(f"nats: fast batch {self._id} is closed") from (
                self._failure
            )
        if self._ended or (self._failure is not None and not self._gap_ok):
            self.close()
            if self._failure is not None:
                raise self._failure
            raise errors.BatchClosedError(f"nats: fast batch {self._id} has ended")

    def _start(self) -> None:
        if self._sid is None:
            self._sid = self._client._subscribe_internal(f"{self._inbox}.>", self._on_reply)

    def _send(
        self, subject: str, payload: bytes, headers: HeadersIn | None, seq: int, op: int
    ) -> None:
        self._client.publish(
            subject, payload, reply=f"{self._reply_pre}{seq}.{op}.{SUFFIX}", headers=headers
        )
        self._seq = seq if op != OP_COMMIT_EOB else self._seq
        self._last_subject = subject

    def _ping(self) -> None:
        """Ask the server to say again where the batch is (a lost ack)."""
        self._client.publish(
            self._last_subject, b"", reply=f"{self._reply_pre}{self._seq}.{OP_PING}.{SUFFIX}"
        )

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        """Wait for ``ready`` (or the batch's end); one ping after a silent
        ``ack_timeout``, TimeoutError after a second (the batch is closed then:
        nothing more can be sent in it, and its inbox subscription goes).

        It waits on the batch's :class:`~jsclient._threads.Signal`, in slices,
        and never holds its lock while pinging.
        """

        def settled() -> bool:
            return bool(ready() or self._ended or self._stop_now())

        pinged = False
        signal = self._signal
        deadline = time.monotonic() + self._ack_timeout
        while not settled():
            left = deadline - time.monotonic()
            if left <= 0:
                if pinged or self._client.is_closed:
                    self.close()
                    raise errors.TimeoutError(
                        f"nats: no answer from the server for fast batch {self._id} ({what})"
                    )
                pinged = True
                self._ping()
                deadline = time.monotonic() + self._ack_timeout
                continue
            signal.wait_for(settled, min(left, WAIT_SLICE))
        if self._stop_now() or (self._ended and not ready()):
            self.close()
            if self._failure is not None:
                raise self._failure
            if not ready():
                raise errors.BatchClosedError(f"nats: fast batch {self._id} has ended")

    def _stop_now(self) -> bool:
        return self._failure is not None and not self._gap_ok

    # -- the reader thread -------------------------------------------------------

    def _on_reply(self, msg: Msg) -> None:
        """An answer on the batch's inbox (reader thread: no blocking, no user code)."""
        try:
            obj = json.loads(msg.data)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            self._client._report_error(
                errors.JetStreamError(f"nats: invalid fast batch answer: {msg.data[:80]!r}")
            )
            return
        kind = obj.get("type")
        report: BaseException | None = None
        with self._lock:
            if kind == "ack":
                seq, msgs = obj.get("seq"), obj.get("msgs")
                if type(seq) is int and type(msgs) is int and seq >= self._acked:
                    self._acked = seq
                    if msgs > 0:
                        self._msgs = msgs
                self._started = True
            elif kind == "gap":
                self.gaps += 1
                report = errors.BatchPublishGapError(
                    int(obj.get("last_seq") or 0), int(obj.get("seq") or 0)
                )
            elif kind == "err":
                self.refused += 1
                err = obj.get("error")
                report = errors.api_error(err if isinstance(err, dict) else {"description": err})
                report.batch_seq = obj.get("seq")  # type: ignore[attr-defined]
            elif "error" in obj:
                err = obj["error"]
                exc = errors.api_error(err if isinstance(err, dict) else {"description": err})
                if self._failure is None or self._gap_ok:
                    self._failure = exc
                self._ended = True
            else:
                try:
                    self._final = PubAck.from_response(obj)
                except (TypeError, ValueError) as bad:
                    self._failure = self._failure or errors.JetStreamError(
                        f"nats: invalid fast batch publish ack: {msg.data[:80]!r} ({bad})"
                    )
                self._ended = True
                if isinstance(self._failure, errors.BatchPublishGapError):
                    self._failure.ack = self._final
            if report is not None and not self._gap_ok and self._failure is None:
                self._failure = report
                report = None
            self._signal.notify_locked()
        if report is not None:
            if self._error_cb is not None:
                self._client._run_callback(self._error_cb, report)
            else:
                self._client._report_error(report)
