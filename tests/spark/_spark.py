"""Helpers for the data source tests: build the source as Spark does, pickle, read."""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import CaseInsensitiveDict

from jsclient.spark.source import JetStreamDataSource


def make_source(**options: Any) -> JetStreamDataSource:
    """The data source as Spark builds it: string options in a case-insensitive map."""
    return JetStreamDataSource(CaseInsensitiveDict({k: str(v) for k, v in options.items()}))


def roundtrip(obj: Any) -> Any:
    """What Spark does to readers, writers, partitions and commit messages."""
    from pyspark import cloudpickle

    return pickle.loads(cloudpickle.dumps(obj))


def read_all(reader: Any) -> pa.Table:
    """Plan, ship each partition (pickled) to a 'task' and read it, as Spark would."""
    reader = roundtrip(reader)
    batches = []
    for part in reader.partitions():
        batches.extend(roundtrip(reader).read(roundtrip(part)))
    return pa.Table.from_batches(batches, schema=reader.arrow_schema)
