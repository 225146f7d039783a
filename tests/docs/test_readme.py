"""The README's claims are the performance page's figures, the weakest ones included."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _table(page: str, heading: str) -> list[dict[str, str]]:
    """The rows of the first table after ``heading``, as dicts by column name."""
    lines = page.split(heading, 1)[1].splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    block = []
    for ln in lines[first:]:
        if not ln.startswith("|"):
            break
        block.append(ln)
    head = [c.strip() for c in block[0].strip("|").split("|")]
    cells = ([c.strip() for c in r.strip("|").split("|")] for r in block[2:])
    return [dict(zip(head, row, strict=True)) for row in cells]


def _speed_line(readme: str) -> str:
    start = readme.index("- Fast:")
    return readme[start : readme.index("\n\n", start)]


def test_the_readme_names_the_weakest_row_against_nats_py() -> None:
    page = (ROOT / "docs" / "performance.md").read_text()
    rows = _table(page, "### Python 3.13 (Debian 13, PGO)")
    ratios = {
        r["workload"]: float(r["vs nats-py"].rstrip("x"))
        for r in rows
        if re.fullmatch(r"[\d.]+x", r["vs nats-py"])
    }
    weakest = min(ratios, key=ratios.__getitem__)
    line = _speed_line((ROOT / "README.md").read_text())
    assert f"{ratios[weakest]:g}x" in line or f"{ratios[weakest]:.2f}x" in line, (
        f"the README's speed summary leaves out the weakest row ({weakest}, "
        f"{ratios[weakest]}x nats-py): {line!r}"
    )
