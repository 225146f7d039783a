"""The threaded rows' registry entries, their fixed per-message work, and the GIL header line."""

from __future__ import annotations

import functools
import os
import sysconfig

from jsbench import interp, threads
from jsbench.workloads import JSCLIENT, NATS_PY, NATSIO, RAW, by_name


def test_threaded_rows_are_registered_for_every_client() -> None:
    for k in (2, 4):
        consume = by_name(f"js-consume-threads-{k}")
        assert set(consume.fns) == {JSCLIENT, NATS_PY, NATSIO}
        assert consume.setup is not None and consume.check is None
        publish = by_name(f"js-publish-threads-{k}")
        assert set(publish.fns) == {JSCLIENT, NATS_PY, NATSIO, RAW}
        assert publish.setup is not None and publish.check is not None
        for row in (consume, publish):
            for client, fn in row.fns.items():
                assert isinstance(fn, functools.partial)
                if client != RAW:  # the raw ceiling is one thread
                    assert fn.keywords["threads"] == k, (row.name, client)
        # the consume rows share the other consume rows' pre-filled stream
        assert (consume.n, consume.quick_n) == (by_name("js-consume-ack").n, 20_000)


def test_work_is_fixed_pure_python_arithmetic() -> None:
    assert threads.work(b"x" * 16) == threads.work(b"y" * 16)  # depends on the size only
    assert threads.work(b"x" * 16) != threads.work(b"x" * 17)
    assert threads.work(b"", rounds=0) == 0
    assert threads.work(b"ab", rounds=2) == ((2 * 31 + 0) * 31 + 1) % 1_000_003


def test_shares_split_evenly() -> None:
    assert threads.shares(10, 4) == [3, 3, 2, 2]
    assert threads.shares(3, 4) == [1, 1, 1, 0]
    assert sum(threads.shares(50_001, 2)) == 50_001


def test_gil_line() -> None:
    assert interp.gil_status({}, True, None) == "GIL (default build)"
    assert interp.gil_status({"Py_GIL_DISABLED": 0}, None, "0") == "GIL (default build)"
    free = {"Py_GIL_DISABLED": 1}
    assert interp.gil_status(free, False, "0") == "free-threaded build, GIL off (PYTHON_GIL=0)"
    assert interp.gil_status(free, True, None) == "free-threaded build, GIL on (PYTHON_GIL=unset)"
    info = interp.interpreter_info()
    gil_env = os.environ.get("PYTHON_GIL")
    here = interp.gil_status(sysconfig.get_config_vars(), interp._gil_enabled(), gil_env)
    assert info["gil"] == here
    assert interp.describe_interpreter(info)[1].endswith(f"; {info['gil']}")
    old = {k: v for k, v in info.items() if k != "gil"}  # a report written before the field
    assert interp.describe_interpreter(old)[1].endswith(info["machine"])


def test_scaling_rows_run_jsclient_with_1_2_4_threads() -> None:
    from jsbench import scaling

    rows = {w.name: w for w in scaling.scaling_workloads()}
    for family in ("gil-consume", "gil-publish", "gil-svc"):
        for k in (1, 2, 4):
            w = rows[f"{family}-{k}"]
            assert set(w.fns) == {JSCLIENT}
            fn = w.fns[JSCLIENT]
            assert isinstance(fn, functools.partial) and fn.keywords["threads"] == k
            assert by_name(w.name) is not None  # a child finds it by name
    assert {"gil-django-1", "gil-django-2"} <= set(rows)


def test_scaling_table_puts_gil_on_and_off_side_by_side() -> None:
    from jsbench import scaling

    rows = {w.name: w for w in scaling.scaling_workloads()}
    out = [
        scaling.ScalingRow(rows["gil-consume-1"], {"1": [100.0, 110.0, 90.0], "0": [100.0]}),
        scaling.ScalingRow(rows["gil-consume-2"], {"1": [105.0], "0": [190.0]}),
        scaling.ScalingRow(rows["gil-publish-2"], {"1": [5.0], "0": []}),
    ]
    lines = scaling.table(out).splitlines()
    assert lines[0].split()[:4] == ["row", "GIL", "on", "msg/s"]
    one, two, pub = lines[2].split(), lines[3].split(), lines[4].split()
    assert one == ["gil-consume-1", "100", "1.00x", "100", "1.00x", "1.00x"]
    assert two == ["gil-consume-2", "105", "1.05x", "190", "1.90x", "1.81x"]
    assert pub == ["gil-publish-2", "5", "-", "-", "-", "-"]  # no 1-thread row, no GIL-off run


def test_scaling_needs_a_free_threaded_build() -> None:
    from jsbench import scaling

    why = scaling.unavailable()
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        assert why is None
    else:
        assert why is not None and "free-threaded" in why
