#!/usr/bin/env bash
# One command: set everything up, lint, type-check, run the whole test suite
# twice: with the Cython speedups (JSCLIENT_IMPL=c) and pure Python
# (JSCLIENT_IMPL=python), then test what users install (sdist -> manylinux
# wheel -> fresh venv), and a quick suite and the wheel test on the other
# supported Pythons: the machine's own (PATH or pyenv), else Debian's build
# fetched by scripts/debian-python.sh (3.13-3.15); a Python neither can
# provide (e.g. the Debian mirror is unreachable) is skipped and the summary
# says why. Extra arguments go to the two suite runs.
#
# The jobs after lint run in two lanes side by side (most tests wait on a
# server or a timeout, so two lanes keep the machine's two cores busy): lane 1
# runs the full suite with the speedups, lane 2 the pure-Python one, the
# benchmark smoke run and the wheel test; then both lanes take the other
# Pythons from one queue, whichever is free first, so that neither lane idles
# while the other has work. Each job writes
# its own log under $JSCLIENT_TEST_LOGS (default: a temporary folder); a
# failed job's log is printed at the end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
echo "== ruff"
ruff check jsclient jsbench pyspark_jetstream tests benchmarks examples setup.py
ruff format --check jsclient jsbench pyspark_jetstream tests benchmarks examples setup.py
echo "== mypy (strict)"
mypy

LOGS="${JSCLIENT_TEST_LOGS:-$(mktemp -d)}"
mkdir -p "$LOGS"
rm -rf "$LOGS"/*.rc "$LOGS"/ran-* "$LOGS"/claim-*  # a reused folder: this run's results only
SUITE_ARGS=("$@")
# The other supported Pythons: a quick suite with the speedups, and the wheel
# test built with that Python.
QUICK=(tests/unit tests/equivalence tests/integration/test_core_pubsub.py
       tests/integration/test_pull_fetch.py tests/integration/test_pull_subscribe.py
       tests/integration/test_push_subscribe.py tests/integration/test_js_publish.py
       tests/integration/test_fork.py tests/integration/test_read_leader.py
       tests/integration/test_io_core.py tests/integration/test_write_queue.py
       tests/integration/test_bench_runner.py tests/django)
OTHER_PYTHONS=(3.12 3.13 3.14 3.15)

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

# stage NAME CMD...: run CMD; add how long it took to $STAGES (the job's last
# line lists them).
stage() {
    local name="$1" start
    shift
    start=$(date +%s)
    "$@"
    STAGES+="${STAGES:+, }$name $(( $(date +%s) - start )) s"
}

other_python() {
    local v="$1" py venv origin rc reason start STAGES=""
    if py=$(bash scripts/find-python.sh "$v"); then
        origin="this machine's"
    else
        # Debian's build, unpacked under .pythons/; exit 3 (cannot fetch) or 2
        # (no Debian build of this version) is a skip, anything else a failure.
        start=$(date +%s)
        set +e
        py=$(bash scripts/debian-python.sh "$v" 2>"$LOGS/debian-$v.err")
        rc=$?
        set -e
        cat "$LOGS/debian-$v.err"
        if [ "$rc" -eq 2 ] || [ "$rc" -eq 3 ]; then
            reason=$(grep -m1 -E "unavailable|no Debian build" "$LOGS/debian-$v.err" |
                sed 's/^debian-python.sh: //')
            echo "Python $v: not on this machine; $reason: skipped"
            echo "$v: skipped, not on this machine; $reason" >"$LOGS/ran-$v"
            return 0
        fi
        [ "$rc" -eq 0 ] || return "$rc"
        STAGES="Debian's Python $(( $(date +%s) - start )) s"
        # CPATH: Debian's multiarch pyconfig.h, for every build below.
        source "$(dirname "$(dirname "$(dirname "$py")")")/env"
        origin="Debian's"
    fi
    venv="${JSCLIENT_VENV:-$ROOT/.venv}-$v"
    echo "Python $v ($py): quick suite and wheel test"
    stage "venv and build" env PYTHON="$py" JSCLIENT_VENV="$venv" JSCLIENT_EXTRAS=dev \
        bash scripts/setup.sh
    stage "quick suite" env JSCLIENT_IMPL=c "$venv/bin/python" -m pytest -q "${QUICK[@]}"
    stage "wheel test" "$venv/bin/python" -m pytest -q -m wheel tests/packaging
    echo "$("$venv/bin/python" -c 'import platform; print(platform.python_version())')" \
        "($origin; quick suite + wheel test)" >"$LOGS/ran-$v"
    echo "Python $v: $STAGES"
}

# The other Pythons, one queue for both lanes: a lane takes a version by
# creating its claim folder (mkdir is atomic), so each runs exactly once.
other_pythons() {
    for v in "${OTHER_PYTHONS[@]}"; do
        if mkdir "$LOGS/claim-$v" 2>/dev/null; then
            job "python-$v" other_python "$v"
        fi
    done
}

lane1() {
    job "pytest-c" suite c
    other_pythons
}

lane2() {
    job "pytest-python" suite python
    job "benchmarks-smoke" python -m pytest -q benchmarks --benchmark-disable
    job "wheel-$(python -c 'import platform; print(platform.python_version())')" \
        python -m pytest -q -m wheel tests/packaging
    other_pythons
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
