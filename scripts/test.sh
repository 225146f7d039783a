#!/usr/bin/env bash
# One command: set everything up, lint, type-check, run the whole test suite
# with the Cython speedups (JSCLIENT_IMPL=c) and with pure Python
# (JSCLIENT_IMPL=python), the tests the implementation cannot change in the
# first only (tests/conftest.py lists them and why), then test what users
# install (sdist -> manylinux wheel -> fresh venv), and a quick suite on the
# other supported Pythons (and the wheel test on those WHEEL_PYTHONS lists):
# the machine's own (PATH or pyenv), else Debian's build fetched by
# scripts/debian-python.sh (3.13-3.15), and a free-threaded 3.13t (below);
# a Python neither can provide (e.g. the Debian mirror is unreachable) is
# skipped and the summary says why. The suites also build the documentation
# site strictly and run every example of its pages (tests/docs). Extra
# arguments go to the two suite runs.
#
# The jobs after lint run in three lanes side by side (most tests wait on a
# server or a timeout, so three lanes keep the machine's two cores busy): lane
# 1 runs the tests that run twice with the speedups, lane 2 the pure-Python
# ones, the benchmark smoke run and the wheel test, lane 3 the
# implementation-independent tests (once, with the speedups) and the JetStream
# part against js_ack_fc_v2 servers (ADR-53). Meanwhile a builder at a lower CPU
# priority makes the other Pythons' venvs with the CPU the suites leave idle.
# Then the lanes take the other Pythons' quick suites, then their wheel
# tests, from one queue, whichever lane is free first, so that no lane
# idles while another has work (a lane that needs a venv the builder has not
# started makes it itself). Each job writes its own log under
# $JSCLIENT_TEST_LOGS (default: a temporary folder); a failed job's log is
# printed at the end.
set -euo pipefail
# 3.13t: free-threaded CPython, run with the GIL off (tests/conftest.py fails
# the run if anything turns it back on). No distribution packages one, so it
# is built from source by a script beside the checkout when there is one
# (JSCLIENT_FREE_THREADED_TOOL, default ../shared/tools/free-threaded-python.sh:
# it reuses an earlier build, ~8 min of CPU on 2 cores otherwise); else
# skipped, with the reason. The build is the longest single step of the run,
# so it starts first, beside this Python's set-up, lint and type check.
FT_VERSION=3.13
FT_TOOL="${JSCLIENT_FREE_THREADED_TOOL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/../shared/tools/free-threaded-python.sh}"
FT_BUILD="$(mktemp -d)"  # out, err, then rc once the build has ended
if [ -f "$FT_TOOL" ]; then
    (
        set +e
        TIMEFORMAT="%U %S"
        { time { bash "$FT_TOOL" "$FT_VERSION" >"$FT_BUILD/out" 2>"$FT_BUILD/err"; }; } 2>"$FT_BUILD/cpu"
        echo $? >"$FT_BUILD/rc.tmp"
        mv "$FT_BUILD/rc.tmp" "$FT_BUILD/rc"
    ) >/dev/null 2>&1 &
fi
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
echo "== ruff"
ruff check jsclient jsbench pyspark_jetstream tests benchmarks examples scripts setup.py
ruff format --check jsclient jsbench pyspark_jetstream tests benchmarks examples scripts setup.py
echo "== mypy (strict)"
mypy

LOGS="${JSCLIENT_TEST_LOGS:-$(mktemp -d)}"
mkdir -p "$LOGS"
rm -rf "$LOGS"/*.rc "$LOGS"/py-* "$LOGS"/claim-*  # a reused folder: this run's results only
# The docs' browser check (tests/docs/test_site.py) renders pages in headless
# Chromium: Debian's package, installed here when missing and the machine lets
# us (root, apt); otherwise that one test skips and says why. The strict site
# build and the pages' examples run in the suites (tests/docs).
if ! command -v chromium >/dev/null && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "== Chromium for the docs' browser check (apt-get install chromium)"
    timeout 300 bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium' \
        >"$LOGS/apt-chromium.log" 2>&1 ||
        echo "   not installed (see apt-chromium.log): the browser check will skip"
fi
SUITE_ARGS=("$@")
# The other supported Pythons: a quick suite with the speedups, and the wheel
# test built with that Python. The reading role's twins are in
# tests/equivalence; its integration file (test_read_leader.py) runs on 3.11
# only (with both implementations), to keep the whole run inside its budget.
# The ends of the range (3.15 and the free-threaded 3.13t, where language and
# packaging changes show first) get the wheel test; 3.13t, where races show,
# gets QUICK (the unit tests of threads, futures and the weak registry, forks,
# the write queue, thread safety, the Django worker: in a lane of its own as
# soon as its venv is ready), and 3.12-3.15 get QUICK_MID: both twins on the
# same vectors, and core messaging, fetch and JetStream publish against a
# server (about a third of the time of QUICK).
QUICK=(tests/equivalence tests/unit/test_{threads_bounded,future,weak_registry}.py
       tests/integration/test_core_pubsub.py
       tests/integration/test_pull_fetch.py tests/integration/test_js_publish.py
       tests/integration/test_fork.py tests/integration/test_write_queue.py
       tests/integration/test_thread_safety.py tests/django)
QUICK_MID=(tests/equivalence tests/integration/test_core_pubsub.py
           tests/integration/test_pull_fetch.py tests/integration/test_js_publish.py)
# ADR-53: the JetStream parts that read or write ack and flow-control
# subjects once more, with the speedups, against servers with the v2 ACK and
# flow-control subjects on (feature flag js_ack_fc_v2, nats-server 2.14+;
# jsclient.server.NatsServer reads JSCLIENT_TEST_SERVER_FEATURES): acks and
# their metadata, every way of consuming, ordered consumers and watchers,
# priority groups, and acks from many threads. The nats-py interop files stay
# out: nats-py cannot read v2 ack subjects.
JS_V2=(tests/integration/test_{js_acks,ack_fc_v2,js_messages,kv_watch,ordered,priority}.py
       tests/integration/test_{pull_fetch,pull_consume,pull_subscribe,push_subscribe}.py
       tests/integration/test_{consumer_lifecycle,thread_safety}.py)
# The free-threaded one first (its build is the longest; lane 4 makes its venv),
# then the newest.
OTHER_PYTHONS=("${FT_VERSION}t" 3.15 3.12 3.13 3.14)
# The wheel test (sdist -> manylinux wheel -> fresh venv, ~90 s each) on the
# free-threaded Python and the newest besides this machine's 3.11 (all five
# made the run longer than its 20-minute budget). Their venvs get the dev
# extra (the build and packaging tools; and QUICK's Django, Celery and
# OpenTelemetry), the others the test extra only. None gets nkeys (the creds
# tests run on 3.11; nkeys needs cffi, which refuses free-threaded 3.13, and
# scripts/free-threaded-constraints.txt has the rest).
WHEEL_PYTHONS=("${FT_VERSION}t" 3.15)

# cpu_of FILE: the whole seconds of a "%U %S" time report (user + system).
cpu_of() {
    awk '{printf "%d", $1 + $2}' "$1"
}

# has_wheel_test V: true if Python V is one of WHEEL_PYTHONS.
has_wheel_test() {
    [[ " ${WHEEL_PYTHONS[*]} " == *" $1 "* ]]
}

# job NAME CMD...: run CMD with its output in $LOGS/NAME.log; record its status
# and say how long it took and the CPU it used (its own and its children's, user
# + system: the run's budget is the two cores' time, so this is what to cut).
job() {
    local name="$1" start rc cpu TIMEFORMAT="%U %S"
    shift
    start=$(date +%s)
    set +e
    { time { (set -e; "$@") >"$LOGS/$name.log" 2>&1; }; } 2>"$LOGS/$name.cpu"
    rc=$?
    set -e
    echo "$rc" >"$LOGS/$name.rc"
    cpu=$(cpu_of "$LOGS/$name.cpu")
    if [ "$rc" -eq 0 ]; then
        echo "== $name: ok ($(( $(date +%s) - start )) s, CPU $cpu s) -- $(tail -n 1 "$LOGS/$name.log")"
    else
        echo "== $name: FAILED (exit $rc, $(( $(date +%s) - start )) s, CPU $cpu s), log: $LOGS/$name.log"
    fi
}

# suite IMPL [PYTEST ARGS]: the whole suite with that implementation.
# JSCLIENT_ONCE=c: the tests that do not depend on the implementation
# (tests/conftest.py, marker impl_independent) run in the JSCLIENT_IMPL=c run
# only, and that run is two jobs in two lanes: the tests that run twice
# ("-m 'not impl_independent'") and the once tests ("-m impl_independent").
suite() {
    local impl="$1"
    shift
    JSCLIENT_IMPL="$impl" JSCLIENT_ONCE=c python -m pytest -q --durations=30 "$@" "${SUITE_ARGS[@]}"
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

# claim NAME: true for the first caller only (mkdir is atomic), so that each
# step of the other Pythons' queue runs exactly once.
claim() {
    mkdir "$LOGS/claim-$1" 2>/dev/null
}

# record V FIELD...: what V's setup gave, in $LOGS/py-V (one line of
# tab-separated fields, moved into place whole, since other lanes wait for
# it): "ready VENV VERSION ENVFILE ORIGIN" (ENVFILE: what to source before
# building with it, or -), "skipped REASON" or "failed".
record() {
    local v="$1" IFS=$'\t'
    shift
    echo "$*" >"$LOGS/py-$v.tmp"
    mv "$LOGS/py-$v.tmp" "$LOGS/py-$v"
}

# setup_python V: find Python V, else fetch Debian's, and make its venv.
setup_python() {
    local v="$1" py venv origin rc reason start envfile=- STAGES="" extras=test
    # The quick suite needs the test extra only; the wheel test the build and
    # packaging tools of dev.
    if has_wheel_test "$v"; then extras=dev; fi
    if [[ "$v" == *t ]]; then
        if [ ! -f "$FT_TOOL" ]; then
            echo "Python $v: no free-threaded build script at $FT_TOOL: skipped"
            record "$v" skipped "no free-threaded build script at $FT_TOOL"
            return 0
        fi
        # The build started at the top; wait for its end.
        start=$(date +%s)
        until [ -f "$FT_BUILD/rc" ]; do
            if [ $(( $(date +%s) - start )) -ge 2400 ]; then
                echo "Python $v: the free-threaded build did not end within 40 min: skipped"
                record "$v" skipped "the free-threaded build did not end within 40 min"
                return 0
            fi
            sleep 2
        done
        cp "$FT_BUILD/err" "$LOGS/ft-$v.err"
        rc=$(cat "$FT_BUILD/rc")
        py=$(tail -n 1 "$FT_BUILD/out")
        if [ "$rc" -ne 0 ] || [ ! -x "$py" ]; then
            reason=$(tail -n 1 "$LOGS/ft-$v.err")
            echo "Python $v: the free-threaded build failed ($reason): skipped"
            record "$v" skipped "the free-threaded build failed: $reason (log: ft-$v.err)"
            return 0
        fi
        STAGES="free-threaded build (waited for its end) $(( $(date +%s) - start )) s,"
        STAGES+=" its CPU $(cpu_of "$FT_BUILD/cpu") s"
        origin="free-threaded, built from source"
    elif py=$(bash scripts/find-python.sh "$v"); then
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
            record "$v" skipped "not on this machine; $reason"
            return 0
        fi
        [ "$rc" -eq 0 ] || return "$rc"
        STAGES="Debian's Python $(( $(date +%s) - start )) s"
        # CPATH: Debian's multiarch pyconfig.h, for every build with it.
        envfile="$(dirname "$(dirname "$(dirname "$py")")")/env"
        source "$envfile"
        origin="Debian's"
    fi
    venv="${JSCLIENT_VENV:-$ROOT/.venv}-$v"
    echo "Python $v ($py): venv and build"
    stage "venv and build" env PYTHON="$py" JSCLIENT_VENV="$venv" JSCLIENT_EXTRAS="$extras" \
        bash scripts/setup.sh
    record "$v" ready "$venv" \
        "$("$venv/bin/python" -c 'import platform; print(platform.python_version())')" \
        "$envfile" "$origin"
    echo "Python $v: $STAGES"
}

# make_python V: set up V unless someone has claimed it already.
make_python() {
    local v="$1"
    if claim "setup-$v"; then
        job "setup-$v" setup_python "$v"
        [ -f "$LOGS/py-$v" ] || record "$v" failed
    fi
}

# python_ready V: true once V's venv is ready (made here if no one has
# started it); false if its setup was skipped or failed, or took over 30 min.
python_ready() {
    local v="$1" waited=0 state
    make_python "$v"
    until [ -f "$LOGS/py-$v" ]; do
        if [ "$waited" -ge 1800 ]; then
            echo "== Python $v: its venv was not ready after $waited s"
            return 1
        fi
        sleep 2
        waited=$((waited + 2))
    done
    IFS=$'\t' read -r state _ <"$LOGS/py-$v"
    [ "$state" = ready ]
}

# with_python V ARGS...: V's venv's python with ARGS (Debian's include folder
# on CPATH for what it builds).
with_python() {
    local v="$1" state venv version envfile origin
    shift
    IFS=$'\t' read -r state venv version envfile origin <"$LOGS/py-$v"
    if [ "$envfile" != - ]; then
        source "$envfile"
    fi
    "$venv/bin/python" "$@"
}

quick_suite() {
    local tests=("${QUICK_MID[@]}")
    [ "$1" != "${FT_VERSION}t" ] || tests=("${QUICK[@]}")
    JSCLIENT_IMPL=c with_python "$1" -m pytest -q "${tests[@]}"
}

wheel_test() {
    with_python "$1" -m pytest -q -m wheel tests/packaging
}

# The other Pythons' quick suites, then their wheel tests: one queue for both
# lanes.
other_pythons() {
    local v
    for v in "${OTHER_PYTHONS[@]}"; do
        if claim "quick-$v" && python_ready "$v"; then
            job "python-$v" quick_suite "$v"
        fi
    done
    for v in "${WHEEL_PYTHONS[@]}"; do
        if claim "wheel-$v" && python_ready "$v"; then
            job "wheel-$v" wheel_test "$v"
        fi
    done
}

# The other Pythons' venvs, made while the lanes run the suites; niced, so
# that the suites come first when both want the CPU.
builder() {
    local v
    renice -n 10 -p "$BASHPID" >/dev/null || true
    # Not the free-threaded venv: lane 4 makes it as soon as its interpreter
    # is built, at full priority, since that lane is the run's longest path.
    for v in "${OTHER_PYTHONS[@]}"; do
        [ "$v" = "${FT_VERSION}t" ] || make_python "$v"
    done
}

lane1() {
    job "pytest-c" suite c -m "not impl_independent"
    other_pythons
}

lane2() {
    job "pytest-python" suite python
    job "benchmarks-smoke" python -m pytest -q benchmarks --benchmark-disable
    job "wheel-$(python -c 'import platform; print(platform.python_version())')" \
        python -m pytest -q -m wheel tests/packaging
    other_pythons
}

lane3() {
    job "pytest-c-once" suite c -m impl_independent
    job "jetstream-v2" env JSCLIENT_TEST_SERVER_FEATURES=js_ack_fc_v2 JSCLIENT_IMPL=c \
        python -m pytest -q "${JS_V2[@]}"
    other_pythons
}

# lane 4: the free-threaded Python's venv (waiting idle for its build), then
# its quick suite and, unless a lane of the queue took it meanwhile, its wheel
# test; the other Pythons' queue skips what this lane has claimed.
lane4() {
    local v="${FT_VERSION}t"
    if claim "quick-$v" && python_ready "$v"; then
        job "python-$v" quick_suite "$v"
        if claim "wheel-$v"; then
            job "wheel-$v" wheel_test "$v"
        fi
    fi
}

echo "== tests in three lanes (and 3.13t's in a fourth), the other Pythons' venvs made beside them (logs: $LOGS)"
lane1 &
pid1=$!
lane2 &
pid2=$!
lane3 &
pid3=$!
lane4 &
pid4=$!
builder &
pid5=$!
failed=0
for pid in "$pid1" "$pid2" "$pid3" "$pid4" "$pid5"; do
    if ! wait "$pid"; then
        failed=1
        echo "== a lane stopped before its end (exit status of process $pid)"
    fi
done

for rc in "$LOGS"/*.rc; do
    if [ "$(cat "$rc")" -ne 0 ]; then
        failed=1
        name="$(basename "$rc" .rc)"
        echo
        echo "==================== $name failed: its log ===================="
        cat "$LOGS/$name.log"
    fi
done

# result NAME: ok, FAILED or "did not run", from the job's status.
result() {
    if [ ! -f "$LOGS/$1.rc" ]; then
        echo "did not run"
    elif [ "$(cat "$LOGS/$1.rc")" -eq 0 ]; then
        echo ok
    else
        echo FAILED
    fi
}

# The CPU of every process the run waited for (user, system), the two cores' budget.
times >"$LOGS/times"  # (not in $(...): a subshell's own times are nil)
echo "== CPU of the whole run (user, system): $(tail -n 1 "$LOGS/times")"
echo "== Pythons tested:"
echo "   $(python -c 'import platform; print(platform.python_version())')" \
    "(full suite: both implementations, the implementation-independent tests once; wheel test)"
for v in "${OTHER_PYTHONS[@]}"; do
    if [ ! -f "$LOGS/py-$v" ]; then
        echo "   $v: did not finish"
        continue
    fi
    IFS=$'\t' read -r state venv version envfile origin <"$LOGS/py-$v"
    case "$state" in
        ready)
            wheel="wheel test $(result "wheel-$v")"
            has_wheel_test "$v" || wheel="wheel test on 3.11, 3.15 and 3.13t only"
            echo "   $version ($origin): quick suite $(result "python-$v"), $wheel" ;;
        skipped) echo "   $v: skipped, $venv" ;;
        *) echo "   $v: venv and build failed (log: $LOGS/setup-$v.log)" ;;
    esac
done
exit "$failed"
