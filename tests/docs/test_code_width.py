"""Code blocks fit the page: no line wider than the site shows uncut.

At 1280 px the site cuts code lines over 80 columns, so a reader would have
to scroll sideways. Every fenced block of ``docs/**/*.md`` and ``README.md``
counts, whatever its language (python, bash, text, toml, a plain fence);
a block inside a list or an admonition is measured without the fence's
indent, as the site shows it. Tables are prose, not code, and are not
checked here.
"""

from __future__ import annotations

from pathlib import Path

import _docexamples
import pytest
from _docexamples import MAX_COLUMNS, Fence, all_fences, fences


def _too_wide(found: list[Fence]) -> list[str]:
    return [
        f"{f.page}:{f.line + k} ({len(text)} cols)"
        for f in found
        for k, text in enumerate(f.lines)
        if len(text) > MAX_COLUMNS
    ]


def test_code_lines_fit_the_page() -> None:
    found = list(all_fences())
    assert len(found) > 60, len(found)  # a floor: every language is collected
    wide = _too_wide(found)
    assert not wide, (
        f"code lines longer than {MAX_COLUMNS} columns (wrap them: a call across "
        "lines, a comment on its own line above, a `\\` in shell):\n  " + "\n  ".join(wide)
    )


def test_every_language_and_indented_fences_are_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_docexamples, "ROOT", tmp_path)
    page = tmp_path / "p.md"
    long = "x" * (MAX_COLUMNS + 1)
    page.write_text(
        f"```bash\n{long}\n```\n\n"
        f"- a list item:\n\n    ```text\n    {'y' * MAX_COLUMNS}\n    {long}\n    ```\n\n"
        f"```\n{'z' * MAX_COLUMNS}\n```\n\n"
        f"| a table | {long} |\n|---|---|\n",
        encoding="utf-8",
    )
    found = fences(page)
    assert [(f.lang, f.line) for f in found] == [("bash", 2), ("text", 8), ("", 13)]
    # The indent of a fence in a list is not counted; a table is not code.
    assert _too_wide(found) == [
        f"p.md:2 ({MAX_COLUMNS + 1} cols)",
        f"p.md:9 ({MAX_COLUMNS + 1} cols)",
    ]
