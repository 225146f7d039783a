#!/usr/bin/env bash
# The documentation site (MkDocs + Material + mkdocstrings; mkdocs.yml, docs/):
#
#   bash scripts/docs.sh build              # strict build into site/: a warning, a
#                                           # broken link or reference fails it
#   bash scripts/docs.sh serve              # http://127.0.0.1:8000, rebuilt on every change
#                                           # (DOCS_ADDR=host:port to change it)
#   bash scripts/docs.sh screenshots [DIR]  # build, then render three pages in headless
#                                           # Chromium into DIR (default docs-screenshots/)
#
# Sets up .venv first (scripts/setup.sh, extras dev,spark: dev has the docs
# tools) when it has no mkdocs yet, so a fresh clone needs only this command.
# The examples of the pages run in the test suite (tests/docs), not here.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
mode="${1:-build}"
[ "$#" -gt 0 ] && shift
VENV="${JSCLIENT_VENV:-$ROOT/.venv}"
if [ -x "$VENV/bin/mkdocs" ]; then
    export PATH="$VENV/bin:$PATH"
else
    source "$ROOT/scripts/setup.sh"
fi
export NO_MKDOCS_2_WARNING=1  # Material's banner about its successor, on every run
case "$mode" in
    build)
        mkdocs build --strict --site-dir site "$@"
        echo "docs: built into $ROOT/site (open site/index.html, or: bash scripts/docs.sh serve)"
        ;;
    serve)
        exec mkdocs serve --strict --dev-addr "${DOCS_ADDR:-127.0.0.1:8000}" "$@"
        ;;
    screenshots)
        mkdocs build --strict --quiet --site-dir site
        python scripts/screenshots.py site "${1:-docs-screenshots}"
        ;;
    *)
        echo "usage: bash scripts/docs.sh [build|serve|screenshots [DIR]]" >&2
        exit 2
        ;;
esac
