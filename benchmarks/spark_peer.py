"""The peers of the Spark benchmark: minimal data sources built on nats-py.

They do what the ``jetstream`` data source does, the way one would write it
with nats-py: each Spark task runs ``asyncio.run`` around an nats-py
connection. Reads split the stream's sequence range like jsclient's and read
each range with an ephemeral pull consumer (ack policy none, memory storage,
``fetch(1000)``), stopping at the range end or when nothing is pending.
Writes publish with ``publish_async`` (4000 in flight) and a ``Nats-Msg-Id``
per row, then wait for every ack.

- ``natspy`` is the minimal form (the design the feasibility probe measured):
  ``read`` returns row tuples and the writer takes Spark ``Row`` objects, the
  data source API's plain interface.
- ``natspy_arrow`` is the same client code behind Spark's Arrow interface
  (Arrow record batches both ways, as ``jetstream`` uses): Spark's row
  conversion drops out, so the difference left is the NATS client itself.

Benchmark-only: no auth, no TLS, no streaming, minimal error handling.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema

from jsclient.spark.source import SCHEMA


@dataclass
class PeerRange(InputPartition):
    start: int
    end: int


@dataclass
class PeerCommit(WriterCommitMessage):
    published: int
    duplicates: int


async def _connect(url: str) -> Any:
    import nats

    return await nats.connect(
        url, connect_timeout=2, allow_reconnect=False, max_reconnect_attempts=0
    )


async def _state(url: str, stream: str) -> tuple[int, int, int]:
    nc = await _connect(url)
    try:
        info = await nc.jetstream().stream_info(stream)
        return info.state.first_seq, info.state.last_seq, info.state.messages
    finally:
        await nc.close()


async def _read(url: str, stream: str, start: int, end: int) -> list[Any]:
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    nc = await _connect(url)
    rows: list[Any] = []
    try:
        js = nc.jetstream()
        name = uuid.uuid4().hex
        await js.add_consumer(
            stream,
            ConsumerConfig(
                name=name,
                deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                opt_start_seq=start,
                ack_policy=AckPolicy.NONE,
                mem_storage=True,
                inactive_threshold=60.0,
            ),
        )
        psub = await js.pull_subscribe_bind(name, stream=stream)
        done = False
        while not done:
            try:
                msgs = await psub.fetch(1000, timeout=5)
            except NatsTimeout:
                break
            for m in msgs:
                md = m.metadata
                seq = md.sequence.stream
                if seq > end:
                    done = True
                    break
                hdrs = {k: [v] for k, v in m.headers.items()} if m.headers else None
                rows.append((m.subject, seq, md.timestamp, m.data, hdrs))
                if seq >= end or md.num_pending == 0:
                    done = True
                    break
        await psub.unsubscribe()
        await js.delete_consumer(stream, name)
    finally:
        await nc.close()
    return rows


def _arrow_payloads(batches: Iterator[Any]) -> Iterator[bytes]:
    for batch in batches:
        yield from batch.column("data").to_pylist()


def _row_payloads(rows: Iterator[Any]) -> Iterator[bytes]:
    for row in rows:
        yield row.data


async def _publish(url: str, subject: str, payloads: Iterator[bytes], prefix: str) -> PeerCommit:
    nc = await _connect(url)
    try:
        js = nc.jetstream(publish_async_max_pending=4000)
        futures = []
        for row, data in enumerate(payloads):
            fut = await js.publish_async(
                subject, data, wait_stall=30.0, headers={"Nats-Msg-Id": f"{prefix}:{row}"}
            )
            futures.append(fut)
        await asyncio.wait_for(js.publish_async_completed(), timeout=60)
        acks = [f.result() for f in futures]
        dups = sum(1 for a in acks if a.duplicate)
        return PeerCommit(len(acks) - dups, dups)
    finally:
        await nc.close()


class PeerReader(DataSourceReader):
    """Row tuples (the minimal form)."""

    def __init__(self, options: Any, schema: Any) -> None:
        self.url = options.get("servers")
        self.stream = options["stream"]
        self.parts = int(options.get("partitions", "2"))
        self.arrow = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[InputPartition]:
        first, last, count = asyncio.run(_state(self.url, self.stream))
        if count == 0:
            return []
        span = last - first + 1
        size = -(-span // self.parts)
        return [PeerRange(s, min(last, s + size - 1)) for s in range(first, last + 1, size)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, PeerRange):
            return iter(())
        rows = asyncio.run(_read(self.url, self.stream, partition.start, partition.end))
        return iter([(self.stream, *row) for row in rows])


class PeerArrowReader(PeerReader):
    """One Arrow record batch per range."""

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, PeerRange):
            return iter(())
        rows = asyncio.run(_read(self.url, self.stream, partition.start, partition.end))
        if not rows:
            return iter(())
        subjects, seqs, times, datas, maps = zip(*rows, strict=True)
        hdrs = [None if h is None else list(h.items()) for h in maps]
        fields = self.arrow
        arrays = [
            pa.array([self.stream] * len(rows), fields.field("stream").type),
            pa.array(subjects, fields.field("subject").type),
            pa.array(seqs, fields.field("seq").type),
            pc.cast(pa.array(times), fields.field("timestamp").type),
            pa.array(datas, fields.field("data").type),
            pa.array(hdrs, fields.field("headers").type),
        ]
        return iter([pa.RecordBatch.from_arrays(arrays, schema=fields)])


class PeerWriter(DataSourceWriter):
    """Spark Row objects (the minimal form)."""

    def __init__(self, options: Any) -> None:
        self.url = options.get("servers")
        self.subject = options["subject"]
        self.write_id = uuid.uuid4().hex

    def _prefix(self) -> str:
        tc = TaskContext.get()
        return f"{self.write_id}:{tc.partitionId() if tc is not None else 0}"

    def write(self, iterator: Iterator[Any]) -> PeerCommit:
        payloads = _row_payloads(iterator)
        return asyncio.run(_publish(self.url, self.subject, payloads, self._prefix()))


class PeerArrowWriter(DataSourceArrowWriter, PeerWriter):
    """Arrow record batches."""

    def write(self, iterator: Iterator[Any]) -> PeerCommit:
        payloads = _arrow_payloads(iterator)
        return asyncio.run(_publish(self.url, self.subject, payloads, self._prefix()))


class PeerDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "natspy"

    def schema(self) -> Any:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return PeerReader(self.options, schema)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return PeerWriter(self.options)


class PeerArrowDataSource(PeerDataSource):
    @classmethod
    def name(cls) -> str:
        return "natspy_arrow"

    def reader(self, schema: Any) -> DataSourceReader:
        return PeerArrowReader(self.options, schema)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return PeerArrowWriter(self.options)
