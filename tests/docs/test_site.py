"""The documentation site: strict build, headings, internal links, plots, a real browser.

The site is built once for this module with ``mkdocs build --strict`` (a
warning, a broken link or a missing API reference fails it). Then, on the
HTML without a browser: every page has its heading, and every internal link
and anchor resolves. The performance plots must match the tables they are
drawn from. Last, ``scripts/screenshots.py`` renders three pages in headless
Chromium (skipped, with the reason, where none is installed).
"""

from __future__ import annotations

import html.parser
import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import perf_plots  # noqa: E402
import screenshots  # noqa: E402

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="the docs tools are not installed (extra docs, or dev)",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}\n{run.stderr}"
    return out


class _Page(html.parser.HTMLParser):
    """The ids, links and <h1> texts of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.h1: list[str] = []
        self._in_h1 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"] or "")
        if a.get("name") and tag == "a":
            self.ids.add(a["name"] or "")
        for attr in ("href", "src"):
            value = a.get(attr)
            if value and tag in ("a", "img", "link", "script"):
                self.links.append(value)
        if tag == "h1":
            self._in_h1 = True
            self.h1.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "h1":
            self._in_h1 = False

    def handle_data(self, data: str) -> None:
        if self._in_h1:
            self.h1[-1] += data


def _pages(site: Path) -> Iterator[Path]:
    for path in sorted(Path(os.path.normpath(site)).rglob("*.html")):
        if path.name != "404.html":
            yield path


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _target(page: Path, href: str) -> tuple[Path, str] | None:
    """The file and fragment an internal link points to; None for external links."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:", "data:")):
        return None
    if not parts.path:
        return page, unquote(parts.fragment)
    target = Path(os.path.normpath(page.parent / unquote(parts.path)))
    if parts.path.endswith("/") or target.is_dir():
        target = target / "index.html"
    return target, unquote(parts.fragment)


def test_every_page_has_a_heading(site: Path) -> None:
    for path in _pages(site):
        h1 = [t.replace("¶", "").strip() for t in _parse(path).h1]
        assert h1 and h1[0], f"{path.relative_to(site)} has no <h1>"
    for page, title in (
        ("index.html", "jsclient"),
        ("getting-started/index.html", "Getting started"),
        ("migration/index.html", "Migrating from nats-py"),
        ("guides/jetstream/index.html", "JetStream streams and consumers"),
        ("api/jetstream/index.html", "JetStream"),
        ("performance/index.html", "Benchmarks and performance"),
    ):
        assert _parse(site / page).h1[0].replace("¶", "").strip() == title, page


def test_internal_links_and_anchors_resolve(site: Path) -> None:
    parsed: dict[Path, _Page] = {}

    def parse(path: Path) -> _Page:
        if path not in parsed:
            parsed[path] = _parse(path)
        return parsed[path]

    broken: list[str] = []
    checked = 0
    for path in _pages(site):
        for href in parse(path).links:
            hit = _target(path, href)
            if hit is None:
                continue
            target, fragment = hit
            checked += 1
            if not target.exists():
                broken.append(f"{path.relative_to(site)}: {href} (no {target.name})")
                continue
            if fragment and target.suffix == ".html" and fragment not in parse(target).ids:
                broken.append(f"{path.relative_to(site)}: {href} (no #{fragment})")
    assert checked > 1000, checked
    assert not broken, "broken internal links:\n  " + "\n  ".join(broken)


def _resolve(path: str) -> object | None:
    """The object a reference id such as ``jsclient.Client.publish`` names."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return None
        return obj
    return None


def test_api_reference_renders_methods_with_signature_and_docstring(site: Path) -> None:
    """No method is shown as a bare attribute (``name = other_function``).

    Such an alias renders without its signature or docstring; every callable
    entry must be a function entry, with a signature and a docstring.
    """
    entry = re.compile(r'<div class="doc doc-object doc-(\w+)">\s*<h\d id="([^"]+)"')
    as_attribute: list[str] = []
    functions = 0
    for path in sorted((site / "api").rglob("index.html")):
        text = path.read_text(encoding="utf-8")
        for kind, ident in entry.findall(text):
            if kind == "attribute" and inspect.isroutine(_resolve(ident)):
                as_attribute.append(f"{path.parent.name}: {ident}")
            elif kind == "function":
                functions += 1
    assert functions > 200, functions
    assert not as_attribute, "methods rendered as attributes:\n  " + "\n  ".join(as_attribute)
    client = (site / "api" / "client" / "index.html").read_text(encoding="utf-8")
    for name, signature_part, doc_part in (
        ("request_many", "max_count", "iterate over its replies"),
        ("force_reconnect", "force_reconnect</span><span", "reconnect now"),
    ):
        at = client.index(f'id="jsclient.Client.{name}"')
        block = client[at : client.index('<div class="doc doc-object', at)]
        assert "doc-signature" in block and signature_part in block, name
        assert doc_part in block, name


def test_performance_plots_match_their_tables(tmp_path: Path) -> None:
    """The committed SVGs are what scripts/perf_plots.py draws from docs/performance.md."""
    drawn = perf_plots.write(tmp_path)
    assert len(drawn) >= 4
    for path in drawn:
        committed = perf_plots.OUT / path.name
        assert committed.exists(), f"{committed} missing: run python scripts/perf_plots.py"
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
            f"{committed.name} is stale: run python scripts/perf_plots.py"
        )


def test_pages_render_in_headless_chromium(site: Path, tmp_path: Path) -> None:
    binary = screenshots.find_chromium()
    if binary is None:
        pytest.skip(
            "no Chromium on this machine (Debian: apt-get install -y chromium); "
            "the link and heading checks above ran on the HTML"
        )
    results = screenshots.screenshot(site, tmp_path, binary)
    for (name, png, h1s), (_, page, want) in zip(results, screenshots.PAGES, strict=True):
        assert want in h1s, (page, h1s)
        assert png.stat().st_size > 20_000, f"{name}: a blank screenshot?"
