#!/usr/bin/env bash
# One command: set everything up, lint, type-check, run the whole test suite
# twice: with the Cython speedups (JSCLIENT_IMPL=c) and pure Python
# (JSCLIENT_IMPL=python), then test what users install (sdist -> manylinux
# wheel -> fresh venv). Extra arguments go to the two suite runs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
echo "== ruff"
ruff check jsclient pyspark_jetstream tests benchmarks examples setup.py
ruff format --check jsclient pyspark_jetstream tests benchmarks examples setup.py
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

# The other supported Pythons, where this machine has them (PATH or pyenv): a
# quick suite with the speedups, and the wheel test built with that Python.
QUICK=(tests/unit tests/equivalence tests/integration/test_core_pubsub.py
       tests/integration/test_pull_fetch.py tests/integration/test_pull_subscribe.py
       tests/integration/test_push_subscribe.py tests/integration/test_js_publish.py
       tests/integration/test_fork.py tests/integration/test_read_leader.py
       tests/integration/test_write_queue.py tests/integration/test_bench_runner.py tests/django)
ran=("$(python -c 'import platform; print(platform.python_version())') (full suite)")
for v in 3.12 3.13; do
    if ! py=$(bash scripts/find-python.sh "$v"); then
        echo "== Python $v: not on this machine, skipped"
        ran+=("$v: skipped, not installed")
        continue
    fi
    venv="${JSCLIENT_VENV:-$ROOT/.venv}-$v"
    echo "== Python $v ($py): quick suite and wheel test"
    PYTHON="$py" JSCLIENT_VENV="$venv" JSCLIENT_EXTRAS=dev bash scripts/setup.sh
    JSCLIENT_IMPL=c "$venv/bin/python" -m pytest -q "${QUICK[@]}"
    "$venv/bin/python" -m pytest -q -m wheel tests/packaging
    ran+=("$("$venv/bin/python" -c 'import platform; print(platform.python_version())') (quick suite + wheel test)")
done
echo "== Pythons tested:"
printf '   %s\n' "${ran[@]}"
