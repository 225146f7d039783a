#!/usr/bin/env bash
# The stress tests, N runs with each implementation, on one interpreter: the
# tests that run threads against each other under a tiny
# sys.setswitchinterval or raise interrupts into the library's threads
# (thread and publisher safety, bounded publish, the write queue, futures,
# the weak registry, the writer twins' differential test). Made for a
# free-threaded build with the GIL off, where races show:
#
#   bash scripts/stress.sh PYTHON [RUNS]    (RUNS default 20)
#
# Each run is a fresh pytest process; a failed run's output is kept in
# $JSCLIENT_STRESS_LOGS (default: a temporary folder); JSCLIENT_STRESS_IMPLS
# chooses the implementations (default "c python"). Prints a line per failed
# run and a count per implementation; exits 1 if any run failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${1:?usage: stress.sh PYTHON [RUNS]}"
RUNS="${2:-20}"
LOGS="${JSCLIENT_STRESS_LOGS:-$(mktemp -d)}"
mkdir -p "$LOGS"
FILES=(tests/integration/test_thread_safety.py tests/integration/test_publisher_safety.py
       tests/integration/test_async_pub_bounded.py tests/integration/test_write_queue.py
       tests/unit/test_future.py tests/unit/test_weak_registry.py
       tests/equivalence/test_equiv_writer.py)
"$PY" -c 'import sys; print(sys.version.split()[0], "GIL enabled:", getattr(sys, "_is_gil_enabled", lambda: True)())'
failed=0
for impl in ${JSCLIENT_STRESS_IMPLS:-c python}; do
    ok=0
    start=$(date +%s)
    for run in $(seq 1 "$RUNS"); do
        log="$LOGS/$impl-$run.log"
        if JSCLIENT_IMPL="$impl" "$PY" -m pytest -q "${FILES[@]}" >"$log" 2>&1; then
            ok=$((ok + 1))
            rm -f "$log"
        else
            failed=1
            echo "$impl run $run: FAILED ($(grep -E '^FAILED|^ERROR' "$log" | head -n 3 | tr '\n' ' '))log: $log"
        fi
    done
    echo "$impl: $ok of $RUNS runs passed ($(( $(date +%s) - start )) s)"
done
exit "$failed"
