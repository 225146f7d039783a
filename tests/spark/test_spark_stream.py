"""The streaming source's offsets, limits and data-loss rules, driven directly (no JVM).

Spark calls these methods on one long-lived driver-side reader
(``initialOffset``, ``latestOffset``, ``partitions``, ``commit``, ``stop``)
and ``read`` on pickled copies in executors; the tests do the same.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from _spark import make_source, roundtrip
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import jsclient
from jsclient.errors import DataLossError, SparkOptionError
from jsclient.spark.source import SCHEMA, JetStreamStreamReader


def publish(nc: jsclient.Client, subject: str, n: int, start: int = 0) -> None:
    js = nc.jetstream()
    for i in range(start, start + n):
        js.publish_async(subject, b"%d" % i)
    js.publish_async_complete(timeout=30)


def reader(nc: jsclient.Client, stream: str, **opts: Any) -> JetStreamStreamReader:
    r = make_source(servers=nc.connected_url, stream=stream, **opts).streamReader(SCHEMA)
    assert isinstance(r, JetStreamStreamReader)
    return r


def run_batch(r: JetStreamStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[int]:
    """One micro-batch as Spark runs it: plan on the driver, read pickled copies."""
    seqs: list[int] = []
    for part in r.partitions(start, end):
        for batch in roundtrip(r).read(roundtrip(part)):
            seqs.extend(batch.column("seq").to_pylist())
    return seqs


def test_offsets_are_stream_sequences(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    subj = f"{stream_name.lower()}.x"
    r = reader(nc, stream_name, maxMessagesPerTrigger=40, partitions=2)
    try:
        start = r.initialOffset()
        assert start == {"stream": stream_name, "seq": 1}  # empty stream: the next sequence
        assert r.latestOffset(start, r.getDefaultReadLimit()) == start
        publish(nc, subj, 100)
        assert r.getDefaultReadLimit() == ReadMaxRows(40)
        end = r.latestOffset(start, r.getDefaultReadLimit())
        assert end == {"stream": stream_name, "seq": 41}
        assert r.reportLatestOffset() == {"stream": stream_name, "seq": 101}
        assert run_batch(r, start, end) == list(range(1, 41))
        end2 = r.latestOffset(end, ReadAllAvailable())
        assert end2["seq"] == 101
        assert run_batch(r, end, end2) == list(range(41, 101))
        r.commit(end2)
        assert r.latestOffset(end2, ReadAllAvailable()) == end2  # nothing new
    finally:
        r.stop()
    assert r._nc is None


def test_starting_offsets(nc: jsclient.Client, make_stream: Any, stream_name: str) -> None:
    make_stream(stream_name)
    subj = f"{stream_name.lower()}.x"
    publish(nc, subj, 10)
    time.sleep(0.05)
    middle = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    publish(nc, subj, 5, 10)
    nc.jetstream().stream(stream_name).purge(seq=3)  # sequences 1 and 2 are gone

    def first(**opts: Any) -> int:
        r = reader(nc, stream_name, **opts)
        try:
            seq: int = r.initialOffset()["seq"]
            return seq
        finally:
            r.stop()

    assert first() == 3
    assert first(startingOffsets="latest") == 16
    assert first(startingOffsets="7") == 7
    assert first(startSeq="9") == 9
    assert first(startingOffsets=middle) == 11
    assert first(startingOffsets=datetime.now(UTC).isoformat()) == 16


def test_available_now_stops_at_the_snapshot(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    subj = f"{stream_name.lower()}.x"
    publish(nc, subj, 25)
    r = reader(nc, stream_name, maxMessagesPerTrigger=10)
    try:
        start = r.initialOffset()
        r.prepareForTriggerAvailableNow()
        publish(nc, subj, 5, 25)  # after the snapshot: not part of this run
        ends = []
        offset = start
        while True:
            nxt = r.latestOffset(offset, r.getDefaultReadLimit())
            if nxt == offset:
                break
            ends.append(nxt["seq"])
            offset = nxt
        assert ends == [11, 21, 26]
    finally:
        r.stop()


def test_deleted_messages_inside_a_batch_are_skipped(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    publish(nc, f"{stream_name.lower()}.x", 20)
    stream = nc.jetstream().stream(stream_name)
    for seq in (4, 5, 20):
        stream.delete_msg(seq)
    r = reader(nc, stream_name, partitions=3)
    try:
        start = r.initialOffset()
        end = r.latestOffset(start, ReadAllAvailable())
        assert end["seq"] == 21  # a deleted last message keeps its sequence taken
        assert run_batch(r, start, end) == [s for s in range(1, 20) if s not in (4, 5)]
    finally:
        r.stop()


def test_purged_messages_fail_the_query_unless_allowed(
    nc: jsclient.Client, make_stream: Any, stream_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    make_stream(stream_name)
    subj = f"{stream_name.lower()}.x"
    publish(nc, subj, 30)
    r = reader(nc, stream_name)
    lenient = reader(nc, stream_name, failOnDataLoss="false")
    try:
        start = r.initialOffset()
        end = r.latestOffset(start, ReadMaxRows(10))
        assert run_batch(r, start, end) == list(range(1, 11))
        nc.jetstream().stream(stream_name).purge(seq=21)  # 11..20 were never read
        with pytest.raises(DataLossError, match=r"messages 11\.\.20 .* failOnDataLoss=false"):
            r.latestOffset(end, ReadAllAvailable())
        # A batch planned before the purge and read after it fails too.
        with pytest.raises(DataLossError, match=r"messages 11\.\.20"):
            run_batch(r, end, {"stream": stream_name, "seq": 31})
        with caplog.at_level(logging.WARNING, logger="jsclient.spark"):
            nxt = lenient.latestOffset(end, ReadMaxRows(5))
        assert "skipped (failOnDataLoss=false)" in caplog.text
        # The limit counts from the first message still stored, not from the gap.
        assert nxt["seq"] == 26
        assert [(p.start, p.end) for p in lenient.partitions(end, nxt)] == [(21, 25)]
        assert run_batch(lenient, end, nxt) == list(range(21, 26))
        assert run_batch(lenient, nxt, lenient.latestOffset(nxt, ReadAllAvailable())) == list(
            range(26, 31)
        )
    finally:
        r.stop()
        lenient.stop()


def test_a_checkpoint_ahead_of_the_stream_or_of_another_stream_is_refused(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    publish(nc, f"{stream_name.lower()}.x", 3)
    r = reader(nc, stream_name)
    try:
        with pytest.raises(DataLossError, match="recreated or reset"):
            r.latestOffset({"stream": stream_name, "seq": 50}, ReadAllAvailable())
        with pytest.raises(SparkOptionError, match="is for stream 'OTHER'"):
            r.latestOffset({"stream": "OTHER", "seq": 1}, ReadAllAvailable())
    finally:
        r.stop()


def test_driver_reader_pickles_without_its_connection(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    publish(nc, f"{stream_name.lower()}.x", 3)
    r = reader(nc, stream_name)
    try:
        start = r.initialOffset()
        assert r._nc is not None and r._nc.is_connected
        copy = roundtrip(r)
        assert copy._nc is None
        [part] = copy.partitions(start, {"stream": stream_name, "seq": 4})
        table = pa.Table.from_batches(list(copy.read(part)))
        assert table.column("data").to_pylist() == [b"0", b"1", b"2"]
    finally:
        r.stop()
        copy.stop()
