"""Every ```python block of the docs runs against an embedded server (issue 37).

The rules (an example is a block and its ``<!-- continues -->`` blocks, each
example in a fresh namespace holding ``url``, one server per page, the
``no-run`` and ``lane`` markers) are in ``tests/_docexamples.py``. Examples
of the ``django`` and ``spark`` lanes run in ``tests/django`` and
``tests/spark``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import _docexamples
import pytest
from _docexamples import (
    PENDING,
    Block,
    Counter,
    Example,
    all_blocks,
    examples,
    page_examples,
    parse,
    run_page,
)

from jsclient.server import NatsServer

PAGES = page_examples(None)
EXAMPLES = [e for page in sorted(PAGES) for e in PAGES[page]]


class _PageServers:
    """One embedded server per page: started for its first example, stopped after its last."""

    def __init__(self) -> None:
        self.page: str | None = None
        self.server: NatsServer | None = None

    def url(self, page: str) -> str:
        if page != self.page or self.server is None:
            self.stop()
            self.server = NatsServer(jetstream=True).start()
            self.page = page
        return self.server.url

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.server, self.page = None, None


@pytest.fixture(scope="module")
def page_servers() -> Iterator[_PageServers]:
    servers = _PageServers()
    try:
        yield servers
    finally:
        servers.stop()


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example_runs(example: Example, page_servers: _PageServers) -> None:
    """The example runs alone, in a fresh namespace holding only ``url`` (its page's server)."""
    ran = run_page([example], {"__name__": "__docs__", "url": page_servers.url(example.page)})
    Counter.add(None, ran)


def test_every_block_runs_somewhere_or_says_why() -> None:
    """Markers are well-formed, and no-run blocks stay few and explained."""
    blocks: list[Block] = list(all_blocks())  # parse() raises on a malformed marker
    skipped = [b for b in blocks if b.no_run is not None and b.page not in PENDING]
    runnable = [b for b in blocks if b.no_run is None and b.page not in PENDING]
    assert len(runnable) >= 50, len(runnable)  # a floor: collection still finds them
    assert len(skipped) <= len(runnable) // 10, [b.id for b in skipped]


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "p.md"
    page.write_text(text, encoding="utf-8")
    return page


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Pages written under ``tmp_path`` are read as if they were the repository's."""
    monkeypatch.setattr(_docexamples, "ROOT", tmp_path)
    return tmp_path


def test_markers_are_parsed(tmp_root: Path) -> None:
    """Lines, code, lanes, reasons and continuations are read; a bad marker is an error."""
    page = _page(
        tmp_root,
        "text\n\n```python\na = 1\n```\n\n<!-- no-run: a settings fragment -->\n"
        "```python\nb = 2\n```\n<!-- lane: django -->\n```python\nc = 3\n```\n"
        "<!-- continues -->\n```python\nd = c\n```\n"
        "```bash\necho\n```\n"
        "<!-- no-run: shown only -->\n```python\ne = 5\n```\n"
        "<!-- continues -->\n```python\nf = d\n```\n",
    )
    blocks = parse(page)
    assert [(b.line, b.code, b.lane, b.no_run, b.continues) for b in blocks] == [
        (4, "a = 1\n", None, None, False),
        (9, "b = 2\n", None, "a settings fragment", False),
        (13, "c = 3\n", "django", None, False),
        (17, "d = c\n", "django", None, True),  # a continuation keeps its example's lane
        (24, "e = 5\n", None, "shown only", False),
        (28, "f = d\n", "django", None, True),
    ]
    # A continuation joins the last example that runs: a no-run block is no part of it.
    assert [[b.line for b in e.blocks] for e in examples(page)] == [[4], [9], [13, 17, 28], [24]]
    for text, error in (
        ("<!-- no-run: -->\n```python\nx\n```\n", "needs a reason"),
        ("<!-- lane: flask -->\n```python\nx\n```\n", "unknown lane"),
        ("<!-- continues: yes -->\n```python\nx\n```\n", "takes no value"),
        ("<!-- continues -->\n```python\nx\n```\n", "needs a runnable python block"),
        (
            "<!-- no-run: why -->\n```python\nx\n```\n<!-- continues -->\n```python\ny\n```\n",
            "needs a runnable python block",
        ),
        ("<!-- continues -->\ntext\n```python\nx\n```\n", "right before a fence"),
        ("<!-- continues -->\n```bash\necho\n```\n", "before a bash block"),
    ):
        with pytest.raises(ValueError, match=error):
            parse(_page(tmp_root, text))


def test_each_example_starts_from_url_alone(tmp_root: Path) -> None:
    """A block that does not continue sees none of the names earlier examples made.

    The page is run as ``test_example_runs`` runs one: through ``run_page``,
    with a namespace holding ``url``.
    """
    page = _page(
        tmp_root,
        "```python\nimport json\nnc = 'a client'\nseen = []\n```\n"
        "<!-- continues -->\n```python\nassert nc == 'a client'\nseen.append(json)\n```\n"
        "```python\nstart = set(globals()) - {'__builtins__'}\n"
        "assert start == {'__name__', 'url'}, start\n"
        "assert url == 'nats://example'\nurl = 'changed'\n```\n"
        "```python\nassert url == 'nats://example', url\n```\n",
    )
    found = examples(page)
    assert [len(e.blocks) for e in found] == [2, 1, 1]
    template = {"__name__": "__docs__", "url": "nats://example"}
    assert run_page(found, template) == 3
    assert template == {"__name__": "__docs__", "url": "nats://example"}  # never written to
    with pytest.raises(NameError, match="nc"):  # without its first block, a continuation fails
        run_page([Example(found[0].blocks[1:])], template)
