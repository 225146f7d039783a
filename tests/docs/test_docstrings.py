"""Every public name the API reference shows has a docstring (issue 37).

The names are those the ``::: path`` directives of ``docs/api/*.md`` render,
so this checks exactly what the reference shows: a module's public names
(its ``__all__``), a class and its public methods and properties (inherited
ones from jsclient's own base classes too), a function. A name without a
docstring would render as a bare signature, so it fails here.

:data:`ALLOWED_MISSING` is an allow-list, empty now; a name listed that
has a docstring fails :func:`test_allow_list_has_no_stale_entries`, so the
list can only shrink.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

API = Path(__file__).resolve().parents[2] / "docs" / "api"

#: Names allowed to go without a docstring (empty: every documented name has one).
ALLOWED_MISSING: frozenset[str] = frozenset()

_DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*\n((?:[ \t]+\S.*\n)*)", re.MULTILINE)
_OPTIONAL = {  # documented modules that need an extra; skipped where it is missing
    "jsclient.contrib.django": "django",
    "jsclient.contrib.otel": "opentelemetry.instrumentation",
    "jsclient.spark": "pyspark",
}


def directives() -> dict[str, str]:
    """Every ``::: path`` of the API pages, with its options (the indented lines after it)."""
    out: dict[str, str] = {}
    for page in sorted(API.glob("*.md")):
        for path, options in _DIRECTIVE.findall(page.read_text(encoding="utf-8") + "\n"):
            out[path] = options
    return out


def resolve(path: str) -> Any:
    """The object a directive names: the longest importable module, then attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(path)


def _missing(obj: Any) -> bool:
    doc = getattr(obj, "__doc__", None)
    if not doc or not doc.strip():
        return True
    # A dataclass without a docstring gets its signature as one.
    return inspect.isclass(obj) and doc.startswith(f"{obj.__name__}(")


def _own_class(cls: type) -> bool:
    return cls.__module__.startswith("jsclient") and cls is not object


def _overrides_foreign(cls: type, name: str) -> bool:
    """Whether ``name`` overrides a method of a base outside jsclient (Future.cancel,
    RawIOBase.readable, pyspark's DataSource.reader): it follows that method's contract."""
    return any(not _own_class(base) and name in vars(base) for base in cls.__mro__[1:])


def members(path: str, obj: Any, inherited: bool = False) -> Iterator[tuple[str, Any]]:
    """``(qualified name, object)`` for every name the reference renders for ``obj``.

    A class's own members, and with ``inherited`` those of its jsclient bases.
    """
    if isinstance(obj, ModuleType):
        names = getattr(obj, "__all__", None)
        if names is None:
            names = [n for n in vars(obj) if not n.startswith("_")]
        for name in names:
            value = getattr(obj, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                yield from members(f"{path}.{name}", value)
        return
    if inspect.isclass(obj):
        yield path, obj
        seen: set[str] = set()
        for base in obj.__mro__ if inherited else (obj,):
            if not _own_class(base):
                continue
            for name, value in vars(base).items():
                if name.startswith("_") or name in seen or _overrides_foreign(obj, name):
                    continue
                seen.add(name)
                if isinstance(value, property):
                    yield f"{path}.{name}", value.fget
                elif isinstance(value, (staticmethod, classmethod)):
                    yield f"{path}.{name}", value.__func__
                elif inspect.isfunction(value):
                    yield f"{path}.{name}", value
        return
    if callable(obj):
        yield path, obj


def undocumented() -> tuple[list[str], list[str]]:
    """(names without a docstring, directives skipped for a missing extra)."""
    missing: list[str] = []
    skipped: list[str] = []
    for path, options in directives().items():
        extra = next((e for m, e in _OPTIONAL.items() if path.startswith(m)), None)
        if extra is not None:
            try:
                importlib.import_module(extra)
            except ImportError:
                skipped.append(path)
                continue
        obj = resolve(path)
        if "members: false" in options:  # the object's own docstring only
            if _missing(obj):
                missing.append(path)
            continue
        inherited = "inherited_members: true" in options
        for name, value in members(path, obj, inherited):
            if _missing(value):
                missing.append(name)
    return sorted(set(missing)), skipped


def test_api_pages_name_every_module_of_the_design() -> None:
    """The reference covers the public modules of the design (api.md)."""
    paths = directives()
    for module in (
        "jsclient.connect",
        "jsclient.Client",
        "jsclient.contexts",
        "jsclient.errors",
        "jsclient.micro",
        "jsclient.server.NatsServer",
        "jsclient.testing",
        "jsclient.spark",
        "jsclient.contrib.django",
        "jsclient.contrib.otel",
        "jsclient.Publisher",
    ):
        assert module in paths, module


def test_public_names_have_docstrings() -> None:
    missing, _ = undocumented()
    new = [n for n in missing if n not in ALLOWED_MISSING]
    assert not new, "public names without a docstring:\n  " + "\n  ".join(new)


def test_allow_list_has_no_stale_entries() -> None:
    missing, skipped = undocumented()
    if skipped:
        pytest.skip(f"extras missing for {skipped}: cannot tell which entries are stale")
    stale = sorted(ALLOWED_MISSING - set(missing))
    assert not stale, f"documented now, remove from ALLOWED_MISSING: {stale}"
