"""Fixtures for the ``jetstream`` data source tests.

Most tests drive the data source objects directly, the way Spark's workers
do (build the source from options, plan, pickle, read or write), against a
real nats-server and without a JVM (helpers in ``_spark.py``). The few tests
marked ``spark`` share one local SparkSession for the whole run
(``spark_session``): starting a JVM costs seconds, so it is made once, on
first use, and stopped at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import jsclient
from jsclient.server import NatsServer

ROOT = Path(__file__).resolve().parents[2]
_TESTS_DIR = str(ROOT / "tests")
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)


@pytest.fixture
def stream_name() -> str:
    """A stream name of this test's own (tests share one server)."""
    return "T" + uuid.uuid4().hex[:10].upper()


@pytest.fixture
def js_server(shared_nats_server: NatsServer) -> NatsServer:
    return shared_nats_server


@pytest.fixture
def nc(shared_nats_server: NatsServer) -> Iterator[jsclient.Client]:
    client = jsclient.connect(shared_nats_server.url)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def make_stream(nc: jsclient.Client) -> Iterator[Callable[..., str]]:
    """``make_stream(name, subjects=[...], **config)``; every stream is deleted at teardown."""
    js = nc.jetstream()
    made: list[str] = []

    def make(name: str, subjects: list[str] | None = None, **config: Any) -> str:
        js.create_stream(name=name, subjects=subjects or [f"{name.lower()}.>"], **config)
        made.append(name)
        return name

    try:
        yield make
    finally:
        for name in made:
            try:
                js.delete_stream(name)
            except jsclient.errors.Error:
                pass


# -- the shared SparkSession ---------------------------------------------------


def _spark_available() -> str | None:
    if shutil.which("java") is None:
        return "no java on PATH"
    return None


@pytest.fixture(scope="session")
def spark_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local SparkSession (2 threads, a task may fail once and is retried)."""
    why = _spark_available()
    if why:
        pytest.skip(why)
    # The workers run this interpreter (the default, "python3" on PATH, may lack
    # jsclient), and see the source tree: in an editable install the top-level
    # module pyspark_jetstream is importable but hidden from pkgutil, which
    # Spark's auto-discovery scans (an installed wheel has no such problem;
    # tests/packaging checks it). Both must be set before the JVM starts.
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP", "PYTHONPATH")}
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    path = os.environ.get("PYTHONPATH", "")
    if str(ROOT) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), path) if p)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2,2]")
        .appName("jsclient-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
