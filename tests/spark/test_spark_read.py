"""Batch reads through the ``jetstream`` data source objects, against a real server, no JVM."""

from __future__ import annotations

import socket
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from _spark import make_source, read_all, roundtrip
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

import jsclient
from jsclient.errors import SparkOptionError, SparkReadError
from jsclient.server import NatsServer
from jsclient.spark._read import SeqRange
from jsclient.spark.source import SCHEMA


def publish(nc: jsclient.Client, items: list[tuple[str, bytes, Any]]) -> list[int]:
    """Publish (subject, data, headers) with acks; the stream sequences."""
    js = nc.jetstream()
    futures = [js.publish_async(s, d, headers=h) for s, d, h in items]
    js.publish_async_complete(timeout=30)
    return [f.result(timeout=0).seq for f in futures]


def stored(nc: jsclient.Client, stream: str) -> dict[int, dict[str, Any]]:
    """Every stored message by sequence, read independently with an ordered consumer."""
    js = nc.jetstream()
    oc = js.ordered_consumer(stream)
    out: dict[int, dict[str, Any]] = {}
    total = js.stream(stream).info().state.messages
    while len(out) < total:
        for m in oc.fetch(total - len(out), expires=5):
            md = m.metadata
            raw = m.raw_headers
            out[md.sequence.stream] = {
                "stream": stream,
                "subject": m.subject,
                "seq": md.sequence.stream,
                "timestamp": datetime.fromtimestamp(md.timestamp_ns // 1000 / 1e6, UTC).replace(
                    microsecond=(md.timestamp_ns // 1000) % 1_000_000
                ),
                "data": m.data,
                "headers": (
                    None
                    if raw is None
                    else [(k, m.header_values(k)) for k in dict.fromkeys(m.headers or {})]
                ),
            }
    oc.delete()
    return out


def test_read_returns_every_message_with_every_column(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    subj = stream_name.lower()
    items: list[tuple[str, bytes, Any]] = []
    for i in range(300):
        headers = None
        if i % 50 == 0:
            headers = {"Trace": ["a", "b", "c"], "One": "1"}  # multi-valued: every value kept
        items.append((f"{subj}.{i % 3}", bytes([i % 256]) * (i % 7), headers))
    seqs = publish(nc, items)
    ds = make_source(servers=nc.connected_url, stream=stream_name, partitions=4, batchSize=64)
    reader = ds.reader(SCHEMA)
    table = read_all(reader)
    assert table.schema == to_arrow_schema(SCHEMA, timezone="UTC")
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    rows = table.to_pylist()
    assert [r["seq"] for r in rows] == seqs
    want = stored(nc, stream_name)
    for row in rows:
        assert row == want[row["seq"]]
    assert rows[0]["headers"] == [("Trace", ["a", "b", "c"]), ("One", ["1"])]
    assert rows[1]["headers"] is None and rows[1]["data"] == b"\x01"
    # Nothing is left on the server: every range's consumer was deleted.
    assert list(nc.jetstream().stream(stream_name).consumer_names()) == []


def test_partitions_split_the_sequence_range(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    publish(nc, [(f"{stream_name.lower()}.x", b"%d" % i, None) for i in range(100)])
    reader = make_source(servers=nc.connected_url, stream=stream_name, partitions=3).reader(SCHEMA)
    parts = roundtrip(reader).partitions()
    assert [(p.start, p.end) for p in parts] == [(1, 34), (35, 67), (68, 100)]
    counts = [sum(b.num_rows for b in reader.read(roundtrip(p))) for p in parts]
    assert counts == [34, 33, 33]
    # Default: one range per maxMessagesPerPartition sequences.
    reader = make_source(
        servers=nc.connected_url, stream=stream_name, maxMessagesPerPartition=40
    ).reader(SCHEMA)
    assert len(reader.partitions()) == 3


def test_sequence_and_subject_filters(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    subj = stream_name.lower()
    publish(nc, [(f"{subj}.{'ab'[i % 2]}", b"%d" % i, None) for i in range(40)])
    url = nc.connected_url

    def seqs(**opts: Any) -> list[int]:
        reader = make_source(servers=url, stream=stream_name, **opts).reader(SCHEMA)
        return read_all(reader).column("seq").to_pylist()

    assert seqs(startSeq=11, endSeq=20) == list(range(11, 21))
    assert seqs(startSeq=35, endSeq=1000) == list(range(35, 41))
    assert seqs(startSeq=100) == []
    assert seqs(subject=f"{subj}.b") == list(range(2, 41, 2))
    assert seqs(subject=f"{subj}.a", startSeq=10, endSeq=20, partitions=3) == list(range(11, 20, 2))
    assert seqs(subjects=f"{subj}.a, {subj}.b", endSeq=5) == [1, 2, 3, 4, 5]


def test_time_filters(nc: jsclient.Client, make_stream: Any, stream_name: str) -> None:
    make_stream(stream_name)
    subj = f"{stream_name.lower()}.x"
    publish(nc, [(subj, b"old", None)] * 5)
    time.sleep(0.05)
    middle = datetime.now(UTC)
    time.sleep(0.05)
    publish(nc, [(subj, b"new", None)] * 5)
    time.sleep(0.05)
    end = datetime.now(UTC)
    time.sleep(0.05)
    publish(nc, [(subj, b"later", None)] * 2)
    url = nc.connected_url

    def data(**opts: Any) -> list[bytes]:
        reader = make_source(servers=url, stream=stream_name, **opts).reader(SCHEMA)
        return read_all(reader).column("data").to_pylist()

    assert data(startTime=middle.isoformat()) == [b"new"] * 5 + [b"later"] * 2
    assert data(startTime=middle.isoformat(), endTime=end.isoformat()) == [b"new"] * 5
    assert data(endTime=middle.isoformat()) == [b"old"] * 5
    assert data(startTime=datetime.now(UTC).isoformat()) == []
    # No consumer is left behind by resolving times to sequences.
    assert list(nc.jetstream().stream(stream_name).consumer_names()) == []


def test_deleted_messages_are_skipped_and_empty_streams_read_nothing(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    url = nc.connected_url
    reader = make_source(servers=url, stream=stream_name).reader(SCHEMA)
    assert reader.partitions() == []
    # Spark turns an empty plan into one InputPartition(None).
    assert list(reader.read(InputPartition(None))) == []
    publish(nc, [(f"{stream_name.lower()}.x", b"%d" % i, None) for i in range(20)])
    stream = nc.jetstream().stream(stream_name)
    for seq in (1, 5, 6, 7, 20):
        stream.delete_msg(seq)
    table = read_all(make_source(servers=url, stream=stream_name, partitions=4).reader(SCHEMA))
    assert table.column("seq").to_pylist() == [s for s in range(2, 20) if s not in (5, 6, 7)]
    stream.purge()
    assert read_all(make_source(servers=url, stream=stream_name).reader(SCHEMA)).num_rows == 0


def test_small_batches_and_large_messages(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    subj = f"{stream_name.lower()}.x"
    publish(nc, [(subj, bytes([i]) * 200_000, None) for i in range(12)])
    reader = make_source(
        servers=nc.connected_url, stream=stream_name, maxBatchBytes=500_000
    ).reader(SCHEMA)
    [part] = reader.partitions()
    assert part.pull == 2  # about maxBatchBytes per pull request
    batches = list(reader.read(part))
    assert all(b.num_rows <= 3 for b in batches)
    assert [r[0] for r in pa.Table.from_batches(batches).column("data").to_pylist()] == list(
        range(12)
    )
    reader = make_source(servers=nc.connected_url, stream=stream_name, batchSize=5).reader(SCHEMA)
    assert [b.num_rows for b in reader.read(reader.partitions()[0])] == [5, 5, 2]


def test_a_given_schema_is_projected(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    publish(nc, [(f"{stream_name.lower()}.x", "héllo %d".encode() % i, None) for i in range(3)])
    schema = StructType([StructField("data", StringType()), StructField("seq", LongType())])
    table = read_all(make_source(servers=nc.connected_url, stream=stream_name).reader(schema))
    assert table.to_pylist() == [{"data": f"héllo {i}", "seq": i + 1} for i in range(3)]
    with pytest.raises(SparkOptionError, match="no column 'payload'"):
        make_source(stream=stream_name).reader(StructType([StructField("payload", BinaryType())]))
    with pytest.raises(SparkOptionError, match="'seq' cannot be read as string"):
        make_source(stream=stream_name).reader(StructType([StructField("seq", StringType())]))


def test_payload_that_is_not_utf8_read_as_string_fails_clearly(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    publish(nc, [(f"{stream_name.lower()}.x", b"\xff\xfe", None)])
    schema = StructType([StructField("data", StringType())])
    with pytest.raises(SparkReadError, match=r"not valid string.*binary"):
        read_all(make_source(servers=nc.connected_url, stream=stream_name).reader(schema))


def test_a_lost_consumer_is_recreated_and_nothing_is_read_twice(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    publish(nc, [(f"{stream_name.lower()}.x", b"%d" % i, None) for i in range(50)])
    reader = make_source(servers=nc.connected_url, stream=stream_name, batchSize=10).reader(SCHEMA)
    [part] = reader.partitions()
    it = reader.read(part)
    first = next(it)
    stream = nc.jetstream().stream(stream_name)
    for name in list(stream.consumer_names()):
        stream.delete_consumer(name)
    rest = list(it)
    seqs = [s for b in [first, *rest] for s in b.column("seq").to_pylist()]
    assert seqs == list(range(1, 51))


def test_missing_stream_fails_at_planning_with_the_server_error(
    nc: jsclient.Client, stream_name: str
) -> None:
    reader = make_source(servers=nc.connected_url, stream=stream_name).reader(SCHEMA)
    with pytest.raises(SparkReadError, match=rf"stream '{stream_name}'.*err_code=10059"):
        reader.partitions()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_dead_or_silent_server_fails_within_the_connect_timeout() -> None:
    dead = f"nats://127.0.0.1:{_free_port()}"
    reader = make_source(servers=dead, stream="S", connectTimeout=1).reader(SCHEMA)
    t = time.monotonic()
    with pytest.raises(SparkReadError, match=r"cannot connect to nats://127\.0\.0\.1"):
        reader.partitions()
    assert time.monotonic() - t < 5
    # A server that accepts the connection and never speaks: bounded too.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"nats://127.0.0.1:{silent.getsockname()[1]}"
        reader = make_source(servers=url, stream="S", connectTimeout=1).reader(SCHEMA)
        t = time.monotonic()
        with pytest.raises(SparkReadError, match=r"cannot connect.*connect timeout 1 s"):
            list(reader.read(SeqRange(0, "S", 1, 10, 100)))
        assert time.monotonic() - t < 5


def test_server_dying_mid_read_fails_the_read_within_its_bounds(
    nats_server_factory: Any, stream_name: str
) -> None:
    srv: NatsServer = nats_server_factory(jetstream=True)
    with jsclient.connect(srv.url) as nc:
        nc.jetstream().create_stream(name=stream_name, subjects=["x.>"])
        publish(nc, [("x.y", b"%d" % i, None) for i in range(50)])
    reader = make_source(
        servers=srv.url, stream=stream_name, batchSize=10, maxReconnects=1, reconnectWait=0.2
    ).reader(SCHEMA)
    [part] = reader.partitions()
    it = reader.read(part)
    next(it)
    killer = threading.Thread(target=srv.kill, name="test-kill-server")
    killer.start()
    killer.join(10)
    t = time.monotonic()
    with pytest.raises(SparkReadError, match=rf"reading stream '{stream_name}'.*failed after"):
        list(it)
    assert time.monotonic() - t < 20
