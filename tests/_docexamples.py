"""The ```python blocks of the documentation, and how the tests run them.

Every ```python block of ``docs/**/*.md`` and of ``README.md`` runs in the test
suite, so an example that no longer works fails CI. The rules a page follows:

- A page's blocks run in order, in one namespace, so a later block uses what
  an earlier one made (``nc``, ``js``, a stream).
- The namespace starts with ``url``: the URL of a fresh JetStream-enabled
  embedded server (:class:`jsclient.server.NatsServer`) for that page alone.
  The docs say so once (getting started); a block may also start its own.
- An HTML comment on the line before a block's fence says how it runs:

  - ``<!-- no-run: REASON -->``: shown, never run (a reason is required;
    keep these few: a fragment of a settings file, a command line);
  - ``<!-- lane: django -->``: runs only in the Django lane
    (``tests/django/test_django_doc_examples.py``, Django configured, ``url``
    set and ``JSCLIENT`` pointing at it);
  - ``<!-- lane: spark -->``: runs only in the Spark lane
    (``tests/spark/test_spark_doc_examples.py``, marker ``spark``, with a
    local ``spark`` session in the namespace).

- After the page, every :class:`jsclient.Client` left in the namespace is
  closed and the server stopped.

This module is shared by the three lanes (``tests/docs``, ``tests/django``,
``tests/spark``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: Lanes a block may name; the default lane is ``None`` (tests/docs).
LANES = ("django", "spark")

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_MARKER = re.compile(r"^\s*<!--\s*(no-run|lane)\s*:\s*(.*?)\s*-->\s*$")

#: Pages not collected, each with why (empty: every page's blocks run).
PENDING: dict[str, str] = {}


@dataclass(frozen=True)
class Block:
    """One ```python block: where it is, its code, and how it runs."""

    page: str  # relative to the repository root
    line: int  # 1-based line of the first code line
    code: str
    lane: str | None = None
    no_run: str | None = None  # the reason, when marked no-run

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """Every Markdown file whose blocks the suite considers: docs/**/*.md and README.md."""
    return [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]


def parse(path: Path) -> list[Block]:
    """The ```python blocks of one Markdown file, with their markers.

    Raises ``ValueError`` for a marker that is malformed (``no-run`` without a
    reason, an unknown lane) or that stands before no python block.
    """
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    marker: tuple[str, str, int] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _MARKER.match(line)
        if m:
            kind, value = m.group(1), m.group(2)
            if kind == "no-run" and not value:
                raise ValueError(f"{rel}:{i + 1}: <!-- no-run: REASON --> needs a reason")
            if kind == "lane" and value not in LANES:
                raise ValueError(f"{rel}:{i + 1}: unknown lane {value!r} (known: {LANES})")
            marker = (kind, value, i + 1)
            i += 1
            continue
        f = _FENCE.match(line)
        if f is None:
            if line.strip() and marker is not None:
                raise ValueError(f"{rel}:{marker[2]}: a marker must stand right before a fence")
            i += 1
            continue
        indent, fence, lang = f.group(1), f.group(2), f.group(3).lower()
        body: list[str] = []
        i += 1
        start = i + 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            text = lines[i]
            body.append(text[len(indent) :] if text.startswith(indent) else text.lstrip())
            i += 1
        i += 1  # the closing fence
        if lang in ("python", "py"):
            lane = marker[1] if marker and marker[0] == "lane" else None
            no_run = marker[1] if marker and marker[0] == "no-run" else None
            blocks.append(Block(rel, start, "\n".join(body) + "\n", lane, no_run))
        elif marker is not None:
            raise ValueError(f"{rel}:{marker[2]}: a marker before a {lang or 'plain'} block")
        marker = None
    return blocks


def all_blocks() -> Iterator[Block]:
    for path in pages():
        yield from parse(path)


def page_blocks(lane: str | None) -> dict[str, list[Block]]:
    """The runnable blocks of ``lane``, by page (pages with none left out; PENDING too)."""
    out: dict[str, list[Block]] = {}
    for path in pages():
        rel = path.relative_to(ROOT).as_posix()
        if rel in PENDING:
            continue
        blocks = [b for b in parse(path) if b.no_run is None and b.lane == lane]
        if blocks:
            out[rel] = blocks
    return out


def run_page(blocks: list[Block], namespace: dict[str, Any]) -> int:
    """Run one page's blocks in order in ``namespace``; returns how many ran.

    A failing block raises with the Markdown file and line in its traceback.
    Clients the blocks left open are closed afterwards, whatever happened.
    """
    import jsclient

    ran = 0
    try:
        for block in blocks:
            # Padded so that tracebacks give the line in the Markdown file.
            code = compile("\n" * (block.line - 1) + block.code, block.page, "exec")
            try:
                exec(code, namespace)
            except BaseException as exc:
                exc.add_note(f"in the example at {block.id}")
                raise
            ran += 1
    finally:
        for value in list(namespace.values()):
            if isinstance(value, jsclient.Client) and not value.is_closed:
                try:
                    value.close()
                except Exception:
                    pass
    return ran


class Counter:
    """How many examples each lane executed in this session (printed at the end)."""

    executed: dict[str, int] = {}

    @classmethod
    def add(cls, lane: str | None, n: int) -> None:
        key = lane or "default"
        cls.executed[key] = cls.executed.get(key, 0) + n
