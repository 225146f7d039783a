"""On a free-threaded build the GIL stays off: importing jsclient turns nothing back on.

CPython re-enables the GIL when it imports an extension module that has not
declared it can run without one (and warns). Every compiled speedup declares
``freethreading_compatible``; this imports every jsclient module (those of an
optional extra whose library is installed) and checks the GIL is still off.
``tests/conftest.py`` checks the same at the end of the whole run, so a test
that imports something later is caught too. On a build with a GIL these skip.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
import sysconfig
import warnings

import pytest

import jsclient

pytestmark = pytest.mark.skipif(
    not sysconfig.get_config_var("Py_GIL_DISABLED"),
    reason="this interpreter has a GIL (not a free-threaded build)",
)

# Modules of an optional extra: imported only when their library is installed.
_EXTRA = {
    "jsclient.contrib.django": "django",
    "jsclient.contrib.celery": "celery",
    "jsclient.contrib.otel": "opentelemetry",
    "jsclient.spark": "pyspark",
}


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(jsclient.__path__, "jsclient."):
        extra = next((lib for mod, lib in _EXTRA.items() if info.name.startswith(mod)), None)
        if extra is not None and importlib.util.find_spec(extra) is None:
            continue
        if ".management" in info.name or info.name.endswith(".__main__"):
            continue  # Django commands need settings; __main__ runs the CLI
        names.append(info.name)
    return names


def test_every_module_imports_with_the_gil_off() -> None:
    if os.environ.get("PYTHON_GIL") == "1":
        pytest.skip("PYTHON_GIL=1 turned the GIL on for this run")
    from jsclient import _impl

    names = _modules() + [f"jsclient._speedups.{n}" for n in _impl.MODULES]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "the GIL has been enabled ..."
        for name in names:
            try:
                importlib.import_module(name)
            except ImportError as exc:
                if "django" in str(exc).lower() or "settings" in str(exc).lower():
                    continue
                raise
    assert not sys._is_gil_enabled(), "an imported module turned the GIL back on"


def test_the_compiled_speedups_are_the_ones_in_use() -> None:
    from jsclient import _impl

    if _impl.IMPL != "c":
        pytest.skip("JSCLIENT_IMPL=python: no compiled module in use")
    for mod in _impl.MODULES:
        m = importlib.import_module(f"jsclient._speedups.{mod}")
        assert m.__file__ is not None and m.__file__.endswith(".so"), m.__file__
    assert not sys._is_gil_enabled()
