"""The code blocks of the documentation, and how the tests run them.

Every ```python block of ``docs/**/*.md`` and of ``README.md`` runs in the test
suite, so an example that no longer works fails CI. The rules a page follows:

- An *example* is one ```python block, plus the blocks after it that are
  marked ``<!-- continues -->`` (a tutorial told in steps; a ``no-run``
  block between them is no part of it). It is what a reader copies, so it
  must work when pasted alone.
- Each example runs in a fresh namespace that holds only ``url``: the URL of
  a JetStream-enabled embedded server (:class:`jsclient.server.NatsServer`).
  Nothing an earlier example defined (``nc``, ``js``, imports) is there, so an
  example imports what it uses and connects itself
  (``nc = jsclient.connect(url)``).
- The examples of one page share that page's server, in page order, and
  nothing else. So an example makes the streams, buckets and consumers it
  uses, with names no other example of the page uses, or deletes them when
  it is done; it must not count on what another example left on the server.
  ``url`` alone is the promise: the docs say so once (getting started).
- Within an example, the blocks run in order in one namespace: a
  ``<!-- continues -->`` block uses what the blocks before it made. Keep
  continuations for a page that really is one story told step by step; the
  examples of a reference page stand alone.
- An HTML comment on the line before a block's fence says how it runs:

  - ``<!-- continues -->``: the block goes on from the ```python block before
    it (it joins that block's example, and its lane);
  - ``<!-- no-run: REASON -->``: shown, never run (a reason is required;
    keep these few: a fragment of a settings file, a command line);
  - ``<!-- lane: django -->``: runs only in the Django lane
    (``tests/django/test_django_doc_examples.py``, Django configured, ``url``
    set and ``JSCLIENT`` pointing at it);
  - ``<!-- lane: spark -->``: runs only in the Spark lane
    (``tests/spark/test_spark_doc_examples.py``, marker ``spark``, with a
    local ``spark`` session in the namespace too).

- After each example, every :class:`jsclient.Client` left in its namespace
  is closed, and every embedded server it started and left there
  (``NatsServer``, ``NatsCluster``) stopped; after the page, the page's
  server is stopped.

Code blocks of every language (python, bash, text, toml ...) must also fit
the page: no line longer than :data:`MAX_COLUMNS` characters
(``tests/docs/test_code_width.py``).

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

#: The widest code line the site shows uncut (at 1280 px).
MAX_COLUMNS = 80

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_MARKER = re.compile(r"^\s*<!--\s*(no-run|lane|continues)\s*(?::\s*(.*?))?\s*-->\s*$")

#: Pages not collected, each with why (empty: every page's blocks run).
PENDING: dict[str, str] = {}


@dataclass(frozen=True)
class Fence:
    """One fenced code block of any language, its lines without the fence's indent."""

    page: str  # relative to the repository root
    line: int  # 1-based line of the first code line
    lang: str  # lower case; "" for a plain fence
    lines: tuple[str, ...]
    marker: tuple[str, str] | None = None  # (kind, value) of the comment before it


@dataclass(frozen=True)
class Block:
    """One ```python block: where it is, its code, and how it runs."""

    page: str  # relative to the repository root
    line: int  # 1-based line of the first code line
    code: str
    lane: str | None = None
    no_run: str | None = None  # the reason, when marked no-run
    continues: bool = False  # marked <!-- continues -->

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class Example:
    """What a reader pastes: a block and its ``<!-- continues -->`` blocks."""

    blocks: tuple[Block, ...]

    @property
    def page(self) -> str:
        return self.blocks[0].page

    @property
    def line(self) -> int:
        return self.blocks[0].line

    @property
    def lane(self) -> str | None:
        return self.blocks[0].lane

    @property
    def no_run(self) -> str | None:
        return self.blocks[0].no_run

    @property
    def id(self) -> str:
        return self.blocks[0].id


def pages() -> list[Path]:
    """Every Markdown file whose blocks the suite considers: docs/**/*.md and README.md."""
    return [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]


def fences(path: Path) -> list[Fence]:
    """Every fenced code block of one Markdown file, with the marker before it.

    Raises ``ValueError`` for a marker that is malformed (``no-run`` without a
    reason, an unknown lane, ``continues`` with a value) or that stands before
    no fence.
    """
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Fence] = []
    marker: tuple[str, str, int] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _MARKER.match(line)
        if m:
            kind, value = m.group(1), m.group(2) or ""
            if kind == "no-run" and not value:
                raise ValueError(f"{rel}:{i + 1}: <!-- no-run: REASON --> needs a reason")
            if kind == "lane" and value not in LANES:
                raise ValueError(f"{rel}:{i + 1}: unknown lane {value!r} (known: {LANES})")
            if kind == "continues" and value:
                raise ValueError(f"{rel}:{i + 1}: <!-- continues --> takes no value")
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
        kind_value = (marker[0], marker[1]) if marker else None
        if marker is not None and lang not in ("python", "py"):
            raise ValueError(f"{rel}:{marker[2]}: a marker before a {lang or 'plain'} block")
        out.append(Fence(rel, start, lang, tuple(body), kind_value))
        marker = None
    return out


def parse(path: Path) -> list[Block]:
    """The ```python blocks of one Markdown file, with their markers.

    Raises ``ValueError`` for a malformed or misplaced marker (see
    :func:`fences`), and for a ``continues`` block with no runnable python
    block before it.
    """
    blocks: list[Block] = []
    for f in fences(path):
        if f.lang not in ("python", "py"):
            continue
        kind, value = f.marker or ("", "")
        code = "\n".join(f.lines) + "\n"
        if kind == "continues":
            before = [b for b in blocks if b.no_run is None]
            if not before:
                where = f"{f.page}:{f.line - 1}"
                raise ValueError(
                    f"{where}: <!-- continues --> needs a runnable python block before it"
                )
            blocks.append(Block(f.page, f.line, code, before[-1].lane, None, True))
        else:
            lane = value if kind == "lane" else None
            no_run = value if kind == "no-run" else None
            blocks.append(Block(f.page, f.line, code, lane, no_run))
    return blocks


def examples(path: Path) -> list[Example]:
    """The examples of one Markdown file: each block with its continuations."""
    groups: list[list[Block]] = []
    for block in parse(path):
        if block.continues:  # joins the last example that runs (parse() checked there is one)
            next(g for g in reversed(groups) if g[0].no_run is None).append(block)
        else:
            groups.append([block])
    return [Example(tuple(g)) for g in groups]


def all_blocks() -> Iterator[Block]:
    for path in pages():
        yield from parse(path)


def all_fences() -> Iterator[Fence]:
    for path in pages():
        yield from fences(path)


def page_examples(lane: str | None) -> dict[str, list[Example]]:
    """The runnable examples of ``lane``, by page (pages with none left out; PENDING too)."""
    out: dict[str, list[Example]] = {}
    for path in pages():
        rel = path.relative_to(ROOT).as_posix()
        if rel in PENDING:
            continue
        found = [e for e in examples(path) if e.no_run is None and e.lane == lane]
        if found:
            out[rel] = found
    return out


def run_example(example: Example, namespace: dict[str, Any]) -> None:
    """Run one example's blocks in order in ``namespace`` (a fresh dict: it is filled).

    A failing block raises with the Markdown file and line in its traceback.
    Clients the example left open are closed, and servers it left running
    stopped, afterwards, whatever happened.
    """
    import jsclient
    from jsclient.server import NatsCluster, NatsServer

    try:
        for block in example.blocks:
            # Padded so that tracebacks give the line in the Markdown file.
            code = compile("\n" * (block.line - 1) + block.code, block.page, "exec")
            try:
                exec(code, namespace)
            except BaseException as exc:
                exc.add_note(f"in the example at {block.id}")
                raise
    finally:
        for value in list(namespace.values()):
            try:
                if isinstance(value, jsclient.Client) and not value.is_closed:
                    value.close()
                elif isinstance(value, (NatsServer, NatsCluster)):
                    value.stop()
            except Exception:
                pass


def run_page(found: list[Example], namespace: dict[str, Any]) -> int:
    """Run one page's examples in order, each in a fresh copy of ``namespace``.

    ``namespace`` is what every example starts with (``url``, and ``spark`` in
    the Spark lane). Returns how many examples ran.
    """
    for example in found:
        run_example(example, dict(namespace))
    return len(found)


class Counter:
    """How many examples each lane executed in this session (printed at the end)."""

    executed: dict[str, int] = {}

    @classmethod
    def add(cls, lane: str | None, n: int) -> None:
        key = lane or "default"
        cls.executed[key] = cls.executed.get(key, 0) + n
