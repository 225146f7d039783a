"""Every ```python block of the docs runs against an embedded server (issue 37).

The rules (one namespace per page, ``url``, the ``no-run`` and ``lane``
markers) are in ``tests/_docexamples.py``. Blocks of the ``django`` and
``spark`` lanes run in ``tests/django`` and ``tests/spark``.
"""

from __future__ import annotations

from pathlib import Path

import _docexamples
import pytest
from _docexamples import PENDING, Block, Counter, all_blocks, page_blocks, parse, run_page

from jsclient.server import NatsServer

PAGES = page_blocks(None)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_examples_run(page: str) -> None:
    """The page's blocks run in order, in one namespace, against a fresh server."""
    with NatsServer(jetstream=True) as srv:
        ran = run_page(PAGES[page], {"__name__": "__docs__", "url": srv.url})
    Counter.add(None, ran)


def test_every_block_runs_somewhere_or_says_why() -> None:
    """Markers are well-formed, and no-run blocks stay few and explained."""
    blocks: list[Block] = list(all_blocks())  # parse() raises on a malformed marker
    skipped = [b for b in blocks if b.no_run is not None and b.page not in PENDING]
    runnable = [b for b in blocks if b.no_run is None and b.page not in PENDING]
    assert len(runnable) >= 50, len(runnable)  # a floor: collection still finds them
    assert len(skipped) <= len(runnable) // 10, [b.id for b in skipped]


def test_markers_are_parsed(tmp_path: Path) -> None:
    """Lines, code, lanes and reasons are read; a bad marker is an error."""
    page = tmp_path / "p.md"
    page.write_text(
        "text\n\n```python\na = 1\n```\n\n<!-- no-run: a settings fragment -->\n"
        "```python\nb = 2\n```\n<!-- lane: django -->\n```python\nc = 3\n```\n"
        "```bash\necho\n```\n",
        encoding="utf-8",
    )
    original = _docexamples.ROOT
    _docexamples.ROOT = tmp_path
    try:
        blocks = parse(page)
        assert [(b.line, b.code, b.lane, b.no_run) for b in blocks] == [
            (4, "a = 1\n", None, None),
            (9, "b = 2\n", None, "a settings fragment"),
            (13, "c = 3\n", "django", None),
        ]
        page.write_text("<!-- no-run: -->\n```python\nx\n```\n", encoding="utf-8")
        with pytest.raises(ValueError, match="needs a reason"):
            parse(page)
        page.write_text("<!-- lane: flask -->\n```python\nx\n```\n", encoding="utf-8")
        with pytest.raises(ValueError, match="unknown lane"):
            parse(page)
    finally:
        _docexamples.ROOT = original
