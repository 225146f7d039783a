"""Option parsing, range splitting and pickling of the ``jetstream`` data source (no server)."""

from __future__ import annotations

import itertools
import pickle
from datetime import UTC, datetime

import pytest
from _spark import make_source, roundtrip
from hypothesis import given
from hypothesis import strategies as st

import jsclient
from jsclient.errors import SparkOptionError
from jsclient.spark._read import SeqRange, StreamState, pull_size, split
from jsclient.spark.options import (
    ConnectionOptions,
    ReadOptions,
    StreamReadOptions,
    WriteOptions,
    format_time_ns,
    parse_time_ns,
)
from jsclient.spark.source import SCHEMA, JetStreamCommitMessage


def test_option_names_are_case_insensitive_and_values_strings() -> None:
    opts = ReadOptions.parse(
        {"SERVERS": "nats://h:1", "Stream": "S", "startseq": "5", "ENDSEQ": 9, "partitions": 3}
    )
    assert (opts.conn.servers, opts.stream, opts.start_seq, opts.end_seq) == (
        "nats://h:1",
        "S",
        5,
        9,
    )
    assert opts.partitions == 3


def test_aliases_path_and_url() -> None:
    opts = ReadOptions.parse({"path": "ORDERS", "url": "nats://a:1,nats://b:2"})
    assert opts.stream == "ORDERS"
    assert opts.conn.servers == "nats://a:1,nats://b:2"


def test_read_needs_a_stream() -> None:
    with pytest.raises(SparkOptionError, match="'stream' is required"):
        ReadOptions.parse({"servers": "nats://h:1"})


@pytest.mark.parametrize("bad", ["+5", "1_0", "5.0", "x", "٣", "-1"])
def test_whole_numbers_are_ascii_digits_only(bad: str) -> None:
    with pytest.raises(SparkOptionError, match="startSeq"):
        ReadOptions.parse({"stream": "S", "startSeq": bad})


def test_numbers_have_minimums() -> None:
    with pytest.raises(SparkOptionError, match="'partitions' must be at least 1"):
        ReadOptions.parse({"stream": "S", "partitions": "0"})
    with pytest.raises(SparkOptionError, match="connectTimeout"):
        ReadOptions.parse({"stream": "S", "connectTimeout": "0"})
    with pytest.raises(SparkOptionError, match="requestTimeout"):
        ReadOptions.parse({"stream": "S", "requestTimeout": "nan"})


def test_end_before_start_is_refused() -> None:
    with pytest.raises(SparkOptionError, match="endSeq"):
        ReadOptions.parse({"stream": "S", "startSeq": "10", "endSeq": "9"})
    with pytest.raises(SparkOptionError, match="endTime"):
        ReadOptions.parse(
            {"stream": "S", "startTime": "2024-01-02T00:00:00Z", "endTime": "2024-01-01"}
        )


def test_booleans() -> None:
    parsed = StreamReadOptions.parse({"stream": "S", "failOnDataLoss": "FALSE"})
    assert parsed.fail_on_data_loss is False
    assert StreamReadOptions.parse({"stream": "S"}).fail_on_data_loss is True
    with pytest.raises(SparkOptionError, match="failOnDataLoss"):
        StreamReadOptions.parse({"stream": "S", "failOnDataLoss": "maybe"})


def test_times_keep_nanoseconds_and_default_to_utc() -> None:
    assert parse_time_ns("1970-01-01T00:00:01Z") == 1_000_000_000
    assert parse_time_ns("1970-01-01T00:00:01.000000123Z") == 1_000_000_123
    assert parse_time_ns("1970-01-01T00:00:01.5") == 1_500_000_000  # naive: UTC
    assert parse_time_ns("1970-01-01T01:00:00+01:00") == 0
    assert parse_time_ns("2024-05-01") == int(datetime(2024, 5, 1, tzinfo=UTC).timestamp()) * 10**9
    ns = parse_time_ns("2024-05-01T12:34:56.123456789Z")
    assert format_time_ns(ns) == "2024-05-01T12:34:56.123456789Z"
    assert parse_time_ns(format_time_ns(ns)) == ns


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-01", "2024-05-01T00:00:00.1234567891Z"])
def test_bad_times_name_the_option(bad: str) -> None:
    with pytest.raises(SparkOptionError, match="startTime"):
        ReadOptions.parse({"stream": "S", "startTime": bad})


def test_starting_offsets() -> None:
    assert StreamReadOptions.parse({"stream": "S"}).starting == "earliest"
    assert StreamReadOptions.parse({"stream": "S", "startingOffsets": "LATEST"}).starting == (
        "latest"
    )
    assert StreamReadOptions.parse({"stream": "S", "startingOffsets": "42"}).starting == "42"
    assert StreamReadOptions.parse({"stream": "S", "startSeq": "7"}).starting == "7"
    t = "2024-05-01T00:00:00Z"
    assert StreamReadOptions.parse({"stream": "S", "startingOffsets": t}).starting == t
    with pytest.raises(SparkOptionError, match="startingOffsets"):
        StreamReadOptions.parse({"stream": "S", "startingOffsets": "soon"})


def test_tls_and_domain_options_are_checked() -> None:
    with pytest.raises(SparkOptionError, match="tlsKeyFile"):
        ConnectionOptions.parse({"tlsCertFile": "/c.pem"})
    with pytest.raises(SparkOptionError, match="jsDomain"):
        ConnectionOptions.parse({"jsDomain": "hub", "apiPrefix": "$JS.X.API"})


def test_secrets_stay_out_of_reprs_and_messages() -> None:
    conn = ConnectionOptions.parse(
        {
            "servers": "nats://alice:s3cret@127.0.0.1:1",
            "password": "pw-secret",
            "token": "tok-secret",
            "nkeySeed": "SUAseed-secret",
        }
    )
    text = repr(conn) + repr(ReadOptions.parse({"stream": "S", "token": "tok-secret"}))
    for secret in ("pw-secret", "tok-secret", "SUAseed-secret"):
        assert secret not in text
    assert conn.safe_servers == "nats://127.0.0.1:1"


def test_write_subject_must_be_publishable() -> None:
    for bad in ("a.*", "a.>", "a b", "a..b"):
        with pytest.raises(SparkOptionError, match="subject"):
            WriteOptions.parse({"subject": bad})
    opts = WriteOptions.parse({"subject": "orders.new", "publishWindow": "10"})
    assert (opts.subject, opts.publish_window, opts.publish_retries) == ("orders.new", 10, 3)


def test_split_covers_the_range_in_contiguous_near_equal_parts() -> None:
    ranges = split("S", 1, 10, 3, 100, 5)
    assert [(r.start, r.end) for r in ranges] == [(1, 4), (5, 7), (8, 10)]
    assert [r.index for r in ranges] == [0, 1, 2]
    assert split("S", 5, 4, 3, 100, 5) == []
    assert [(r.start, r.end) for r in split("S", 1, 2, 8, 100, 5)] == [(1, 1), (2, 2)]
    # Without a partition count: one range per maxMessagesPerPartition sequences.
    assert len(split("S", 1, 250_001, None, 100_000, 5)) == 3


@given(
    lo=st.integers(1, 10**12),
    span=st.integers(1, 10**6),
    parts=st.one_of(st.none(), st.integers(1, 64)),
    per=st.integers(1, 10**5),
)
def test_split_property(lo: int, span: int, parts: int | None, per: int) -> None:
    hi = lo + span - 1
    ranges = split("S", lo, hi, parts, per, 10)
    assert ranges[0].start == lo and ranges[-1].end == hi
    for a, b in itertools.pairwise(ranges):
        assert b.start == a.end + 1
    sizes = [r.end - r.start + 1 for r in ranges]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
    if parts is not None:
        assert len(ranges) == min(parts, span)


def test_pull_size_shrinks_for_large_messages() -> None:
    opts = ReadOptions.parse({"stream": "S", "batchSize": "10000", "maxBatchBytes": "1048576"})
    assert pull_size(opts, StreamState(1, 100, 100, 100 * 100)) == 10000
    assert pull_size(opts, StreamState(1, 100, 100, 100 * 65536)) == 16
    assert pull_size(opts, StreamState(1, 100, 100, 100 * 8 * 1048576)) == 1
    assert pull_size(opts, StreamState(0, 0, 0, 0)) == 10000


def test_source_reader_writer_partitions_and_messages_pickle() -> None:
    ds = make_source(servers="nats://127.0.0.1:1", stream="S", subject="s.x", token="t")
    assert ds.name() == "jetstream"
    assert ds.schema() == SCHEMA
    for obj in (
        ds,
        ds.reader(SCHEMA),
        ds.writer(SCHEMA, False),
        ds.streamReader(SCHEMA),
        ds.streamWriter(SCHEMA, False),
        SeqRange(0, "S", 1, 10, 5),
        JetStreamCommitMessage(0, 1, 2, 3, 4, 5),
    ):
        copy = roundtrip(obj)
        assert type(copy) is type(obj)
        pickle.dumps(copy)
    assert roundtrip(SeqRange(0, "S", 1, 10, 5)) == SeqRange(0, "S", 1, 10, 5)
    # The write id is made once per job: every task and every retry sees the same.
    writer = ds.writer(SCHEMA, False)
    assert roundtrip(writer).write_id == writer.write_id
    assert make_source(subject="s.x", writeId="job-7").writer(SCHEMA, False).write_id == "job-7"


def test_importing_jsclient_does_not_import_pyspark() -> None:
    import subprocess
    import sys

    code = "import sys, jsclient, jsclient.spark; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    assert jsclient.spark.FORMAT == "jetstream"
