"""Fixtures running each equivalence test against both protocol implementations.

``impl`` is parametrized with ids ``py`` and ``c``; it gives a namespace with the
four twin modules (``parser``, ``jsack``, ``status``, ``sizes``) of one
implementation. ``both`` gives ``(py, c)`` for differential tests.

When the Cython modules cannot be imported, the ``c`` cases are skipped with the
reason, except when ``JSCLIENT_IMPL=c`` or ``CI`` is set: then they fail, so a
broken build can never pass as "all skipped".
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType, SimpleNamespace

import pytest

MODULES = ("parser", "jsack", "status", "jsheaders", "sizes", "delivery", "readstate", "writer")


def _load(package: str) -> SimpleNamespace:
    mods: dict[str, ModuleType] = {
        name: importlib.import_module(f"{package}.{name}") for name in MODULES
    }
    return SimpleNamespace(name=package, **mods)


PY = _load("jsclient.protocol")


def _c_or_skip() -> SimpleNamespace:
    try:
        ns = _load("jsclient._speedups")
    except ImportError as exc:
        reason = f"Cython speedups not importable ({exc}); build with setup.py build_ext --inplace"
        if os.environ.get("JSCLIENT_IMPL", "").strip().lower() == "c" or os.environ.get("CI"):
            pytest.fail(f"{reason} [JSCLIENT_IMPL=c or CI is set: failing instead of skipping]")
        pytest.skip(reason)
    ns.name = "c"
    return ns


@pytest.fixture(params=["py", "c"], scope="session")
def impl(request: pytest.FixtureRequest) -> SimpleNamespace:
    """One implementation: ``impl.parser``, ``impl.jsack``, ``impl.status``, ``impl.sizes``."""
    if request.param == "py":
        return SimpleNamespace(**{**vars(PY), "name": "py"})
    return _c_or_skip()


@pytest.fixture(scope="session")
def both() -> tuple[SimpleNamespace, SimpleNamespace]:
    """``(py, c)``: the specification and its twin, for differential tests."""
    return SimpleNamespace(**{**vars(PY), "name": "py"}), _c_or_skip()
