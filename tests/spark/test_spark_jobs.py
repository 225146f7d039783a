"""Real Spark jobs through the ``jetstream`` data source: one local SparkSession, real server.

These start a JVM (about 5-10 s, once per run, shared by every test here) and
run real jobs in Spark's Python workers, so they are few and small; the
behaviour in detail is covered by the JVM-free tests next to them. Together
they take about 40 s on the project's 2-vCPU machine. Like every test of
tests/spark, scripts/test.sh runs them once, in the JSCLIENT_IMPL=c run
(tests/conftest.py says why); a plain ``pytest`` runs them with whichever
implementation it uses (the workers inherit it). No test calls
``register()`` before the last one: every job finds the source the way
users' jobs do, through Spark's scan for ``pyspark_*`` modules.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jsclient
from jsclient.spark.source import JetStreamDataSource, JetStreamWriter

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def publish(nc: jsclient.Client, items: list[tuple[str, bytes, Any]]) -> None:
    js = nc.jetstream()
    for subject, data, headers in items:
        js.publish_async(subject, data, headers=headers)
    js.publish_async_complete(timeout=30)


def stored(nc: jsclient.Client, stream: str) -> list[Any]:
    js = nc.jetstream()
    total = js.stream(stream).info().state.messages
    oc = js.ordered_consumer(stream)
    out: list[Any] = []
    while len(out) < total:
        out.extend(oc.fetch(total - len(out), expires=5))
    oc.delete()
    return out


def test_read_a_stream_into_a_dataframe(
    spark_session: Any, nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    subj = stream_name.lower()
    items = [
        (f"{subj}.{i % 3}", b"order %d" % i, {"K": ["x", "y"]} if i % 100 == 0 else None)
        for i in range(500)
    ]
    publish(nc, items)
    df = (
        spark_session.read.format("jetstream")
        .option("servers", nc.connected_url)
        .option("stream", stream_name)
        .option("partitions", 3)
        .load()
    )
    assert df.columns == ["stream", "subject", "seq", "timestamp", "data", "headers"]
    assert df.schema.simpleString() == (
        "struct<stream:string,subject:string,seq:bigint,timestamp:timestamp,data:binary,"
        "headers:map<string,array<string>>>"
    )
    rows = sorted(df.collect(), key=lambda r: r.seq)
    want = stored(nc, stream_name)
    assert len(rows) == len(want) == 500
    for row, msg in zip(rows, want, strict=True):
        md = msg.metadata
        assert (row.stream, row.subject, row.seq, row.data) == (
            stream_name,
            msg.subject,
            md.sequence.stream,
            msg.data,
        )
        # The session time zone is UTC: Spark shows the UTC wall clock, to the microsecond.
        assert row.timestamp == md.timestamp.replace(tzinfo=None)
        if msg.raw_headers is None:
            assert row.headers is None
        else:
            assert row.headers == {"K": ["x", "y"]}
    # Pruning and filtering work on top (Spark does them after the read).
    assert df.where("subject LIKE '%.1'").count() == 167


def test_write_a_dataframe_and_read_it_back(
    spark_session: Any, nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    make_stream(stream_name)
    subj = stream_name.lower()
    df = spark_session.range(0, 300, numPartitions=3).selectExpr(
        f"concat('{subj}.', cast(id % 2 as string)) as subject",
        "concat('payload-', cast(id as string)) as data",
        "map('Id', array(cast(id as string), 'extra')) as headers",
    )
    df.write.format("jetstream").option("servers", nc.connected_url).mode("append").save()
    back = (
        spark_session.read.format("jetstream")
        .option("servers", nc.connected_url)
        .option("stream", stream_name)
        .load()
        .selectExpr("subject", "cast(data as string) as data", "headers")
        .collect()
    )
    got = sorted((r.subject, r.data, tuple(r.headers["Id"])) for r in back)
    want = sorted((f"{subj}.{i % 2}", f"payload-{i}", (str(i), "extra")) for i in range(300))
    assert got == want
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("jetstream").option("servers", nc.connected_url).save()


class FlakyJetStream(JetStreamDataSource):
    """``jetstream`` whose partition 0 dies, on its first attempt, after a partial write."""

    @classmethod
    def name(cls) -> str:
        return "jetstream_flaky"

    def writer(self, schema: Any, overwrite: bool) -> JetStreamWriter:
        w = super().writer(schema, overwrite)
        return FlakyWriter(w.opts, w.plan, w.write_id)


class FlakyWriter(JetStreamWriter):
    def write(self, iterator: Iterator[Any]) -> Any:
        from pyspark import TaskContext

        tc = TaskContext.get()
        if tc.partitionId() == 0 and tc.attemptNumber() == 0:
            iterator = self._dies(iterator)
        return super().write(iterator)

    def _dies(self, batches: Iterator[Any]) -> Iterator[Any]:
        yield next(batches)
        # The writer published that batch; fail once some of it is stored, and
        # say how far it got (a core message the test listens for).
        with jsclient.connect(self.opts.conn.servers) as conn:
            stream = conn.jetstream().stream(self.opts.stream or "")
            deadline = time.monotonic() + 30
            while stream.info().state.messages == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            conn.publish(f"observed.{stream.name}", b"%d" % stream.info().state.messages)
        raise RuntimeError("injected failure after a partial write")


def test_a_retried_write_task_adds_no_duplicates(
    spark_session: Any, nc: jsclient.Client, make_stream: Any, stream_name: str
) -> None:
    """Partition 0's first attempt dies after some of its rows are stored; Spark retries it."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests
    spark_session.dataSource.register(FlakyJetStream)
    make_stream(stream_name)
    observed = nc.subscribe(f"observed.{stream_name}")
    nc.flush()
    conf = spark_session.conf
    conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")  # several input batches
    try:
        (
            spark_session.range(0, 1000, numPartitions=2)
            .selectExpr("cast(concat('r', cast(id as string)) as binary) as data")
            .write.format("jetstream_flaky")
            .option("servers", nc.connected_url)
            .option("stream", stream_name)
            .option("subject", f"{stream_name.lower()}.x")
            .mode("append")
            .save()
        )
    finally:
        conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    # The first attempt of partition 0 had stored rows when it failed...
    assert int(observed.next_msg(timeout=5).data) > 0
    # ...and its retry re-sent them with the same ids: the stream holds each row once.
    msgs = stored(nc, stream_name)
    assert sorted(m.data for m in msgs) == sorted(b"r%d" % i for i in range(1000))
    assert len({m.header_values("Nats-Msg-Id")[0] for m in msgs}) == 1000


def test_streaming_copy_restarts_from_its_checkpoint_exactly_once(
    spark_session: Any,
    nc: jsclient.Client,
    make_stream: Any,
    stream_name: str,
    tmp_path: Path,
) -> None:
    src = make_stream(stream_name)
    dst = make_stream(stream_name + "_COPY", subjects=[f"{stream_name.lower()}_copy.>"])
    url = nc.connected_url
    publish(nc, [(f"{src.lower()}.{i % 2}", b"m%d" % i, None) for i in range(300)])
    checkpoint = str(tmp_path / "checkpoint")

    def run() -> Any:
        query = (
            spark_session.readStream.format("jetstream")
            .option("servers", url)
            .option("stream", src)
            .option("maxMessagesPerTrigger", 120)
            .load()
            .writeStream.format("jetstream")
            .option("servers", url)
            .option("subject", f"{dst.lower()}.copied")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120), "the availableNow query did not finish"
        assert query.exception() is None
        return query

    first = run()
    assert [p["numInputRows"] for p in first.recentProgress if p["numInputRows"]] == [120, 120, 60]
    assert len(stored(nc, dst)) == 300
    # More messages arrive while the query is stopped.
    publish(nc, [(f"{src.lower()}.{i % 2}", b"m%d" % i, None) for i in range(300, 500)])
    # Make the restart replay the last micro-batch too (as after a crash between
    # the sink's write and Spark's commit): the sink must add nothing for it.
    commits = Path(checkpoint, "commits")
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    os.remove(commits / str(last))
    crc = commits / f".{last}.crc"
    if crc.exists():
        os.remove(crc)
    second = run()
    replayed = [p["numInputRows"] for p in second.recentProgress if p["numInputRows"]]
    assert replayed[0] == 60  # the replayed batch
    copied = stored(nc, dst)
    assert sorted(m.data for m in copied) == sorted(b"m%d" % i for i in range(500))
    assert {m.subject for m in copied} == {f"{dst.lower()}.copied"}


def test_a_dead_server_fails_the_task_with_a_clear_error_in_bounded_time(
    spark_session: Any,
) -> None:
    silent = socket.socket()  # accepts connections and never says a word
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    url = f"nats://127.0.0.1:{silent.getsockname()[1]}"
    try:
        df = spark_session.range(0, 10, numPartitions=1).selectExpr(
            "cast(cast(id as string) as binary) as data"
        )
        t = time.monotonic()
        with pytest.raises(Exception) as info:
            (
                df.write.format("jetstream")
                .option("servers", url)
                .option("subject", "a.b")
                .option("connectTimeout", 1)
                .mode("append")
                .save()
            )
        took = time.monotonic() - t
        text = str(info.value)
        assert "jetstream: writing partition 0" in text
        assert f"cannot connect to {url} (connect timeout 1 s)" in text
        assert took < 60  # two attempts of about one second each, plus Spark's own time
        t = time.monotonic()
        with pytest.raises(Exception, match="cannot connect") as info:
            (
                spark_session.read.format("jetstream")
                .option("servers", url)
                .option("stream", "S")
                .option("connectTimeout", 1)
                .load()
                .collect()
            )
        assert time.monotonic() - t < 60
    finally:
        silent.close()


def test_register_and_the_demo(
    spark_session: Any, nc: jsclient.Client, shared_nats_server: Any
) -> None:
    import jsclient.spark
    from jsclient.spark import demo
    from jsclient.spark.source import JetStreamDataSource

    assert jsclient.spark.register(spark_session) is JetStreamDataSource
    out: list[str] = []
    assert demo.run(spark_session, shared_nats_server.url, count=2000, say=out.append) == 0
    text = "\n".join(out)
    assert "every order exactly once: True" in text, text
