"""The write side of the ``jetstream`` data source: the batch writer and the streaming sink.

:func:`plan_write` checks the input columns once, on the driver; each task
then publishes its partition's rows through :mod:`jsclient.spark._write` with
``Nats-Msg-Id`` ids that name the write (or the streaming query and
micro-batch), the partition and the row, so a retried task or a replayed
micro-batch adds nothing the stream already holds (within its duplicate
window). ``commit``/``abort`` only log what the tasks stored: a stream cannot
un-publish.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

from jsclient import errors
from jsclient.spark._write import WritePlan, WriteResult, publish_batches
from jsclient.spark.options import IGNORED_WRITE_COLUMNS, WriteOptions

__all__ = ["JetStreamCommitMessage", "JetStreamStreamWriter", "JetStreamWriter", "plan_write"]

log = logging.getLogger("jsclient.spark")

# Spark's local properties that name the streaming query and micro-batch a
# task belongs to (internal names; without them the sink falls back to ids
# that are unique but not stable across a replay, and says so).
_BATCH_ID = "streaming.sql.batchId"
_QUERY_ID = "sql.streaming.queryId"


def _task() -> tuple[int, int, Any]:
    """(partition id, attempt number, TaskContext or None outside a Spark task)."""
    tc = TaskContext.get()
    if tc is None:
        return 0, 0, None
    return tc.partitionId(), tc.attemptNumber(), tc


def plan_write(schema: StructType, opts: WriteOptions) -> WritePlan:
    """Check the input columns of a write and decide what each one feeds."""
    by_name = {f.name.lower(): f for f in schema.fields}
    data = by_name.get("data")
    if data is None:
        raise errors.SparkOptionError(
            "jetstream: a write needs a 'data' column (binary or string); "
            f"the input has {', '.join(schema.fieldNames()) or 'no columns'}"
        )
    if not isinstance(data.dataType, BinaryType | StringType):
        raise errors.SparkOptionError(
            f"jetstream: column 'data' must be binary or string, not {data.dataType.simpleString()}"
        )
    used = {"data"}
    subject_col = None
    subject = by_name.get("subject")
    if subject is not None:
        if not isinstance(subject.dataType, StringType):
            raise errors.SparkOptionError("jetstream: column 'subject' must be a string")
        used.add("subject")
        subject_col = subject.name
    if opts.subject is None and subject_col is None:
        raise errors.SparkOptionError(
            "jetstream: a write needs the 'subject' option or a 'subject' column"
        )
    headers_col, multi = None, False
    headers = by_name.get("headers")
    if headers is not None:
        t = headers.dataType
        value = t.valueType if isinstance(t, MapType) else None
        multi = isinstance(value, ArrayType)
        if isinstance(value, ArrayType):
            value = value.elementType
        if not (
            isinstance(t, MapType)
            and isinstance(t.keyType, StringType)
            and isinstance(value, StringType)
        ):
            raise errors.SparkOptionError(
                "jetstream: column 'headers' must be map<string,string> or "
                f"map<string,array<string>>, not {t.simpleString()}"
            )
        used.add("headers")
        headers_col = headers.name
    msg_id_col = None
    if opts.msg_id_column is not None:
        f = by_name.get(opts.msg_id_column.lower())
        if f is None:
            raise errors.SparkOptionError(
                f"jetstream: msgIdColumn {opts.msg_id_column!r} is not a column of the input"
            )
        msg_id_col = f.name
        used.add(f.name.lower())
    elif "msg_id" in by_name:
        msg_id_col = by_name["msg_id"].name
        used.add("msg_id")
    extra = [
        f.name
        for f in schema.fields
        if f.name.lower() not in used and f.name.lower() not in IGNORED_WRITE_COLUMNS
    ]
    if extra and not opts.ignore_extra_columns:
        raise errors.SparkOptionError(
            f"jetstream: unexpected input columns {extra}: a write takes data, subject, "
            "headers and msg_id (stream, seq and timestamp are ignored); select the columns "
            "or set ignoreExtraColumns=true"
        )
    return WritePlan(
        data=data.name,
        subject=subject_col if opts.subject is None else None,
        headers=headers_col,
        headers_multi=multi,
        msg_id=msg_id_col,
    )


# -- batch write ---------------------------------------------------------------


@dataclass
class JetStreamCommitMessage(WriterCommitMessage):
    """What one write task stored: new messages, duplicates dropped, sequence span."""

    partition: int
    attempt: int
    published: int
    duplicates: int
    first_seq: int | None = None
    last_seq: int | None = None

    @classmethod
    def of(cls, partition: int, attempt: int, r: WriteResult) -> JetStreamCommitMessage:
        return cls(partition, attempt, r.published, r.duplicates, r.first_seq, r.last_seq)


def _totals(messages: list[Any]) -> tuple[int, int, int]:
    done = [m for m in messages if isinstance(m, JetStreamCommitMessage)]
    return sum(m.published for m in done), sum(m.duplicates for m in done), len(done)


class JetStreamWriter(DataSourceArrowWriter):
    """Batch write; ``write_id`` (made once per job, or the ``writeId`` option) names the ids."""

    def __init__(self, opts: WriteOptions, plan: WritePlan, write_id: str) -> None:
        self.opts = opts
        self.plan = plan
        self.write_id = write_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> JetStreamCommitMessage:
        partition, attempt, _tc = _task()
        return self.write_partition(iterator, partition, attempt)

    def write_partition(
        self, batches: Iterator[pa.RecordBatch], partition: int, attempt: int = 0
    ) -> JetStreamCommitMessage:
        """Publish one partition's rows (what ``write`` does in a Spark task)."""
        prefix = f"{self.write_id}:{partition}"
        where = f"partition {partition} (attempt {attempt}) of write {self.write_id}"
        result = publish_batches(self.opts, self.plan, batches, prefix, where)
        return JetStreamCommitMessage.of(partition, attempt, result)

    def commit(self, messages: list[Any]) -> None:
        published, dups, tasks = _totals(messages)
        log.info(
            "jetstream: write %s committed: %d messages stored, %d duplicates dropped, %d tasks",
            self.write_id,
            published,
            dups,
            tasks,
        )

    def abort(self, messages: list[Any]) -> None:
        published, dups, tasks = _totals(messages)
        failed = sum(1 for m in messages if m is None)
        log.warning(
            "jetstream: write %s aborted: %d finished tasks stored %d messages (%d duplicates "
            "dropped), and they stay (a stream cannot un-publish); %d tasks failed, each error "
            "says how many of its rows were acked. Re-run with the option writeId=%s to re-send "
            "everything without duplicates within the stream's duplicate window.",
            self.write_id,
            tasks,
            published,
            dups,
            failed,
            self.write_id,
        )


# -- streaming sink --------------------------------------------------------------


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: ids ``<sinkId or query id>:<batch id>:<partition>:<row>``.

    A replayed micro-batch has the same batch id and rows, so it adds nothing.
    """

    def __init__(self, opts: WriteOptions, plan: WritePlan) -> None:
        self.opts = opts
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> JetStreamCommitMessage:
        partition, attempt, tc = _task()
        batch_id = tc.getLocalProperty(_BATCH_ID) if tc is not None else None
        query_id = tc.getLocalProperty(_QUERY_ID) if tc is not None else None
        return self.write_partition(iterator, partition, batch_id, query_id, attempt)

    def write_partition(
        self,
        batches: Iterator[pa.RecordBatch],
        partition: int,
        batch_id: str | None,
        query_id: str | None = None,
        attempt: int = 0,
    ) -> JetStreamCommitMessage:
        """Publish one partition of micro-batch ``batch_id`` (what ``write`` does in a task)."""
        sink = self.opts.sink_id or query_id
        if batch_id is None or sink is None:
            # Unique but not stable: a replay of this batch would publish again.
            sink, batch_id = sink or "sink", uuid.uuid4().hex
            log.warning(
                "jetstream: no streaming batch id in this task; message ids are unique "
                "but a replayed micro-batch will not be de-duplicated"
            )
        prefix = f"{sink}:{batch_id}:{partition}"
        where = f"partition {partition} of micro-batch {batch_id}"
        result = publish_batches(self.opts, self.plan, batches, prefix, where)
        return JetStreamCommitMessage.of(partition, attempt, result)

    def commit(self, messages: list[Any], batchId: int) -> None:
        published, dups, _tasks = _totals(messages)
        log.info(
            "jetstream: micro-batch %d committed: %d messages stored, %d duplicates dropped",
            batchId,
            published,
            dups,
        )

    def abort(self, messages: list[Any], batchId: int) -> None:
        published, dups, tasks = _totals(messages)
        log.warning(
            "jetstream: micro-batch %d aborted after %d finished tasks stored %d messages "
            "(%d duplicates dropped); they stay, and the replayed batch re-sends them with the "
            "same ids, which the stream drops within its duplicate window",
            batchId,
            tasks,
            published,
            dups,
        )
