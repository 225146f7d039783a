"""The package's layout rules: no import circle, and no tooling in the client.

Every import counts: at module level, inside functions, and under
``TYPE_CHECKING`` (a type-only circle is still two modules that cannot be
read, tested or moved apart). The layers above the core reach it through
the internal interfaces ``jsclient._core.Core`` and
``jsclient.jetstream._ctx.Context`` instead of importing ``client.py`` or
``context.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules(package: str) -> dict[str, Path]:
    mods = {}
    for path in (ROOT / package).rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports (each ``from a import b`` names ``a.b``
    when that is a module, else ``a``)."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in mods)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[: len(base) - node.level + 1]
                mod = ".".join([*parent, *([node.module] if node.module else [])])
            else:
                mod = node.module or ""
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                if sub in mods:
                    out.add(sub)
                elif mod in mods:
                    out.add(mod)
    out.discard(name)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _graph(package: str) -> dict[str, set[str]]:
    mods = _modules(package)
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def test_the_checker_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_circle_in_the_client() -> None:
    graph = _graph("jsclient")
    assert "jsclient.client" in graph and "jsclient.jetstream.context" in graph
    assert _cycles(graph) == []


def test_no_import_circle_in_the_tooling() -> None:
    assert _cycles(_graph("jsbench")) == []


def test_the_client_never_imports_the_tooling() -> None:
    # Only the command line's ``bench`` looks for it, in a checkout, when asked.
    mods = _modules("jsclient")
    users = sorted(n for n, p in mods.items() if "jsbench" in _imports_any(p))
    assert users == ["jsclient.__main__"]


def _imports_any(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names
