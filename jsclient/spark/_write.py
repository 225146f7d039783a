"""Publishing Spark rows to JetStream: a window of in-flight PubAcks, and exactly-once ids.

Each row becomes one message: ``data`` (binary or string) is the payload; the
subject is the ``subject`` option, else the row's ``subject`` column; the
``headers`` column (``map<string,string>`` or ``map<string,array<string>>``)
becomes headers, every value kept. Every message carries a ``Nats-Msg-Id``:
the row's ``msgIdColumn`` value, else ``<prefix>:<row index>``, where the
prefix names the write (or streaming batch) and the Spark partition. A retried
task therefore re-sends the same ids and JetStream drops what it already
stored, within the stream's duplicate window.

The first row of a task is published synchronously, so a missing stream or a
permission problem fails at once with the server's answer; the rest go out
with ``publish_async`` and at most ``publishWindow`` acks outstanding. A
publish whose ack was lost (timeout, disconnect) is sent again with the same
id, up to ``publishRetries`` times. The task returns only when every message
is acked, so Spark's commit means "all of it is stored".
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from jsclient import errors
from jsclient.spark.options import WriteOptions

__all__ = ["WritePlan", "WriteResult", "publish_batches"]

log = logging.getLogger("jsclient.spark")

# Errors after which the same message may be sent again: its ack was lost, or
# it may never have reached the server. The Nats-Msg-Id makes a re-send safe.
_RETRYABLE = (
    errors.TimeoutError,
    errors.PublishDisconnectedError,
    errors.NoStreamResponseError,
    errors.ConnectionReconnectingError,
)
# How many finished publishes to settle at a time while publishing.
_SETTLE_EVERY = 4096


@dataclass(frozen=True)
class WritePlan:
    """Which input columns feed which part of a message (checked on the driver)."""

    data: str = "data"
    subject: str | None = None  # the column; None when the subject option is used
    headers: str | None = None
    headers_multi: bool = False
    msg_id: str | None = None


@dataclass
class WriteResult:
    """What one task published: new messages, duplicates dropped, sequence span."""

    published: int = 0
    duplicates: int = 0
    first_seq: int | None = None
    last_seq: int | None = None

    def add(self, ack: Any) -> None:
        if ack.duplicate:
            self.duplicates += 1
            return
        self.published += 1
        seq = ack.seq
        if self.first_seq is None or seq < self.first_seq:
            self.first_seq = seq
        if self.last_seq is None or seq > self.last_seq:
            self.last_seq = seq

    @property
    def acked(self) -> int:
        return self.published + self.duplicates


# One message whose ack is outstanding, kept so it can be re-sent as is:
# (future, row index, subject, data, headers, msg id). A tuple: one per row.
_Pending = tuple[Any, int, str, bytes, Any, str]


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    index = batch.schema.get_field_index(name)
    if index < 0:
        raise errors.SparkWriteError(f"jetstream: input has no column {name!r}")
    return batch.column(index)


def _payloads(batch: pa.RecordBatch, plan: WritePlan) -> list[Any]:
    col = _column(batch, plan.data)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = col.cast(pa.binary())  # UTF-8 bytes, no Python str per row
    values: list[Any] = col.to_pylist()
    return values


def _headers(values: list[Any], multi: bool) -> list[Any]:
    out: list[Any] = []
    for pairs in values:
        if not pairs:
            out.append(None)
        elif multi:
            out.append({k: [v for v in vs if v is not None] for k, vs in pairs if vs} or None)
        else:
            out.append({k: v for k, v in pairs if v is not None} or None)
    return out


class _Publisher:
    """Publishes one task's rows; raises SparkWriteError with the counts on failure."""

    def __init__(self, opts: WriteOptions, plan: WritePlan, id_prefix: str, where: str) -> None:
        self.opts = opts
        self.plan = plan
        self.prefix = id_prefix
        self.where = where
        self.result = WriteResult()
        self.pending: deque[_Pending] = deque()
        self.rows = 0
        self.js: Any = None

    def fail(self, what: str, cause: BaseException | None = None) -> errors.SparkWriteError:
        r = self.result
        window = (
            "; rows already acked stay in the stream, and a retry re-sends them with the "
            "same Nats-Msg-Id, which the stream drops within its duplicate window"
        )
        text = (
            f"jetstream: writing {self.where} to {self.opts.conn.safe_servers} failed after "
            f"{r.acked} of {self.rows} rows read were acked ({r.published} new, "
            f"{r.duplicates} duplicates): {what}" + (f": {cause}" if cause is not None else "")
        )
        return errors.SparkWriteError(text + window, r.published, r.duplicates)

    def run(self, batches: Iterator[pa.RecordBatch]) -> WriteResult:
        conn = self.opts.conn
        try:
            nc = conn.connect()
        except errors.Error as exc:
            raise self.fail("cannot connect", exc) from exc
        try:
            self.js = conn.jetstream(
                nc,
                publish_async_max_pending=self.opts.publish_window,
                publish_async_stall_wait=self.opts.publish_timeout,
            )
            for batch in batches:
                self._publish_batch(batch)
                self._settle(block=False)
            try:
                self.js.publish_async_complete(timeout=self.opts.publish_timeout)
            except errors.TimeoutError:
                pass  # the unacked ones are re-sent (or reported) by _settle
            self._settle(block=True)
        except errors.SparkWriteError:
            raise
        except errors.Error as exc:
            raise self.fail(type(exc).__name__, exc) from exc
        finally:
            nc.close()
        return self.result

    def _publish_batch(self, batch: pa.RecordBatch) -> None:
        plan, opts = self.plan, self.opts
        n = batch.num_rows
        if n == 0:
            return
        datas = _payloads(batch, plan)
        subject = opts.subject
        subjects = None if subject is not None else _column(batch, plan.subject or "").to_pylist()
        headers = (
            _headers(_column(batch, plan.headers).to_pylist(), plan.headers_multi)
            if plan.headers
            else None
        )
        ids = _column(batch, plan.msg_id).to_pylist() if plan.msg_id else None
        stream = opts.stream
        publish = self.js.publish_async
        pending = self.pending
        append = pending.append
        prefix = self.prefix
        first = self.rows
        for i in range(n):
            row = first + i
            subj = subject if subjects is None else subjects[i]
            if not subj:
                self.rows = row + 1
                raise self.fail(f"row {row} has no subject (set the 'subject' option or column)")
            data = datas[i] or b""
            hdrs = None if headers is None else headers[i]
            if ids is None:
                mid = f"{prefix}:{row}"
            else:
                value = ids[i]
                if value is None or value == "":
                    self.rows = row + 1
                    raise self.fail(f"row {row} has no message id in column {plan.msg_id!r}")
                mid = str(value)
            if row == 0:
                # The first publish waits for its ack: a missing stream, a
                # refused subject or a wrong expected stream fails right here.
                self.rows = 1
                self.result.add(self._publish_sync(subj, data, hdrs, mid, row))
                continue
            try:
                fut = publish(subj, data, headers=hdrs, msg_id=mid, expected_stream=stream)
            except errors.TooManyStalledMsgsError as exc:
                self.rows = row + 1
                raise self.fail(
                    f"no ack for {opts.publish_timeout:g} s with "
                    f"{opts.publish_window} publishes in flight",
                    exc,
                ) from exc
            except errors.BadSubjectError as exc:
                self.rows = row + 1
                raise self.fail(f"row {row} has an invalid subject {subj!r}", exc) from exc
            append((fut, row, subj, data, hdrs, mid))
            if len(pending) >= _SETTLE_EVERY and pending[0][0].done():
                self.rows = row + 1
                self._settle(block=False)
        self.rows = first + n

    def _publish_sync(self, subj: str, data: bytes, hdrs: Any, mid: str, row: int) -> Any:
        opts = self.opts
        attempt = 0
        while True:
            try:
                return self.js.publish(
                    subj,
                    data,
                    headers=hdrs,
                    msg_id=mid,
                    expected_stream=opts.stream,
                    timeout=opts.publish_timeout,
                )
            except _RETRYABLE as exc:
                attempt += 1
                if attempt > opts.publish_retries:
                    raise self.fail(
                        f"row {row} was not acked after {attempt} attempts on {subj!r}", exc
                    ) from exc
                log.info("jetstream: re-sending row %d (%s): %s", row, mid, exc)
                time.sleep(min(1.0, 0.1 * attempt))
            except errors.BadSubjectError as exc:
                raise self.fail(f"row {row} has an invalid subject {subj!r}", exc) from exc
            except errors.Error as exc:
                raise self.fail(f"publishing row {row} to {subj!r}", exc) from exc

    def _settle(self, block: bool) -> None:
        """Count finished publishes (all of them when ``block``); re-send lost ones."""
        pending = self.pending
        add = self.result.add
        while pending:
            fut, row, subj, data, hdrs, mid = pending[0]
            if not fut.done():
                if not block:
                    return
                # publish_async_complete() returned or timed out: whatever is
                # still open had no ack within publishTimeout. Send it again
                # (same id: stored at most once) and wait for that ack.
                pending.popleft()
                log.info("jetstream: re-sending row %d (%s): no ack", row, mid)
                add(self._publish_sync(subj, data, hdrs, mid, row))
                continue
            pending.popleft()
            try:
                add(fut.result(timeout=0))
            except _RETRYABLE as exc:
                log.info("jetstream: re-sending row %d (%s): %s", row, mid, exc)
                add(self._publish_sync(subj, data, hdrs, mid, row))
            except errors.Error as exc:
                raise self.fail(f"publishing row {row} to {subj!r}", exc) from exc


def publish_batches(
    opts: WriteOptions,
    plan: WritePlan,
    batches: Iterator[pa.RecordBatch],
    id_prefix: str,
    where: str,
) -> WriteResult:
    """Publish every row of ``batches`` and wait for all acks (see the module docstring)."""
    return _Publisher(opts, plan, id_prefix, where).run(batches)
