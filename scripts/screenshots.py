"""Render pages of the built documentation site in headless Chromium and save screenshots.

    python scripts/screenshots.py [SITE_DIR] [OUT_DIR]   # defaults: site/ and docs-screenshots/

Build the site first (``bash scripts/docs.sh build``). The site is served over
HTTP on a free loopback port (as a user's browser would get it), and each page
of :data:`PAGES` is rendered by Chromium (Debian's ``chromium`` package, or
``$CHROMIUM``) in one launch into ``OUT_DIR/<name>.png`` (1280x1000) and,
with ``--dump-dom``, the DOM after the page's scripts ran, whose ``<h1>``
must be the heading expected. Prints each screenshot's path; exits 1 when a page
does not render its heading, 2 when no Chromium is installed.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (screenshot name, page path in the site, the <h1> it must render)
PAGES = (
    ("home", "index.html", "jsclient"),
    ("guide-jetstream", "guides/jetstream/index.html", "JetStream streams and consumers"),
    ("api-jetstream", "api/jetstream/index.html", "JetStream"),
)


def find_chromium() -> str | None:
    """The Chromium binary: ``$CHROMIUM``, else the first of the usual names on PATH."""
    env = os.environ.get("CHROMIUM")
    if env:
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve ``site`` on a free loopback port in a daemon thread; returns (server, base URL)."""
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-http", daemon=True)
    thread.start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def _chromium(binary: str, profile: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",  # root in CI containers
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1280,1000",
        "--virtual-time-budget=1000",  # let the page's scripts run
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def h1_texts(dom: str) -> list[str]:
    """The text of every ``<h1>`` of a DOM dump (tags stripped, permalink signs dropped)."""
    out = []
    for inner in re.findall(r"<h1[^>]*>(.*?)</h1>", dom, flags=re.S):
        text = re.sub(r"<[^>]+>", "", inner).replace("¶", "").strip()
        out.append(re.sub(r"\s+", " ", text))
    return out


def screenshot(site: Path, out: Path, binary: str) -> list[tuple[str, Path, list[str]]]:
    """Render every page of PAGES; returns (name, png path, the h1 texts rendered)."""
    out.mkdir(parents=True, exist_ok=True)
    server, base = serve(site)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="jsclient-chromium-") as profile:
            for name, page, _ in PAGES:
                png = out / f"{name}.png"
                url = base + page
                png.unlink(missing_ok=True)
                # One launch does both: the screenshot, and the DOM on stdout.
                run = _chromium(binary, profile, f"--screenshot={png}", "--dump-dom", url)
                if run.returncode != 0 or not png.exists():
                    raise RuntimeError(f"chromium failed on {url}: {run.stderr[-2000:]}")
                results.append((name, png, h1_texts(run.stdout)))
    finally:
        server.shutdown()
        server.server_close()
    return results


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else ROOT / "site"
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "docs-screenshots"
    if not (site / "index.html").exists():
        print(f"no built site in {site}: run `bash scripts/docs.sh build` first", file=sys.stderr)
        return 1
    binary = find_chromium()
    if binary is None:
        print("no Chromium found (apt-get install chromium, or set CHROMIUM)", file=sys.stderr)
        return 2
    failed = 0
    for (_, png, h1s), (_, page, want) in zip(screenshot(site, out, binary), PAGES, strict=True):
        ok = want in h1s
        failed += not ok
        print(f"{png}  ({page}: h1 {h1s!r}{'' if ok else f', expected {want!r}'})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
