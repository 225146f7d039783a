"""The service and request-many rows' registry entries: clients, options and targets."""

from __future__ import annotations

import functools

from jsbench import svc
from jsbench.workloads import JSCLIENT, NATS_PY, NATSIO, Target, by_name, workloads


def test_service_rows_are_registered_for_every_client() -> None:
    echo = by_name("svc-echo")
    assert echo.fns == {
        JSCLIENT: svc.js_service,
        NATS_PY: svc.py_service,
        NATSIO: svc.nio_service,
    }
    assert echo.latency and Target(NATS_PY, 1.5) in echo.targets
    for name, mode, target in (
        ("svc-io-8", "task", Target(NATS_PY, 1.0)),  # nats-py's best: side by side
        ("svc-io-8-default", "blocking", Target(NATS_PY, 5.0)),
        ("svc-io-8-executor", "executor", None),
    ):
        row = by_name(name)
        assert set(row.fns) == {JSCLIENT, NATS_PY, NATSIO}
        for client, fn in row.fns.items():
            assert isinstance(fn, functools.partial)
            assert fn.keywords["io"] is True and fn.keywords["requesters"] == 8, (name, client)
            if client == JSCLIENT:
                assert fn.func is svc.js_service and fn.keywords["threads"] == 8
            else:
                assert fn.keywords["mode"] == mode, (name, client)
        assert row.targets == ((target,) if target else ())
    assert svc.REQUESTERS == 8 and svc.IO_WAIT == 0.001


def test_request_many_row_counts_replies() -> None:
    row = by_name("request-many-100")
    assert row.fns == {
        JSCLIENT: svc.js_request_many,
        NATS_PY: svc.py_request_many,
        NATSIO: svc.nio_request_many,
    }
    assert svc.RESPONDERS == 100 and Target(NATS_PY, 3.0) in row.targets
    assert row.quick_n % svc.RESPONDERS == 0 and row.n % svc.RESPONDERS == 0
    assert svc._requests(row.quick_n) == row.quick_n // 100 and svc._requests(5) == 1


def test_service_rows_follow_the_core_rows() -> None:
    names = [w.name for w in workloads()]
    assert len(names) == len(set(names))
    start = names.index("core-request") + 1
    assert names[start : start + 5] == [
        "svc-echo",
        "svc-io-8",
        "svc-io-8-default",
        "svc-io-8-executor",
        "request-many-100",
    ]
