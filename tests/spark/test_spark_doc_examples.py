"""The docs' ``<!-- lane: spark -->`` examples, on the suite's SparkSession (issue 37).

The rules are in ``tests/_docexamples.py``. A block's
``SparkSession.builder...getOrCreate()`` gets the shared session, and its
``spark.stop()`` is a no-op here, so the session lives on for the other tests.
"""

from __future__ import annotations

from typing import Any

import pytest
from _docexamples import Counter, page_examples, run_page

from jsclient.server import NatsServer

PAGES = page_examples("spark")


@pytest.mark.spark
@pytest.mark.parametrize("page", sorted(PAGES))
def test_spark_page_examples_run(
    page: str, spark_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(type(spark_session), "stop", lambda self: None)
    with NatsServer(jetstream=True) as srv:
        ran = run_page(
            PAGES[page], {"__name__": "__docs__", "url": srv.url, "spark": spark_session}
        )
    Counter.add("spark", ran)
