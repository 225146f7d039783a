"""The one place that picks the Cython speedups or the pure-Python protocol.

``JSCLIENT_IMPL`` selects it:

- ``auto`` (default): the Cython twins when they load, else pure Python;
- ``c``: the Cython twins, and an ``ImportError`` if they cannot load (no
  silent fallback: a user who asked for speed must know they did not get it);
- ``python``: the pure-Python modules, which are the specification.

``IMPL`` says which is active ("c" or "python"). The rest of the package takes
the protocol modules from here, never from ``jsclient.protocol`` directly.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

#: Protocol concerns that have a Cython twin, by module name.
MODULES = ("parser", "jsack", "status", "jsheaders", "sizes", "delivery", "readstate", "writer")

_CHOICES = ("auto", "c", "python")


def _choose() -> tuple[str, dict[str, ModuleType]]:
    choice = os.environ.get("JSCLIENT_IMPL", "auto").strip().lower() or "auto"
    if choice not in _CHOICES:
        raise ImportError(f"JSCLIENT_IMPL={choice!r}: expected one of {', '.join(_CHOICES)}")
    if choice in ("auto", "c"):
        try:
            mods = {n: importlib.import_module(f"jsclient._speedups.{n}") for n in MODULES}
        except ImportError as exc:
            if choice == "c":
                raise ImportError(
                    f"JSCLIENT_IMPL=c but the Cython speedups cannot be loaded ({exc}); "
                    "reinstall jsclient with a C compiler available, or set JSCLIENT_IMPL=python"
                ) from exc
        else:
            return "c", mods
    return "python", {n: importlib.import_module(f"jsclient.protocol.{n}") for n in MODULES}


IMPL, _mods = _choose()

parser: ModuleType = _mods["parser"]
jsack: ModuleType = _mods["jsack"]
status: ModuleType = _mods["status"]
jsheaders: ModuleType = _mods["jsheaders"]
sizes: ModuleType = _mods["sizes"]
delivery: ModuleType = _mods["delivery"]
readstate: ModuleType = _mods["readstate"]
writer: ModuleType = _mods["writer"]
