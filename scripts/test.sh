#!/usr/bin/env bash
# One command: set everything up, lint, type-check, run the whole test suite
# twice: with the Cython speedups (JSCLIENT_IMPL=c) and pure Python
# (JSCLIENT_IMPL=python), then test what users install (sdist -> manylinux
# wheel -> fresh venv). Extra arguments go to the two suite runs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
echo "== ruff"
ruff check jsclient pyspark_jetstream tests benchmarks setup.py
ruff format --check jsclient pyspark_jetstream tests benchmarks setup.py
echo "== mypy (strict)"
mypy
for impl in c python; do
    echo "== pytest, JSCLIENT_IMPL=$impl"
    JSCLIENT_IMPL=$impl python -m pytest -q "$@"
done
echo "== benchmarks smoke run (micro benchmarks, timing off)"
python -m pytest -q benchmarks --benchmark-disable
echo "== wheel test: sdist -> wheel -> auditwheel -> fresh venv ($(python -V))"
python -m pytest -q -m wheel tests/packaging
