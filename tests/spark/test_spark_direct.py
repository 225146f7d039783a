"""Reads by batched direct gets (``readMode=direct``) and the ``startingTimestamp``
option, through the data source objects against a real server, no JVM (one
Spark test at the end)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from _spark import make_source, read_all, roundtrip

import jsclient
from jsclient.errors import SparkOptionError
from jsclient.spark._read import SeqRange
from jsclient.spark.options import ReadOptions, StreamReadOptions
from jsclient.spark.source import SCHEMA, JetStreamStreamReader


def publish(nc: jsclient.Client, items: list[tuple[str, bytes, Any]]) -> list[int]:
    js = nc.jetstream()
    futures = [js.publish_async(s, d, headers=h) for s, d, h in items]
    js.publish_async_complete(timeout=30)
    return [f.result(timeout=0).seq for f in futures]


def table(nc: jsclient.Client, stream: str, **opts: Any) -> pa.Table:
    return read_all(make_source(servers=nc.connected_url, stream=stream, **opts).reader(SCHEMA))


def plan(nc: jsclient.Client, stream: str, **opts: Any) -> list[SeqRange]:
    parts = make_source(servers=nc.connected_url, stream=stream, **opts).reader(SCHEMA)
    return [p for p in parts.partitions() if isinstance(p, SeqRange)]


@pytest.fixture
def filled(nc: jsclient.Client, make_stream: Any, stream_name: str) -> tuple[str, datetime]:
    """A stream allowing direct gets: 400 messages on 3 subjects (some with
    multi-valued headers, a few deleted), then 100 more after a noted time."""
    make_stream(stream_name, allow_direct=True)
    subj = stream_name.lower()
    items: list[tuple[str, bytes, Any]] = [
        (f"{subj}.{i % 3}", b"m%d" % i, {"K": ["a", "b"], "One": "1"} if i % 37 == 0 else None)
        for i in range(400)
    ]
    publish(nc, items)
    time.sleep(0.05)
    middle = datetime.now(UTC)
    time.sleep(0.05)
    publish(nc, [(f"{subj}.{i % 3}", b"late%d" % i, None) for i in range(100)])
    st = nc.jetstream().stream(stream_name)
    for seq in (1, 50, 51, 399, 500):
        st.delete_msg(seq)
    return stream_name, middle


@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"partitions": 3, "batchSize": 64},
        {"partitions": 2, "batchSize": 7, "maxBatchBytes": 100},
        {"subject": "X.1"},
        {"startSeq": 45, "endSeq": 420, "partitions": 4},
        {"startTime": "MIDDLE"},
        {"startingTimestamp": "MIDDLE_MS", "subject": "X.2"},
        {"endTime": "MIDDLE", "batchSize": 50},
    ],
)
def test_direct_read_equals_the_consumer_read(
    nc: jsclient.Client, filled: tuple[str, datetime], opts: dict[str, Any]
) -> None:
    stream, middle = filled
    values = {
        "X.1": f"{stream.lower()}.1",
        "X.2": f"{stream.lower()}.2",
        "MIDDLE": middle.isoformat(),
        "MIDDLE_MS": str(int(middle.timestamp() * 1000) + 1),
    }
    opts = {k: values.get(str(v), v) for k, v in opts.items()}
    direct_parts = plan(nc, stream, readMode="direct", **opts)
    assert direct_parts and all(p.direct for p in direct_parts)
    assert not any(p.direct for p in plan(nc, stream, **opts))  # consumer: the default
    want = table(nc, stream, readMode="consumer", **opts)
    got = table(nc, stream, readMode="direct", **opts)
    assert got.num_rows == want.num_rows > 0
    assert got.equals(want)
    seqs = got.column("seq").to_pylist()
    assert seqs == sorted(seqs) and not {1, 50, 51, 399, 500} & set(seqs)
    headers = [h for h in got.column("headers").to_pylist() if h is not None]
    if "subject" not in opts and "startTime" not in opts:
        assert headers and all(sorted(h) == [("K", ["a", "b"]), ("One", ["1"])] for h in headers)


def test_direct_read_projects_columns(nc: jsclient.Client, filled: tuple[str, datetime]) -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    stream, _ = filled
    schema = StructType([StructField("seq", LongType()), StructField("data", StringType())])
    ds = make_source(servers=nc.connected_url, stream=stream, readMode="direct", endSeq=10)
    rows = read_all(ds.reader(schema)).to_pylist()
    assert rows == [{"seq": s, "data": f"m{s - 1}"} for s in range(2, 11)]


def test_direct_falls_back_to_the_consumer(
    nc: jsclient.Client, make_stream: Any, stream_name: str, filled: tuple[str, datetime]
) -> None:
    make_stream(stream_name + "N")  # no allow_direct
    subj = (stream_name + "N").lower()
    publish(nc, [(f"{subj}.a", b"%d" % i, None) for i in range(20)])
    parts = plan(nc, stream_name + "N", readMode="direct")
    assert parts and not any(p.direct for p in parts)
    assert table(nc, stream_name + "N", readMode="direct").num_rows == 20
    # Two filters need a consumer as well.
    stream, _ = filled
    two = f"{stream.lower()}.0,{stream.lower()}.1"
    parts = plan(nc, stream, readMode="direct", subjects=two)
    assert parts and not any(p.direct for p in parts)
    assert table(nc, stream, readMode="direct", subjects=two).num_rows == 331


def test_direct_partitions_pickle(nc: jsclient.Client, filled: tuple[str, datetime]) -> None:
    stream, _ = filled
    parts = plan(nc, stream, readMode="direct", partitions=3)
    assert [roundtrip(p) for p in parts] == parts


def test_read_mode_option() -> None:
    assert ReadOptions.parse({"stream": "S"}).read_mode == "consumer"
    assert ReadOptions.parse({"stream": "S", "readMode": "DIRECT"}).read_mode == "direct"
    with pytest.raises(SparkOptionError, match="readMode"):
        ReadOptions.parse({"stream": "S", "readMode": "auto"})


# -- startingTimestamp --------------------------------------------------------------


def test_starting_timestamp_formats() -> None:
    def start(value: str) -> int | None:
        return ReadOptions.parse({"stream": "S", "startingTimestamp": value}).start_time_ns

    assert start("1700000000123") == 1_700_000_000_123_000_000  # epoch milliseconds
    assert start("0") == 0
    assert start("2023-11-14T22:13:20.123Z") == 1_700_000_000_123_000_000
    assert start("2023-11-14T22:13:20.123456789+00:00") == 1_700_000_000_123_456_789
    assert start("2023-11-14T23:13:20.123+01:00") == 1_700_000_000_123_000_000
    assert start("2023-11-14T22:13:20.123") == 1_700_000_000_123_000_000  # no offset: UTC
    for bad in ("-5", "1.5", "yesterday", "2023-13-01T00:00:00Z", "\uff11\uff12\uff13"):
        with pytest.raises(SparkOptionError, match="startingTimestamp"):
            start(bad)
    for other in ({"startTime": "2023-01-01T00:00:00Z"}, {"startingOffsets": "earliest"}):
        with pytest.raises(SparkOptionError, match="not both"):
            ReadOptions.parse({"stream": "S", "startingTimestamp": "5", **other})
    s = StreamReadOptions.parse({"stream": "S", "startingTimestamp": "1700000000123"})
    assert s.starting == "2023-11-14T22:13:20.123000000Z"


@pytest.mark.parametrize("mode", ["consumer", "direct"])
def test_starting_timestamp_batch_read(
    nc: jsclient.Client, filled: tuple[str, datetime], mode: str
) -> None:
    stream, middle = filled
    for value in (middle.isoformat(), str(int(middle.timestamp() * 1000) + 1)):
        got = table(nc, stream, readMode=mode, startingTimestamp=value)
        assert got.column("seq").to_pylist() == list(range(401, 500))
    later = str(int(time.time() * 1000) + 60_000)
    assert table(nc, stream, readMode=mode, startingTimestamp=later).num_rows == 0
    early = "2000-01-01T00:00:00Z"
    assert table(nc, stream, readMode=mode, startingTimestamp=early).num_rows == 495


@pytest.mark.parametrize("allow_direct", [True, False])
def test_starting_timestamp_streaming(
    nc: jsclient.Client, make_stream: Any, stream_name: str, allow_direct: bool
) -> None:
    make_stream(stream_name, allow_direct=allow_direct)
    subj = f"{stream_name.lower()}.x"
    publish(nc, [(subj, b"%d" % i, None) for i in range(10)])
    time.sleep(0.05)
    middle = datetime.now(UTC)
    time.sleep(0.05)
    publish(nc, [(subj, b"%d" % i, None) for i in range(10, 15)])
    for value in (middle.isoformat(), str(int(middle.timestamp() * 1000) + 1)):
        r = make_source(
            servers=nc.connected_url, stream=stream_name, startingTimestamp=value
        ).streamReader(SCHEMA)
        assert isinstance(r, JetStreamStreamReader)
        try:
            start = r.initialOffset()
            assert start == {"stream": stream_name, "seq": 11}
            end = r.latestOffset(start, r.getDefaultReadLimit())
            seqs = [
                s
                for part in r.partitions(start, end)
                for b in roundtrip(r).read(roundtrip(part))
                for s in b.column("seq").to_pylist()
            ]
            assert seqs == [11, 12, 13, 14, 15]
        finally:
            r.stop()


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_spark_reads_by_direct_get_from_a_timestamp(
    spark_session: Any, nc: jsclient.Client, filled: tuple[str, datetime]
) -> None:
    stream, middle = filled
    df = (
        spark_session.read.format("jetstream")
        .option("servers", nc.connected_url)
        .option("stream", stream)
        .option("readMode", "direct")
        .option("startingTimestamp", int(middle.timestamp() * 1000) + 1)
        .option("partitions", 2)
        .load()
    )
    rows = sorted(df.select("seq", "data").collect())
    assert [(r.seq, r.data) for r in rows] == [(s, b"late%d" % (s - 401)) for s in range(401, 500)]
