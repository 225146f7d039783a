"""The reliability suite's short form (marker ``reliability``; in the default selection).

It runs the scenarios of :mod:`jsbench.reliability` small enough for
CI: every test here is marked ``reliability`` (``-m reliability`` selects
just them, ``-m "not reliability"`` skips them). The whole suite runs twice,
once per protocol implementation; the scenarios whose subject is not the
protocol implementation but the server or the cluster (3-node failover with
4-9 s elections, the soak) are marked ``once`` and run only in the
``JSCLIENT_IMPL=c`` run (and when no implementation is forced), which keeps
this directory near a minute per run. The long form with the full sizes and
the figures is ``python -m jsclient bench --reliability``.
"""

from __future__ import annotations

import os

import pytest

_PYTHON_RUN = os.environ.get("JSCLIENT_IMPL", "auto").strip().lower() == "python"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    skip = pytest.mark.skip(reason="heavy scenario: runs once, in the JSCLIENT_IMPL=c run")
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.reliability)
            if _PYTHON_RUN and item.get_closest_marker("once") is not None:
                item.add_marker(skip)
