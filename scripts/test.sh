#!/usr/bin/env bash
# One command: set everything up, lint, type-check, run the whole test suite
# twice: with the Cython speedups (JSCLIENT_IMPL=c) and pure Python
# (JSCLIENT_IMPL=python), then test what users install (sdist -> manylinux
# wheel -> fresh venv), and the same quick suite and wheel test on the other
# supported Pythons this machine has. Extra arguments go to the two suite runs.
#
# The jobs after lint run in two lanes side by side (most tests wait on a
# server or a timeout, so two lanes keep the machine's two cores busy): lane 1
# runs the two full suites, lane 2 the benchmark smoke run, the wheel test and
# the other Pythons. Each job writes its own log under $JSCLIENT_TEST_LOGS
# (default: a temporary folder); a failed job's log is printed at the end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
echo "== ruff"
ruff check jsclient jsbench pyspark_jetstream tests benchmarks examples setup.py
ruff format --check jsclient jsbench pyspark_jetstream tests benchmarks examples setup.py
echo "== mypy (strict)"
mypy

LOGS="${JSCLIENT_TEST_LOGS:-$(mktemp -d)}"
mkdir -p "$LOGS"
SUITE_ARGS=("$@")
# The other supported Pythons: a quick suite with the speedups, and the wheel
# test built with that Python.
QUICK=(tests/unit tests/equivalence tests/integration/test_core_pubsub.py
       tests/integration/test_pull_fetch.py tests/integration/test_pull_subscribe.py
       tests/integration/test_push_subscribe.py tests/integration/test_js_publish.py
       tests/integration/test_fork.py tests/integration/test_read_leader.py
       tests/integration/test_io_core.py tests/integration/test_write_queue.py
       tests/integration/test_bench_runner.py tests/django)
OTHER_PYTHONS=(3.12 3.13)

# job NAME CMD...: run CMD with its output in $LOGS/NAME.log; record its status.
job() {
    local name="$1" start rc
    shift
    start=$(date +%s)
    set +e
    (set -e; "$@") >"$LOGS/$name.log" 2>&1
    rc=$?
    set -e
    echo "$rc" >"$LOGS/$name.rc"
    if [ "$rc" -eq 0 ]; then
        echo "== $name: ok ($(( $(date +%s) - start )) s) -- $(tail -n 1 "$LOGS/$name.log")"
    else
        echo "== $name: FAILED (exit $rc, $(( $(date +%s) - start )) s), log: $LOGS/$name.log"
    fi
}

suite() {
    JSCLIENT_IMPL="$1" python -m pytest -q "${SUITE_ARGS[@]}"
}

other_python() {
    local v="$1" py venv
    if ! py=$(bash scripts/find-python.sh "$v"); then
        echo "Python $v: not on this machine, skipped"
        echo "$v: skipped, not installed" >"$LOGS/ran-$v"
        return 0
    fi
    venv="${JSCLIENT_VENV:-$ROOT/.venv}-$v"
    echo "Python $v ($py): quick suite and wheel test"
    PYTHON="$py" JSCLIENT_VENV="$venv" JSCLIENT_EXTRAS=dev bash scripts/setup.sh
    JSCLIENT_IMPL=c "$venv/bin/python" -m pytest -q "${QUICK[@]}"
    "$venv/bin/python" -m pytest -q -m wheel tests/packaging
    echo "$("$venv/bin/python" -c 'import platform; print(platform.python_version())') (quick suite + wheel test)" >"$LOGS/ran-$v"
}

lane1() {
    job "pytest-c" suite c
    job "pytest-python" suite python
}

lane2() {
    job "benchmarks-smoke" python -m pytest -q benchmarks --benchmark-disable
    job "wheel-$(python -c 'import platform; print(platform.python_version())')" \
        python -m pytest -q -m wheel tests/packaging
    for v in "${OTHER_PYTHONS[@]}"; do
        job "python-$v" other_python "$v"
    done
}

echo "== tests in two lanes (logs: $LOGS)"
lane1 &
pid1=$!
lane2 &
pid2=$!
wait "$pid1" "$pid2"

failed=0
for rc in "$LOGS"/*.rc; do
    if [ "$(cat "$rc")" -ne 0 ]; then
        failed=1
        name="$(basename "$rc" .rc)"
        echo
        echo "==================== $name failed: its log ===================="
        cat "$LOGS/$name.log"
    fi
done
echo "== Pythons tested:"
echo "   $(python -c 'import platform; print(platform.python_version())') (full suite, both implementations, wheel test)"
for v in "${OTHER_PYTHONS[@]}"; do
    [ -f "$LOGS/ran-$v" ] && echo "   $(cat "$LOGS/ran-$v")" || echo "   $v: did not finish"
done
exit "$failed"
