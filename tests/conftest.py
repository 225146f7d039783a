"""Suite-wide settings.

Hypothesis: no per-example deadline. The suite shares two vCPUs with a real
nats-server, so a slow example is load, not a bug; the example counts stay as
each test sets them.

Tests that run once (marker ``impl_independent``). CI runs the suite once per
protocol implementation (``JSCLIENT_IMPL=c`` and ``python``). A test whose
outcome the implementation cannot change would only run the same thing twice,
so :data:`ONCE` lists them, each group with its reason, and this file marks
them ``impl_independent``. They are deselected only when ``JSCLIENT_ONCE``
names another implementation than the run's: ``scripts/test.sh`` sets
``JSCLIENT_ONCE=c`` for both of its full runs, so the speedups' run takes them
and the pure-Python one leaves them out. Without ``JSCLIENT_ONCE`` (a developer's
``pytest``, the quick suite on the other Pythons) everything runs.

The rule: a test runs once when the run's implementation never reaches it
(checked when the list was made, 2026-11-27: with ``jsclient._impl`` given
private copies of the protocol modules, no test of the first two groups
called into one), or when its subject sits above the protocol layer and
every protocol twin it passes through is pinned on both implementations by
the tests that still run twice. Anything that parses frames, acks, statuses or
headers, routes deliveries, writes, measures sizes, or is about threads,
interrupts, forks or faults runs twice. A file not listed runs twice.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("jsclient", deadline=None)
settings.load_profile("jsclient")

#: Implementation-independent test files and folders (relative to tests/), by reason.
ONCE: dict[str, tuple[str, ...]] = {
    # The fixtures ``impl`` and ``both`` import jsclient.protocol.* and
    # jsclient._speedups.* themselves: every run tests both twins.
    "each test runs both twins itself": ("equivalence/",),
    # Pure-Python modules with no twin, or the twins' pure-Python spec imported
    # directly (jsclient.protocol.parser, jsack, status, sizes: the Cython
    # twins face the same vectors in tests/equivalence). Not here:
    # test_commands_headers, test_pull_logic and test_threads_bounded, which
    # reach the twins through jsclient._impl.
    "no code the implementation selects": tuple(
        f"unit/test_{name}.py"
        for name in (
            "bench_report",
            "bench_svc_rows",
            "bench_threads",
            "cli",
            "connection_units",
            "errors_reference",
            "future",
            "jsack",
            "kv_stream_config",
            "layout",
            "message_features",
            "obj_meta",
            "parser",
            "priority_options",
            "reader_poll",
            "sizes",
            "status",
            "window",
        )
    ),
    # Above the protocol layer: what they check is written by the Spark source,
    # the Django integration, the managed publisher's flow control, retries,
    # probes, drain and stop (its interrupt safety, test_publisher_safety, runs
    # twice), the benchmark harness, the embedded server runner, and the
    # layouts jsclient's stream, KV, object and service code share with
    # nats-py and nats.js. The frames, acks and statuses they pass through are pinned on
    # both twins by the suites that run twice (test_js_publish, test_kv*,
    # test_obj*, test_core_*, test_write_queue, ...).
    "subject above the protocol layer": (
        "spark/",
        "django/",
        "integration/test_publisher.py",
        "integration/test_bench_runner.py",
        "integration/test_bench_svc.py",
        "integration/test_server.py",
        "integration/test_js_interop.py",
        "integration/test_kv_interop.py",
        "integration/test_obj_interop.py",
        "integration/test_natsjs_interop.py",
        "integration/test_pcgroups_interop.py",
        "integration/test_micro_natsjs.py",
        # The site's strict build, links, headings and docstrings (the pages'
        # examples, tests/docs/test_doc_examples.py, run on both).
        "docs/test_site.py",
        "docs/test_docstrings.py",
    ),
    # Real Celery workers on jsclient.contrib.celery: kombu and Celery above the
    # transport, run once as the issue asks. The pulls, acks, keep-alives and KV
    # reads the transport makes are pinned on both twins by the suites that run
    # twice (test_keepalive, test_kv*, test_js_*).
    "Celery workers, above the protocol layer": ("celery/",),
}

_TESTS = Path(__file__).parent
_IMPLS = ("c", "python")


def _once_reason(path: Path) -> str | None:
    try:
        rel = path.relative_to(_TESTS).as_posix()
    except ValueError:
        return None
    for reason, places in ONCE.items():
        if any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in places):
            return reason
    return None


def _once_impl() -> str | None:
    """The implementation whose run takes the once tests (``JSCLIENT_ONCE``), if any."""
    once = os.environ.get("JSCLIENT_ONCE", "").strip().lower()
    if once and once not in _IMPLS:
        raise pytest.UsageError(f"JSCLIENT_ONCE={once!r}: expected one of {', '.join(_IMPLS)}")
    return once or None


def pytest_configure(config: pytest.Config) -> None:
    _once_impl()  # a typo fails the run instead of running or leaving out the wrong tests


def _left_out() -> str | None:
    """The implementation that takes the once tests when it is not this run's, else None."""
    once = _once_impl()
    if once is None:
        return None
    from jsclient import _impl  # the run's implementation, also under JSCLIENT_IMPL=auto

    return None if once == _impl.IMPL else once


def _gil_should_stay_off() -> bool:
    """A free-threaded build not told ``PYTHON_GIL=1``: the GIL must stay off all run."""
    import sysconfig

    return bool(sysconfig.get_config_var("Py_GIL_DISABLED")) and (
        os.environ.get("PYTHON_GIL") != "1"
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """On a free-threaded build, fail the run if anything it imported turned the GIL on."""
    import sys

    if _gil_should_stay_off() and sys._is_gil_enabled():
        session.config.get_terminal_writer().line(
            "the GIL was turned back on during this run: an extension module without "
            "free-threading support was imported (see the RuntimeWarning above)",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_report_header(config: pytest.Config) -> str | None:
    if _once_impl() is None:
        return None
    other = _left_out()
    if other is None:
        return "impl_independent tests: run here"
    return f"impl_independent tests: left out, the JSCLIENT_IMPL={other} run takes them"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep: list[pytest.Item] = []
    once: list[pytest.Item] = []
    for item in items:
        reason = _once_reason(item.path)
        if reason is None:
            keep.append(item)
        else:
            item.add_marker(pytest.mark.impl_independent(reason=reason))
            once.append(item)
    if once and _left_out() is not None:
        config.hook.pytest_deselected(items=once)
        items[:] = keep
