"""The service and request-many rows' registry entries: clients, options and targets."""

from __future__ import annotations

import functools

from jsbench import report, svc
from jsbench.result import Result
from jsbench.workloads import JSCLIENT, NATS_PY, NATSIO, Target, by_name, workloads


def test_service_rows_are_registered_for_every_client() -> None:
    echo = by_name("svc-echo")  # the service in a process of its own
    assert echo.fns == {
        JSCLIENT: svc.js_remote_echo,
        NATS_PY: svc.py_remote_echo,
        NATSIO: svc.nio_remote_echo,
    }
    assert echo.latency and echo.targets == (Target(NATS_PY, 1.5),)
    assert "process of its own" in echo.description
    local = by_name("svc-echo-local")  # service and requester on one connection
    assert local.fns == {
        JSCLIENT: svc.js_service,
        NATS_PY: svc.py_service,
        NATSIO: svc.nio_service,
    }
    assert local.latency and local.targets == ()
    assert "on one connection" in local.description
    assert (echo.n, echo.quick_n, echo.size) == (local.n, local.quick_n, local.size)
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
    assert names[start : start + 6] == [
        "svc-echo",
        "svc-echo-local",
        "svc-io-8",
        "svc-io-8-default",
        "svc-io-8-executor",
        "request-many-100",
    ]


def test_the_service_process_cpu_is_reported_per_request() -> None:
    """svc-echo's ``peer_cpu`` (the service process's CPU) survives the child's JSON and
    shows in the CPU table after the client's own, before the server's."""
    runs = [
        Result.from_dict(Result(100.0, cpu=0.5, server_cpu=0.2, peer_cpu=0.3).as_dict()),
        Result.from_dict(Result(100.0, cpu=0.5, server_cpu=0.2, peer_cpu=0.3).as_dict()),
    ]
    st = report.client_stats(runs, n=10_000)
    assert (st.cpu_us, st.peer_cpu_us, st.server_cpu_us) == (50.0, 30.0, 20.0)
    assert report._cpu_cell(st) == "50.00 +30.00 peer (20.00)"
    plain = report.client_stats([Result(100.0, cpu=0.5, server_cpu=0.2)], n=10_000)
    assert plain.peer_cpu_us is None and report._cpu_cell(plain) == "50.00 (20.00)"
    old = report.ClientStats(**{k: v for k, v in st.__dict__.items() if k != "peer_cpu_us"})
    assert old.peer_cpu_us is None  # a report saved before the field still loads
