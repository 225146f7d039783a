"""Lets Spark find the ``jetstream`` data source with no ``register()`` call.

When a session first looks up a data source, Spark imports every top-level
module whose name starts with ``pyspark_`` and registers the ``DefaultSource``
it finds there under that source's ``name()``. This module must import
cheaply and never raise: a failure here would break every Python data source
of the session. Without pyspark or pyarrow installed it offers nothing.
"""

try:
    from jsclient.spark.source import JetStreamDataSource as DefaultSource
except Exception:  # the spark extra is not installed (or cannot load): offer nothing
    pass
else:
    __all__ = ["DefaultSource"]
