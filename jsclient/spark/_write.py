"""Publishing Spark rows to JetStream: a window of in-flight PubAcks, and exactly-once ids.

Each row becomes one message: ``data`` (binary or string) is the payload; the
subject is the ``subject`` option, else the row's ``subject`` column; the
``headers`` column (``map<string,string>`` or ``map<string,array<string>>``)
becomes headers, every value kept. Every message carries a ``Nats-Msg-Id``:
the row's ``msgIdColumn`` value, else ``<prefix>:<row index>``, where the
prefix names the write (or streaming batch) and the Spark partition. A retried
task therefore re-sends the same ids and JetStream drops what it already
stored, within the stream's duplicate window.

The first row of a task waits for its ack, so a missing stream or a refused
subject fails at once with the server's answer; the rest go out in batches
through an :class:`~jsclient.spark._publish.AckWindow`, with at most
``publishWindow`` acks outstanding. A publish whose ack was lost (no stream
answered yet, written to a socket that was then lost, no ack within
``publishTimeout``) is sent again with the same id, up to ``publishRetries``
times; one made while the connection was down goes out from the reconnect
buffer and is acked normally (the async-publish engine's disconnect rule).
The task returns only when every message is acked, so Spark's commit means
"all of it is stored".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from jsclient import errors
from jsclient.spark._publish import FAILED, LOST, OK, Ack, AckWindow, header_block
from jsclient.spark.options import WriteOptions

__all__ = ["WritePlan", "WriteResult", "publish_batches"]

log = logging.getLogger("jsclient.spark")

# Messages handed to the window at a time (one write, one lock round per batch).
_SEND_BATCH = 256
# Settle finished publishes once this many wait in order.
_SETTLE_AT = 1024


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

    def add(self, ack: Ack) -> None:
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
        self.queue: list[Ack] = []  # made, not yet sent
        self.lost: list[Ack] = []  # to send again
        self.rows = 0
        self.win: Any = None

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
            self.win = AckWindow(nc, self.opts.publish_window, self.opts.publish_timeout)
            try:
                for batch in batches:
                    self._publish_batch(batch)
                self._send()
                self.win.drain()
                self._settle()
                self._resend()
            finally:
                self.win.close()
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
        # The common header block, "NATS/1.0 ... Nats-Msg-Id: <prefix>:" + row + end.
        plain = ids is None and headers is None
        if plain:
            start = header_block(f"{self.prefix}:0", stream)
            cut = start.index(b"Nats-Msg-Id: ") + len(f"Nats-Msg-Id: {self.prefix}:")
            head, tail = start[:cut], start[cut + 1 :]
        win = self.win
        queue = self.queue
        append = queue.append
        first = self.rows
        for i in range(n):
            row = first + i
            subj = subject if subjects is None else subjects[i]
            if not subj:
                self.rows = row + 1
                raise self.fail(f"row {row} has no subject (set the 'subject' option or column)")
            data = datas[i] or b""
            if plain:
                hdr = b"%s%d%s" % (head, row, tail)
            else:
                if ids is None:
                    mid = f"{self.prefix}:{row}"
                else:
                    value = ids[i]
                    if value is None or value == "":
                        self.rows = row + 1
                        raise self.fail(f"row {row} has no message id in column {plan.msg_id!r}")
                    mid = str(value)
                try:
                    hdr = header_block(mid, stream, None if headers is None else headers[i])
                except errors.BadHeaderError as exc:
                    self.rows = row + 1
                    raise self.fail(f"row {row} has bad headers or message id", exc) from exc
            append(Ack(win, row, subj, data, hdr))
            if row == 0:
                # The first publish waits for its ack: a missing stream, a
                # refused subject or a wrong expected stream fails right here.
                self.rows = 1
                self._send()
                self.win.drain()
                self._settle()
                self._resend()
                queue = self.queue
                append = queue.append
            elif len(queue) >= _SEND_BATCH:
                self.rows = row + 1
                self._send()
                queue = self.queue
                append = queue.append
        self.rows = first + n

    def _send(self) -> None:
        acks, self.queue = self.queue, []
        if not acks:
            return
        try:
            self.win.submit(acks)
        except errors.TimeoutError as exc:
            raise self.fail(
                f"no ack for {self.opts.publish_timeout:g} s with "
                f"{self.opts.publish_window} publishes in flight",
                exc,
            ) from exc
        if len(self.win.inflight) >= _SETTLE_AT:
            self._settle()

    def _settle(self) -> None:
        """Count the acks at the front; failures fail the task, lost ones are sent again."""
        pending = self.win.inflight
        add = self.result.add
        while pending:
            ack = pending[0]
            state = ack.state
            if state == OK:
                add(ack)
            elif state == LOST:
                self.lost.append(ack)
            elif state == FAILED:
                raise self.fail(f"publishing row {ack.row} to {ack.subject!r}", ack.error)
            else:
                return
            pending.popleft()

    def _resend(self) -> None:
        """Send the lost messages again (same ids), up to ``publishRetries`` rounds."""
        lost, self.lost = self.lost, []
        attempt = 0
        while lost:
            if attempt >= self.opts.publish_retries:
                why = lost[0].error
                raise self.fail(
                    f"{len(lost)} rows (first row {lost[0].row}) were not acked after "
                    f"{attempt + 1} attempts",
                    why,
                )
            attempt += 1
            log.info("jetstream: sending %d unacked rows again: %s", len(lost), lost[0].error)
            time.sleep(min(1.0, 0.1 * attempt))  # a stream starting up, a reconnect
            self.queue = [ack.again() for ack in lost]
            self._send()
            self.win.drain()
            self._settle()
            lost, self.lost = self.lost, []


def publish_batches(
    opts: WriteOptions,
    plan: WritePlan,
    batches: Iterator[pa.RecordBatch],
    id_prefix: str,
    where: str,
) -> WriteResult:
    """Publish every row of ``batches`` and wait for all acks (see the module docstring)."""
    return _Publisher(opts, plan, id_prefix, where).run(batches)
