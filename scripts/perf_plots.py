"""Draw the performance tables of docs/performance.md as SVG bar charts.

    python scripts/perf_plots.py [OUTDIR]      # default: docs/assets/perf

For each "### Python X.Y" table of the "## Performance" section it writes
``python-X.Y.svg``: one row per workload, the bars jsclient's speed relative
to nats-py (and to natsio where measured), on a log scale around 1x (a bar
to the right: jsclient is faster). The numbers are read from the tables, so
the plots cannot disagree with them: ``tests/docs/test_site.py`` redraws
them and fails when a committed plot differs (run this script after a table
changes). Plain SVG, no plotting library needed.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "performance.md"
OUT = ROOT / "docs" / "assets" / "perf"

#: The peers plotted, by column header, with their colours.
SERIES = (("vs nats-py", "nats-py", "#3f51b5"), ("vs natsio", "natsio", "#ff9800"))
LO, HI = 0.25, 32.0  # the x axis (ratios), log scale
TICKS = (0.25, 0.5, 1, 2, 4, 8, 16, 32)


@dataclass
class Table:
    title: str  # "Python 3.13 (Debian 13, PGO)"
    version: str  # "3.13"
    rows: list[tuple[str, dict[str, float]]]  # workload -> {peer: ratio}


def _ratio(cell: str) -> float | None:
    m = re.fullmatch(r"\s*([0-9.]+)x\s*", cell)
    return float(m.group(1)) if m else None


def parse(text: str) -> list[Table]:
    """The per-Python tables of the "## Performance" section."""
    section = text.split("\n## Performance\n", 1)[1]
    tables: list[Table] = []
    for block in re.split(r"\n### ", section)[1:]:
        title, _, body = block.partition("\n")
        m = re.match(r"Python (\d+\.\d+)", title)
        lines = [ln for ln in body.splitlines() if ln.startswith("|")]
        if not m or not lines or not lines[0].startswith("| workload | jsclient |"):
            continue
        header = [c.strip() for c in lines[0].strip("|").split("|")]
        rows: list[tuple[str, dict[str, float]]] = []
        for line in lines[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            ratios: dict[str, float] = {}
            for column, peer, _ in SERIES:
                if column in header:
                    r = _ratio(cells[header.index(column)])
                    if r is not None:
                        ratios[peer] = r
            if ratios:
                rows.append((cells[0], ratios))
        tables.append(Table(title.strip(), m.group(1), rows))
    return tables


def _x(ratio: float, left: float, width: float) -> float:
    r = min(max(ratio, LO), HI)
    return left + width * (math.log(r) - math.log(LO)) / (math.log(HI) - math.log(LO))


def svg(table: Table) -> str:
    """One table as a horizontal bar chart (deterministic output)."""
    peers = [(p, colour) for _, p, colour in SERIES if any(p in r for _, r in table.rows)]
    bar, gap, label_w, left_pad, width = 8, 6, 190, 10, 560
    row_h = bar * len(peers) + gap
    top = 56
    height = top + row_h * len(table.rows) + 40
    left = left_pad + label_w
    total_w = left + width + 60
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{height}" '
        f'viewBox="0 0 {total_w} {height}" font-family="sans-serif" font-size="11">',
        f"<title>jsclient vs {' and '.join(p for p, _ in peers)}: {escape(table.title)}</title>",
        f'<rect width="{total_w}" height="{height}" fill="#ffffff"/>',
        f'<text x="{left_pad}" y="18" font-size="14" font-weight="bold">'
        f"jsclient's speed relative to other clients, {escape(table.title)}</text>",
    ]
    for i, (peer, colour) in enumerate(peers):
        lx = left + i * 260
        out.append(f'<rect x="{lx}" y="28" width="12" height="10" fill="{colour}"/>')
        out.append(f'<text x="{lx + 16}" y="37">vs {escape(peer)} (right of 1x: faster)</text>')
    bottom = top + row_h * len(table.rows)
    for t in TICKS:
        x = _x(t, left, width)
        stroke = "#000000" if t == 1 else "#dddddd"
        out.append(
            f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{bottom}" stroke="{stroke}"/>'
        )
        out.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{t:g}x</text>')
    one = _x(1.0, left, width)
    for n, (workload, ratios) in enumerate(table.rows):
        y = top + n * row_h
        out.append(
            f'<text x="{left - 6}" y="{y + row_h / 2 + 1:.1f}" text-anchor="end">'
            f"{escape(workload)}</text>"
        )
        for i, (peer, colour) in enumerate(peers):
            if peer not in ratios:
                continue
            x = _x(ratios[peer], left, width)
            x0, w = min(one, x), abs(x - one)
            out.append(
                f'<rect x="{x0:.1f}" y="{y + i * bar}" width="{max(w, 1):.1f}" '
                f'height="{bar - 1}" fill="{colour}"><title>{escape(workload)}: '
                f"{ratios[peer]:g}x {escape(peer)}</title></rect>"
            )
            out.append(
                f'<text x="{max(x, one) + 3:.1f}" y="{y + i * bar + bar - 1}" '
                f'font-size="8">{ratios[peer]:g}x</text>'
            )
    out.append(
        f'<text x="{left}" y="{height - 8}" fill="#555555">Ratios of median rates, '
        f"from the table of docs/performance.md (log scale).</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write(outdir: Path) -> list[Path]:
    """Draw every table into ``outdir``; returns the files written."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for table in parse(PAGE.read_text(encoding="utf-8")):
        path = outdir / f"python-{table.version}.svg"
        path.write_text(svg(table), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    outdir = Path(argv[0]) if argv else OUT
    for path in write(outdir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
