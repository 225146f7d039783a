"""Spark benchmark: the same jobs through ``jetstream`` (jsclient) and two nats-py peers.

    python benchmarks/spark_bench.py [--rows 100000] [--size 64] [--partitions 2] [--repeat 3]

One local SparkSession (``local[2]``) and one embedded nats-server. For each
data source, alternating and repeated:

- **read**: ``spark.read.format(...).load()`` of a stream holding ``--rows``
  messages of ``--size`` bytes, written to Spark's ``noop`` sink (every row is
  read and handed to Spark, nothing else);
- **write**: a cached DataFrame of ``--rows`` binary rows written with
  ``.mode("append").save()`` to an empty stream, until every PubAck is in.

Each format is first run once at full size, untimed in the figures (its
rates are printed as "cold"): the first Python data source job of a JVM pays
for class loading and worker start, and the JVM's compiler goes on speeding
up Spark's side of an Arrow data source over the first full-size job (a
jsclient read ran at 140-176k rows/s in that first job and at 290-370k in
the next ones, while the nats-py sources, five times slower, barely
changed). The timed runs measure the steady state a long job sees. Rows/s
are medians over ``--repeat`` runs. Each ratio is jsclient / a peer: the
ratio of the medians, and the median of the ratios of each run (a run
measures all three sources back to back, so load from other work on the
machine hits them alike; that ratio is the steadier figure on a busy
machine). The peers live in ``benchmarks/spark_peer.py``: ``natspy`` is the
minimal nats-py data source (row tuples and ``Row`` objects, Spark's plain
interface), ``natspy_arrow`` the same client code behind the Arrow interface
that ``jetstream`` uses. Spark, its Python workers, nats-server and the
clients share the machine's cores, so run it on a quiet machine and compare
ratios, not absolute rates.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import jsclient  # noqa: E402
from jsclient.server import NatsServer  # noqa: E402

FORMATS = {"jetstream": "jsclient", "natspy": "nats-py", "natspy_arrow": "nats-py+arrow"}


def session(cores: int):  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("jsclient-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def fill(nc: jsclient.Client, stream: str, rows: int, size: int) -> None:
    js = nc.jetstream(publish_async_max_pending=4000, publish_async_stall_wait=30.0)
    payload = b"x" * size
    for i in range(rows):
        js.publish_async(f"{stream.lower()}.{i % 8}", payload)
    js.publish_async_complete(timeout=120)


def reset(js: object, name: str) -> None:
    try:
        js.delete_stream(name)  # type: ignore[attr-defined]
    except jsclient.errors.NotFoundError:
        pass
    js.create_stream(name=name, subjects=[f"{name.lower()}.>"], storage="file")  # type: ignore[attr-defined]


def main() -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/spark_bench.py")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2, help="local[N] for the SparkSession")
    args = ap.parse_args()

    import spark_peer
    from pyspark import cloudpickle

    # The peer is not installed on the workers: ship its code by value.
    cloudpickle.register_pickle_by_value(spark_peer)
    from importlib.metadata import version

    import jsclient._impl as impl

    print(
        f"jsclient {jsclient.__version__} (impl={impl.IMPL}) vs nats-py {version('nats-py')}; "
        f"Python {platform.python_version()}, {os.cpu_count()} cpu; "
        f"{args.rows:,} rows of {args.size} B, {args.partitions} partitions, local[{args.cores}]"
    )
    spark = session(args.cores)
    spark.dataSource.register(spark_peer.PeerDataSource)
    spark.dataSource.register(spark_peer.PeerArrowDataSource)
    results: dict[tuple[str, str], list[float]] = {}
    with NatsServer(jetstream=True) as srv, jsclient.connect(srv.url) as nc:
        js = nc.jetstream()
        url = srv.url
        reset(js, "SRC")
        fill(nc, "SRC", args.rows, args.size)
        src = (
            spark.range(args.rows, numPartitions=args.partitions)
            .selectExpr(f"cast(repeat('x', {args.size}) as binary) as data")
            .cache()
        )
        src.count()

        def read(fmt: str, stream: str) -> float:
            t = time.perf_counter()
            (
                spark.read.format(fmt)
                .option("servers", url)
                .option("stream", stream)
                .option("partitions", args.partitions)
                .load()
                .write.format("noop")
                .mode("overwrite")
                .save()
            )
            return time.perf_counter() - t

        def write(fmt: str, df: object, rows: int) -> float:
            reset(js, "DST")
            t = time.perf_counter()
            (
                df.write.format(fmt)  # type: ignore[attr-defined]
                .option("servers", url)
                .option("subject", "dst.x")
                .mode("append")
                .save()
            )
            took = time.perf_counter() - t
            stored = js.stream("DST").info().state.messages
            if stored != rows:
                raise SystemExit(f"{fmt} wrote {stored} messages, expected {rows}")
            return took

        for fmt in FORMATS:  # warm-up at full size: JVM classes and compiler, Python workers
            cold_read = args.rows / read(fmt, "SRC")
            cold_write = args.rows / write(fmt, src, args.rows)
            print(
                f"  cold  {FORMATS[fmt]:<13} read {cold_read:>9,.0f} write {cold_write:>9,.0f}"
                " rows/s (warm-up, not in the figures)",
                flush=True,
            )
        for i in range(args.repeat):
            order = list(FORMATS)[i % 3 :] + list(FORMATS)[: i % 3]
            for fmt in order:
                secs = read(fmt, "SRC")
                results.setdefault((fmt, "read"), []).append(args.rows / secs)
                secs = write(fmt, src, args.rows)
                results.setdefault((fmt, "write"), []).append(args.rows / secs)
                print(
                    f"  run {i + 1} {FORMATS[fmt]:<13} read {results[(fmt, 'read')][-1]:>9,.0f} "
                    f"write {results[(fmt, 'write')][-1]:>9,.0f} rows/s",
                    flush=True,
                )
    spark.stop()
    print(
        f"\n{'direction':<10} {'jsclient rows/s':>16} {'nats-py rows/s':>15} {'ratio':>7}"
        f" {'nats-py+arrow rows/s':>21} {'ratio':>7}"
    )
    for direction in ("read", "write"):
        ours = statistics.median(results[("jetstream", direction)])
        peer = statistics.median(results[("natspy", direction)])
        arrow = statistics.median(results[("natspy_arrow", direction)])
        print(
            f"{direction:<10} {ours:>16,.0f} {peer:>15,.0f} {ours / peer:>6.2f}x"
            f" {arrow:>21,.0f} {ours / arrow:>6.2f}x"
        )
    print("\nmedian of the per-run ratios (jsclient / peer, each run measured back to back):")
    for direction in ("read", "write"):
        ours_runs = results[("jetstream", direction)]
        for peer_fmt in ("natspy", "natspy_arrow"):
            ratios = [a / b for a, b in zip(ours_runs, results[(peer_fmt, direction)], strict=True)]
            print(
                f"  {direction:<6} vs {FORMATS[peer_fmt]:<14} {statistics.median(ratios):>6.2f}x"
                f"   runs: {' '.join(f'{r:.1f}' for r in ratios)}"
            )
    print("(medians; the machine's cores are shared by Spark, nats-server and both clients)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
