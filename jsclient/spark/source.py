"""The ``jetstream`` PySpark data source: batch read and write, streaming source and sink.

Spark pickles the data source, its readers, writers and partitions to other
processes, so they hold only parsed options (:mod:`jsclient.spark.options`);
each task opens its own connection and closes it when done. The one
long-lived connection is the driver-side streaming reader's, which Spark never
pickles (``__getstate__`` drops it anyway).

Where each piece runs: ``schema``/``reader``/``writer`` and batch
``partitions`` in short-lived planning workers; ``read``/``write`` on the
executors; ``commit``/``abort`` of writers in a driver-side worker; the
streaming reader's offset methods in one driver-side worker per query.

This module holds the data source and its read side (the batch reader and the
streaming source); the write side (the batch writer and the streaming sink) is
in :mod:`jsclient.spark._sink`, and its classes are importable from here too.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from jsclient import errors
from jsclient.spark._plan import (
    SeqRange,
    StreamState,
    first_seq_at,
    plan_ranges,
    pull_size,
    split,
    stream_state,
    use_direct,
)
from jsclient.spark._read import read_range
from jsclient.spark._sink import (
    JetStreamCommitMessage,
    JetStreamStreamWriter,
    JetStreamWriter,
    plan_write,
)
from jsclient.spark.options import (
    READ_COLUMNS,
    ReadOptions,
    StreamReadOptions,
    WriteOptions,
    parse_time_ns,
)

__all__ = [
    "SCHEMA",
    "JetStreamCommitMessage",
    "JetStreamDataSource",
    "JetStreamReader",
    "JetStreamStreamReader",
    "JetStreamStreamWriter",
    "JetStreamWriter",
]

log = logging.getLogger("jsclient.spark")

_HEADERS_TYPE = MapType(StringType(), ArrayType(StringType()))

#: The read schema: one row per stored message.
SCHEMA = StructType(
    [
        StructField("stream", StringType()),
        StructField("subject", StringType()),
        StructField("seq", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("data", BinaryType()),
        StructField("headers", _HEADERS_TYPE),
    ]
)

_READ_TYPES: dict[str, tuple[DataType, ...]] = {
    "stream": (StringType(),),
    "subject": (StringType(),),
    "seq": (LongType(),),
    "timestamp": (TimestampType(),),
    "data": (BinaryType(), StringType()),
    "headers": (_HEADERS_TYPE,),
}


def _arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark checks read batches against (exact: tz=UTC, nullability)."""
    for f in schema.fields:
        allowed = _READ_TYPES.get(f.name)
        if allowed is None:
            raise errors.SparkOptionError(
                f"jetstream: the read schema has no column {f.name!r} "
                f"(columns: {', '.join(READ_COLUMNS)})"
            )
        if f.dataType not in allowed:
            raise errors.SparkOptionError(
                f"jetstream: column {f.name!r} cannot be read as {f.dataType.simpleString()} "
                f"(use {' or '.join(t.simpleString() for t in allowed)})"
            )
    return to_arrow_schema(schema, timezone="UTC")


def _context(action: str, opts: ReadOptions, exc: BaseException) -> errors.SparkReadError:
    return errors.SparkReadError(
        f"jetstream: {action} stream {opts.stream!r} on {opts.conn.safe_servers}: {exc}"
    )


# -- data source ---------------------------------------------------------------


class JetStreamDataSource(DataSource):
    """``spark.read.format("jetstream")``, ``df.write.format("jetstream")`` and streaming."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return JetStreamReader(ReadOptions.parse(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> JetStreamWriter:
        if overwrite:
            raise errors.SparkOptionError(
                "jetstream: streams are append-only; write with .mode('append')"
            )
        opts = WriteOptions.parse(self.options)
        # 96 random bits in 16 characters: every message carries this id, and
        # the server keeps it in its de-duplication table for the window.
        write_id = opts.write_id or secrets.token_urlsafe(12)
        return JetStreamWriter(opts, plan_write(schema, opts), write_id)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return JetStreamStreamReader(StreamReadOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> JetStreamStreamWriter:
        if overwrite:
            raise errors.SparkOptionError(
                "jetstream: streams are append-only; use outputMode('append')"
            )
        opts = WriteOptions.parse(self.options)
        return JetStreamStreamWriter(opts, plan_write(schema, opts))


# -- batch read ----------------------------------------------------------------


class JetStreamReader(DataSourceReader):
    """Batch read: ``partitions()`` plans sequence ranges, ``read()`` reads one of them."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.arrow_schema = _arrow_schema(schema)

    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        try:
            nc = opts.conn.connect()
            try:
                ranges, state = plan_ranges(opts.conn.jetstream(nc), opts)
            finally:
                nc.close()
        except errors.Error as exc:
            raise _context("planning the read of", opts, exc) from exc
        log.info(
            "jetstream: reading %s: %d ranges of sequences %s (stream holds %d messages, %d..%d)",
            opts.stream,
            len(ranges),
            f"{ranges[0].start}..{ranges[-1].end}" if ranges else "none",
            state.messages,
            state.first_seq,
            state.last_seq,
        )
        return list(ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SeqRange):
            return iter(())  # Spark turns an empty plan into one InputPartition(None)
        return read_range(self.opts, partition, self.arrow_schema)


# -- streaming source ------------------------------------------------------------


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"stream": name, "seq": next sequence to read}`` (exclusive ends)."""

    def __init__(self, opts: StreamReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.arrow_schema = _arrow_schema(schema)
        self._nc: Any = None
        self._js: Any = None
        self._state: StreamState | None = None
        self._target: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Only the driver-side instance connects; a copy never carries the connection.
        state = dict(self.__dict__)
        state["_nc"] = state["_js"] = None
        return state

    # -- driver side ----------------------------------------------------------

    def _jetstream(self) -> Any:
        nc = self._nc
        if nc is None or nc.is_closed:
            conn = self.opts.read.conn
            self._nc = nc = conn.connect()
            self._js = conn.jetstream(nc)
        return self._js

    def _stream_state(self) -> StreamState:
        read = self.opts.read
        try:
            state = stream_state(self._jetstream(), read.stream)
        except errors.Error as exc:
            raise _context("getting the info of", read, exc) from exc
        self._state = state
        return state

    def _offset(self, seq: int) -> dict[str, Any]:
        return {"stream": self.opts.read.stream, "seq": int(seq)}

    def _seq_of(self, offset: Mapping[str, Any]) -> int:
        stream = self.opts.read.stream
        if offset.get("stream") != stream:
            raise errors.SparkOptionError(
                f"jetstream: the checkpoint's offset {dict(offset)} is for stream "
                f"{offset.get('stream')!r}, not {stream!r}; use a new checkpointLocation"
            )
        return int(offset["seq"])

    def initialOffset(self) -> dict[str, Any]:
        starting = self.opts.starting
        state = self._stream_state()
        if starting == "earliest":
            seq = state.first_seq if state.messages else state.next_seq
        elif starting == "latest":
            seq = state.next_seq
        elif starting.isdigit():
            seq = int(starting)
        else:
            at = first_seq_at(self._js, self.opts.read, parse_time_ns(starting), state)
            seq = at if at is not None else state.next_seq
        return self._offset(max(1, seq))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_messages_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._stream_state().next_seq

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        first = self._seq_of(start)
        state = self._stream_state()
        self._check_loss(first, state)
        end = state.next_seq
        if self._target is not None:
            end = min(end, self._target)
        if isinstance(limit, ReadMaxRows):
            # Counted from the first message still stored: removed ones (allowed
            # by failOnDataLoss=false) would otherwise make empty batches.
            end = min(end, max(first, state.first_seq) + limit.max_rows)
        return self._offset(max(end, first))

    def _check_loss(self, first: int, state: StreamState) -> None:
        stream = self.opts.read.stream
        if first > state.next_seq:
            raise errors.DataLossError(
                f"jetstream: the query's next sequence {first} is past the end of stream "
                f"{stream!r} (last sequence {state.last_seq}): the stream was recreated or "
                "reset; start the query with a new checkpointLocation"
            )
        if first < state.first_seq:
            text = (
                f"jetstream: messages {first}..{state.first_seq - 1} of stream {stream!r} were "
                "removed (purge, limits or deletes) before the query read them"
            )
            if self.opts.fail_on_data_loss:
                raise errors.DataLossError(text + "; set failOnDataLoss=false to skip them")
            log.warning("%s; skipped (failOnDataLoss=false)", text)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        state = self._state
        return None if state is None else self._offset(state.next_seq)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        first, stop = self._seq_of(start), self._seq_of(end)
        read = self.opts.read
        state = self._state or self._stream_state()
        if not self.opts.fail_on_data_loss:
            first = max(first, state.first_seq)  # no tasks for what is gone
        return list(
            split(
                read.stream,
                first,
                stop - 1,
                read.partitions,
                read.max_messages_per_partition,
                pull_size(read, state),
                first_expected=self.opts.fail_on_data_loss,
                direct=use_direct(read, state),
            )
        )

    def commit(self, end: dict[str, Any]) -> None:
        log.debug("jetstream: stream %s committed up to %s", self.opts.read.stream, end)

    def stop(self) -> None:
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None:
            nc.close()

    # -- executors -------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SeqRange):
            return iter(())
        return read_range(self.opts.read, partition, self.arrow_schema, self.opts.fail_on_data_loss)
