"""Batch writes and the streaming sink through the data source objects, real server, no JVM."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from _spark import make_source, roundtrip
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

import jsclient
from jsclient.errors import SparkOptionError, SparkWriteError
from jsclient.server import NatsServer
from jsclient.spark.source import SCHEMA, JetStreamCommitMessage

BIN = StructType([StructField("data", BinaryType())])


def batches(schema: StructType, rows: list[dict[str, Any]], size: int = 100) -> list[Any]:
    """Arrow batches as Spark hands them to an Arrow writer."""
    arrow = to_arrow_schema(schema, timezone="UTC")
    return [
        pa.RecordBatch.from_pylist(rows[i : i + size], schema=arrow)
        for i in range(0, len(rows), size)
    ]


def messages(nc: jsclient.Client, stream: str) -> list[Any]:
    """Every stored message, in order (an ordered consumer, independent of the writer)."""
    js = nc.jetstream()
    total = js.stream(stream).info().state.messages
    oc = js.ordered_consumer(stream)
    out: list[Any] = []
    while len(out) < total:
        out.extend(oc.fetch(total - len(out), expires=5))
    oc.delete()
    return out


def test_write_publishes_every_row_with_an_id_and_a_retry_adds_nothing(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    subj = f"{stream_name.lower()}.in"
    writer = roundtrip(
        make_source(servers=nc.connected_url, subject=subj, publishWindow=16).writer(BIN, False)
    )
    rows = [{"data": b"row %d" % i} for i in range(500)]
    msg = roundtrip(writer.write_partition(iter(batches(BIN, rows)), 3))
    assert isinstance(msg, JetStreamCommitMessage)
    assert (msg.partition, msg.published, msg.duplicates) == (3, 500, 0)
    assert (msg.first_seq, msg.last_seq) == (1, 500)
    stored = messages(nc, stream_name)
    assert [m.data for m in stored] == [r["data"] for r in rows]
    assert {m.subject for m in stored} == {subj}
    ids = [m.header_values("Nats-Msg-Id") for m in stored]
    assert ids == [[f"{writer.write_id}:3:{i}"] for i in range(500)]
    # The same task again (a Spark retry: same writer, same partition): nothing new.
    again = writer.write_partition(iter(batches(BIN, rows)), 3)
    assert (again.published, again.duplicates) == (0, 500)
    assert nc.jetstream().stream(stream_name).info().state.messages == 500


def test_a_task_failing_half_way_and_retried_stores_each_row_once(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    writer = make_source(servers=nc.connected_url, subject=f"{stream_name.lower()}.x").writer(
        BIN, False
    )
    rows = [{"data": b"%d" % i} for i in range(1000)]

    def failing() -> Iterator[Any]:
        yield from batches(BIN, rows[:600])
        raise RuntimeError("executor lost")  # Spark's input dies mid-task

    with pytest.raises(RuntimeError, match="executor lost"):
        writer.write_partition(failing(), 0, attempt=0)
    before = nc.jetstream().stream(stream_name).info().state.messages
    assert 0 < before <= 600
    retry = writer.write_partition(iter(batches(BIN, rows)), 0, attempt=1)
    assert retry.published + retry.duplicates == 1000
    # At least what was stored when the attempt died (the server may still have
    # been storing messages the dead attempt had sent).
    assert before <= retry.duplicates <= 600
    assert [m.data for m in messages(nc, stream_name)] == [r["data"] for r in rows]


def test_subject_and_string_data_columns_headers_and_msg_ids(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    subj = stream_name.lower()
    schema = StructType(
        [
            StructField("subject", StringType()),
            StructField("data", StringType()),
            StructField("headers", MapType(StringType(), ArrayType(StringType()))),
            StructField("key", IntegerType()),
        ]
    )
    rows = [
        {
            "subject": f"{subj}.{i % 2}",
            "data": f"é{i}",
            "headers": [("Multi", ["a", "b"]), ("Empty", [])] if i == 0 else None,
            "key": i,
        }
        for i in range(4)
    ]
    writer = make_source(servers=nc.connected_url, msgIdColumn="KEY").writer(schema, False)
    msg = writer.write_partition(iter(batches(schema, rows)), 0)
    assert msg.published == 4
    stored = messages(nc, stream_name)
    assert [(m.subject, m.data) for m in stored] == [
        (f"{subj}.{i % 2}", f"é{i}".encode()) for i in range(4)
    ]
    assert stored[0].header_values("Multi") == ["a", "b"]
    assert stored[0].header_values("Empty") == []
    assert [m.header_values("Nats-Msg-Id") for m in stored] == [[str(i)] for i in range(4)]
    # Row ids are business keys: the same keys from another job are duplicates.
    other = make_source(servers=nc.connected_url, msgIdColumn="key").writer(schema, False)
    assert other.write_partition(iter(batches(schema, rows)), 5).duplicates == 4


def test_subject_option_overrides_the_column_and_read_rows_can_be_written_back(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    copy = f"{stream_name.lower()}.copy"
    rows = [
        {
            "stream": "SRC",
            "subject": "src.a",
            "seq": i + 1,
            "timestamp": None,
            "data": b"%d" % i,
            "headers": [("H", ["1", "2"])],
        }
        for i in range(3)
    ]
    writer = make_source(servers=nc.connected_url, subject=copy, stream=stream_name).writer(
        SCHEMA, False
    )
    assert writer.write_partition(iter(batches(SCHEMA, rows)), 0).published == 3
    stored = messages(nc, stream_name)
    assert [(m.subject, m.data, m.header_values("H")) for m in stored] == [
        (copy, b"%d" % i, ["1", "2"]) for i in range(3)
    ]
    # The data source names the stream it expects (Nats-Expected-Stream).
    assert stored[0].header_values("Nats-Expected-Stream") == [stream_name]


def test_map_of_strings_headers(nc: jsclient.Client, make_stream: Any, stream_name: str) -> None:
    make_stream(stream_name)
    schema = StructType(
        [
            StructField("data", BinaryType()),
            StructField("headers", MapType(StringType(), StringType())),
        ]
    )
    rows = [{"data": b"x", "headers": [("A", "1"), ("B", None)]}, {"data": None, "headers": None}]
    writer = make_source(servers=nc.connected_url, subject=f"{stream_name.lower()}.x").writer(
        schema, False
    )
    writer.write_partition(iter(batches(schema, rows)), 0)
    first, second = messages(nc, stream_name)
    assert first.header_values("A") == ["1"] and first.header_values("B") == []
    assert second.data == b""  # a null payload is an empty message


@pytest.mark.parametrize(
    ("schema", "options", "error"),
    [
        (StructType([StructField("value", BinaryType())]), {"subject": "a"}, "needs a 'data'"),
        (StructType([StructField("data", LongType())]), {"subject": "a"}, "binary or string"),
        (BIN, {}, "needs the 'subject' option or a 'subject' column"),
        (
            StructType([StructField("data", BinaryType()), StructField("subject", LongType())]),
            {},
            "'subject' must be a string",
        ),
        (
            StructType(
                [
                    StructField("data", BinaryType()),
                    StructField("headers", MapType(StringType(), LongType())),
                ]
            ),
            {"subject": "a"},
            "'headers' must be map<string,string>",
        ),
        (
            StructType([StructField("data", BinaryType()), StructField("extra", LongType())]),
            {"subject": "a"},
            r"unexpected input columns \['extra'\]",
        ),
        (BIN, {"subject": "a", "msgIdColumn": "nope"}, "msgIdColumn 'nope' is not a column"),
    ],
)
def test_write_input_is_checked_on_the_driver(
    schema: StructType, options: dict[str, str], error: str
) -> None:
    with pytest.raises(SparkOptionError, match=error):
        make_source(**options).writer(schema, False)


def test_extra_columns_can_be_ignored_and_overwrite_is_refused() -> None:
    schema = StructType([StructField("data", BinaryType()), StructField("extra", LongType())])
    plan = make_source(subject="a", ignoreExtraColumns="true").writer(schema, False).plan
    assert (plan.data, plan.subject, plan.headers, plan.msg_id) == ("data", None, None, None)
    with pytest.raises(SparkOptionError, match=r"append-only.*mode\('append'\)"):
        make_source(subject="a").writer(BIN, True)
    with pytest.raises(SparkOptionError, match="append-only"):
        make_source(subject="a").streamWriter(BIN, True)


def test_row_errors_name_the_row_and_the_counts(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    subj = stream_name.lower()
    schema = StructType([StructField("subject", StringType()), StructField("data", BinaryType())])
    rows = [{"subject": f"{subj}.x", "data": b"1"}, {"subject": None, "data": b"2"}]
    writer = make_source(servers=nc.connected_url).writer(schema, False)
    error = r"after 1 of 2 rows read.*row 1 has no subject"
    with pytest.raises(SparkWriteError, match=error) as info:
        writer.write_partition(iter(batches(schema, rows)), 0)
    assert info.value.published == 1
    ids = StructType([StructField("data", BinaryType()), StructField("msg_id", StringType())])
    writer = make_source(servers=nc.connected_url, subject=f"{subj}.x").writer(ids, False)
    with pytest.raises(SparkWriteError, match="row 0 has no message id in column 'msg_id'"):
        writer.write_partition(iter(batches(ids, [{"data": b"x", "msg_id": None}])), 0)


def test_publishing_where_no_stream_listens_fails_fast(
    nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    writer = make_source(
        servers=nc.connected_url, subject=f"nostream.{stream_name}", publishRetries=0
    ).writer(BIN, False)
    t = time.monotonic()
    with pytest.raises(SparkWriteError, match=r"after 0 of 1 rows read.*not acked"):
        writer.write_partition(iter(batches(BIN, [{"data": b"x"}] * 50)), 0)
    assert time.monotonic() - t < 10
    make_stream(stream_name)
    wrong = make_source(
        servers=nc.connected_url, subject=f"{stream_name.lower()}.x", stream="OTHER"
    ).writer(BIN, False)
    with pytest.raises(SparkWriteError, match="err_code=10060"):
        wrong.write_partition(iter(batches(BIN, [{"data": b"x"}])), 0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_dead_server_fails_the_task_within_the_connect_timeout() -> None:
    writer = make_source(
        servers=f"nats://127.0.0.1:{_free_port()}", subject="a.b", connectTimeout=1
    ).writer(BIN, False)
    t = time.monotonic()
    with pytest.raises(SparkWriteError, match=r"after 0 of 0 rows.*cannot connect"):
        writer.write_partition(iter(batches(BIN, [{"data": b"x"}])), 0)
    assert time.monotonic() - t < 5


def test_server_dying_mid_write_fails_with_the_counts(
    nats_server_factory: Any, stream_name: str
) -> None:
    srv: NatsServer = nats_server_factory(jetstream=True)
    with jsclient.connect(srv.url) as nc:
        nc.jetstream().create_stream(name=stream_name, subjects=["x.>"])
    writer = make_source(
        servers=srv.url,
        subject="x.y",
        maxReconnects=1,
        reconnectWait=0.2,
        publishTimeout=3,
        publishRetries=1,
    ).writer(BIN, False)
    killed = threading.Event()

    def rows() -> Iterator[Any]:
        yield from batches(BIN, [{"data": b"a"}] * 200)
        threading.Thread(target=lambda: (srv.kill(), killed.set()), name="test-kill").start()
        assert killed.wait(10)
        yield from batches(BIN, [{"data": b"b"}] * 200)

    t = time.monotonic()
    with pytest.raises(SparkWriteError, match=r"writing partition 0 .* failed after \d+ of"):
        writer.write_partition(rows(), 0)
    assert time.monotonic() - t < 30


def test_commit_and_abort_report_what_was_written(caplog: pytest.LogCaptureFixture) -> None:
    writer = make_source(subject="a.b", writeId="job-1").writer(BIN, False)
    done = [JetStreamCommitMessage(0, 0, 10, 2, 1, 10), None, JetStreamCommitMessage(2, 1, 5, 0)]
    with caplog.at_level(logging.INFO, logger="jsclient.spark"):
        writer.commit(done[:1])
        writer.abort(done)
    text = caplog.text
    assert "write job-1 committed: 10 messages stored, 2 duplicates dropped, 1 tasks" in text
    assert "write job-1 aborted: 2 finished tasks stored 15 messages" in text
    assert "1 tasks failed" in text and "writeId=job-1" in text


def test_stream_sink_ids_come_from_the_query_and_batch(
    nc: jsclient.Client, make_stream: Any, stream_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    make_stream(stream_name)
    sink = roundtrip(
        make_source(servers=nc.connected_url, subject=f"{stream_name.lower()}.x").streamWriter(
            BIN, False
        )
    )
    rows = [{"data": b"%d" % i} for i in range(20)]
    first = sink.write_partition(iter(batches(BIN, rows)), 1, "7", "query-a")
    assert (first.published, first.duplicates) == (20, 0)
    # Micro-batch 7 replayed after a restart: nothing new.
    replay = sink.write_partition(iter(batches(BIN, rows)), 1, "7", "query-a")
    assert (replay.published, replay.duplicates) == (0, 20)
    # The next micro-batch has other ids.
    assert sink.write_partition(iter(batches(BIN, rows)), 1, "8", "query-a").published == 20
    stored = messages(nc, stream_name)
    assert stored[0].header_values("Nats-Msg-Id") == ["query-a:7:1:0"]
    assert stored[-1].header_values("Nats-Msg-Id") == ["query-a:8:1:19"]
    # Without Spark's batch id the ids are unique (nothing lost) and it says so.
    with caplog.at_level(logging.WARNING, logger="jsclient.spark"):
        assert sink.write_partition(iter(batches(BIN, rows)), 1, None, None).published == 20
    assert "will not be de-duplicated" in caplog.text
    sink.commit([first], 7)
    sink.abort([first, None], 8)


def test_header_blocks_carry_the_id_and_refuse_what_cannot_be_sent() -> None:
    from jsclient.errors import BadHeaderError
    from jsclient.spark._publish import header_block

    assert header_block("w:0:7") == b"NATS/1.0\r\nNats-Msg-Id: w:0:7\r\n\r\n"
    block = header_block("id", "ORDERS", {"A": ["1", "2"], "nats-msg-id": "theirs", "B": "x"})
    assert block == (
        b"NATS/1.0\r\nA: 1\r\nA: 2\r\nB: x\r\nNats-Msg-Id: id\r\n"
        b"Nats-Expected-Stream: ORDERS\r\n\r\n"
    )
    for bad_id in ("", "a\r\nb"):
        with pytest.raises(BadHeaderError, match="message id"):
            header_block(bad_id)
    with pytest.raises(BadHeaderError, match="header name"):
        header_block("id", None, {"Bad Name": "x"})
    with pytest.raises(BadHeaderError, match="value for header 'A'"):
        header_block("id", None, {"A": "x\r\ny"})


def test_a_server_restart_mid_write_loses_and_duplicates_nothing(
    nats_server_factory: Any, stream_name: str
) -> None:
    srv: NatsServer = nats_server_factory(jetstream=True)
    with jsclient.connect(srv.url) as nc:
        nc.jetstream().create_stream(name=stream_name, subjects=["r.>"], storage="file")
    writer = make_source(
        servers=srv.url, subject="r.x", maxReconnects=20, reconnectWait=0.2, publishWindow=200
    ).writer(BIN, False)
    rows = [{"data": b"%d" % i} for i in range(3000)]

    def feed() -> Iterator[Any]:
        parts = batches(BIN, rows, size=500)
        yield from parts[:3]
        srv.restart()  # acks in flight are lost; the store (and the ids) survive
        yield from parts[3:]

    msg = writer.write_partition(feed(), 0)
    assert msg.published + msg.duplicates == 3000
    with jsclient.connect(srv.url) as nc:
        assert sorted(m.data for m in messages(nc, stream_name)) == sorted(r["data"] for r in rows)


def test_publishes_nobody_acks_fail_after_the_publish_timeout(nc: jsclient.Client) -> None:
    # A plain subscriber takes the messages and never answers: no PubAck comes.
    sub = nc.subscribe("silent.>")
    nc.flush()
    writer = make_source(
        servers=nc.connected_url, subject="silent.x", publishTimeout=0.5, publishRetries=1
    ).writer(BIN, False)
    t = time.monotonic()
    with pytest.raises(SparkWriteError, match=r"first row 0\) were not acked after 2 attempts"):
        writer.write_partition(iter(batches(BIN, [{"data": b"x"}] * 20)), 0)
    assert time.monotonic() - t < 10
    assert sub.pending_msgs >= 2  # the first row, sent twice
