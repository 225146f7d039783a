"""``python -m jsclient demo --spark``: a Spark job on JetStream, end to end.

On an embedded nats-server (or ``--server URL``) and a local SparkSession:

1. jsclient publishes orders (JSON) to the stream ``SPARKDEMO_ORDERS``;
2. a batch job reads the stream into a DataFrame, parses the JSON and sums
   the revenue per region;
3. it writes one message per region to ``SPARKDEMO_TOTALS`` and reads them back;
4. a streaming query copies the large orders to ``SPARKDEMO_BIG``
   (``trigger(availableNow=True)``, checkpointed), stops; more orders arrive;
   it restarts from its checkpoint, and the demo checks that every large order
   is in ``SPARKDEMO_BIG`` exactly once.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ORDERS, TOTALS, BIG = "SPARKDEMO_ORDERS", "SPARKDEMO_TOTALS", "SPARKDEMO_BIG"
REGIONS = ("emea", "amer", "apac")
BIG_AMOUNT = 900


def local_session(cores: int = 2) -> Any:
    """A quiet local SparkSession on loopback whose workers run this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("jsclient-spark-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _order(i: int) -> bytes:
    # Deterministic "random" amounts, so a run can be checked.
    amount = (i * 7919) % 1000
    return json.dumps({"id": i, "region": REGIONS[i % 3], "amount": amount}).encode()


def _publish_orders(js: Any, start: int, count: int) -> None:
    for i in range(start, start + count):
        js.publish_async(f"sparkdemo.orders.{REGIONS[i % 3]}", _order(i), msg_id=f"order-{i}")
    js.publish_async_complete(timeout=120)


def run(spark: Any, url: str, count: int = 20_000, say: Callable[[str], Any] = print) -> int:
    """Run the demo on ``spark`` against the server at ``url``; 0 when every check passed."""
    from pyspark.sql import functions as F

    import jsclient

    with jsclient.connect(url, name="jsclient-spark-demo") as nc:
        js = nc.jetstream(publish_async_stall_wait=30.0)
        for name, subjects in (
            (ORDERS, ["sparkdemo.orders.>"]),
            (TOTALS, ["sparkdemo.totals.>"]),
            (BIG, ["sparkdemo.big"]),
        ):
            try:
                js.delete_stream(name)
            except jsclient.errors.NotFoundError:
                pass
            js.create_stream(name=name, subjects=subjects, duplicate_window=600.0)
        t = time.perf_counter()
        _publish_orders(js, 0, count)
        say(f"published {count:,} orders with jsclient in {time.perf_counter() - t:.2f}s")

        def read(stream: str) -> Any:
            return (
                spark.read.format("jetstream")
                .option("servers", url)
                .option("stream", stream)
                .load()
            )

        # 2. Batch read and aggregate.
        t = time.perf_counter()
        orders = read(ORDERS).selectExpr(
            "subject",
            "seq",
            "from_json(cast(data as string), 'id long, region string, amount long') as o",
        )
        totals = (
            orders.groupBy("o.region")
            .agg(F.count("*").alias("n"), F.sum("o.amount").alias("revenue"))
            .collect()
        )
        secs = time.perf_counter() - t
        by_region = {r["region"]: (r["n"], r["revenue"]) for r in totals}
        say(f"batch read + aggregate of {count:,} orders: {secs:.2f}s")
        for region in sorted(by_region):
            n, revenue = by_region[region]
            say(f"  {region}: {n:,} orders, revenue {revenue:,}")
        expected = {
            region: (
                sum(1 for i in range(count) if REGIONS[i % 3] == region),
                sum((i * 7919) % 1000 for i in range(count) if REGIONS[i % 3] == region),
            )
            for region in REGIONS
        }
        totals_ok = by_region == expected

        # 3. Batch write: one message per region, subject from a column.
        rows = [
            (f"sparkdemo.totals.{k}", json.dumps({"revenue": v[1]})) for k, v in by_region.items()
        ]
        spark.createDataFrame(rows, "subject string, data string").write.format("jetstream").option(
            "servers", url
        ).mode("append").save()
        written = sorted(r.subject for r in read(TOTALS).select("subject").collect())
        say(f"wrote {len(written)} totals to {TOTALS}: {', '.join(written)}")

        # 4. Streaming: copy large orders, stop, more orders, restart from the checkpoint.
        checkpoint = tempfile.mkdtemp(prefix="jsclient-spark-demo-")

        def stream_big() -> Any:
            query = (
                spark.readStream.format("jetstream")
                .option("servers", url)
                .option("stream", ORDERS)
                .option("maxMessagesPerTrigger", max(1000, count // 4))
                .load()
                .where(f"get_json_object(cast(data as string), '$.amount') >= {BIG_AMOUNT}")
                .select("data")
                .writeStream.format("jetstream")
                .option("servers", url)
                .option("subject", "sparkdemo.big")
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination(600)
            if query.exception() is not None:
                raise query.exception()
            return sum(p["numInputRows"] for p in query.recentProgress)

        t = time.perf_counter()
        seen = stream_big()
        say(f"streaming query read {seen:,} orders in {time.perf_counter() - t:.2f}s and stopped")
        more = max(1, count // 10)
        _publish_orders(js, count, more)
        t = time.perf_counter()
        seen = stream_big()
        say(
            f"{more:,} more orders published; the restarted query read only the {seen:,} new "
            f"ones in {time.perf_counter() - t:.2f}s"
        )
        big_ids = sorted(json.loads(m.data)["id"] for m in _all(js, BIG))
        want = [i for i in range(count + more) if (i * 7919) % 1000 >= BIG_AMOUNT]
        exactly_once = big_ids == want
        say(
            f"{BIG} holds {len(big_ids):,} large orders of {len(want):,}; "
            f"every order exactly once: {exactly_once}"
        )
        for name in (ORDERS, TOTALS, BIG):
            js.delete_stream(name)
    ok = totals_ok and exactly_once and len(written) == len(REGIONS)
    return 0 if ok else 1


def _all(js: Any, stream: str) -> list[Any]:
    total = js.stream(stream).info().state.messages
    oc = js.ordered_consumer(stream)
    out: list[Any] = []
    while len(out) < total:
        batch = list(oc.fetch(min(10_000, total - len(out)), expires=5))
        if not batch:
            break
        out.extend(batch)
    oc.delete()
    return out


def main(url: str | None, count: int) -> int:
    """The CLI entry: embedded server unless ``url``, a local session, the demo."""
    import jsclient
    import jsclient.spark
    from jsclient.server import NatsServer

    print(f"jsclient {jsclient.__version__}: PySpark data source 'jetstream' demo")
    spark = local_session()
    # Spark finds the source by itself when jsclient is installed from a wheel;
    # registering also covers editable (development) installs.
    jsclient.spark.register(spark)
    try:
        import pyspark

        print(f"Spark {pyspark.__version__}, local[2]")
        if url:
            return run(spark, url, count)
        with NatsServer(jetstream=True) as srv:
            print(f"embedded nats-server {srv.info.get('version', '')} at {srv.url}")
            return run(spark, srv.url, count)
    finally:
        spark.stop()
