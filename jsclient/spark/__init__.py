"""The PySpark data source ``jetstream`` (``pip install "jsclient[spark]"``).

::

    import jsclient.spark
    jsclient.spark.register(spark)      # optional: Spark also finds it on its own
    df = (spark.read.format("jetstream").option("servers", url)
          .option("stream", "ORDERS").load())
    df.write.format("jetstream").option("servers", url).option("subject", "orders.new") \\
        .mode("append").save()

Batch reads split the stream's sequence range into partitions; streaming
offsets are stream sequences; writes and the streaming sink set a
``Nats-Msg-Id`` on every message, so task retries and replayed micro-batches
add nothing twice (within the stream's duplicate window). The options, the
columns and the exactly-once bounds are in docs/spark.md.

Spark finds the source without ``register()`` through the top-level module
``pyspark_jetstream`` that this distribution installs (Spark imports every
``pyspark_*`` module and registers its ``DefaultSource``).

Importing :mod:`jsclient` never imports this package (or pyspark).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsclient.spark.source import JetStreamDataSource

__all__ = ["FORMAT", "JetStreamDataSource", "register"]

#: The format name: ``spark.read.format(jsclient.spark.FORMAT)``.
FORMAT = "jetstream"


def register(spark: Any) -> type[JetStreamDataSource]:
    """Register the ``jetstream`` data source with ``spark`` (a SparkSession) and return it."""
    from jsclient.spark.source import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)
    return JetStreamDataSource


def __getattr__(name: str) -> Any:
    # The data source classes import pyspark and pyarrow: only when asked for.
    if name == "JetStreamDataSource":
        from jsclient.spark.source import JetStreamDataSource

        return JetStreamDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
