#!/usr/bin/env bash
# One command: set up what the demo needs (jsclient, its speedups and the
# embedded nats-server; PySpark too for --spark), then run the demo on an
# embedded nats-server. Options go to the demo (python -m jsclient demo --help).
set -euo pipefail
extras=server
for arg in "$@"; do
    if [ "$arg" = "--spark" ]; then
        extras=server,spark
    fi
done
JSCLIENT_EXTRAS="${JSCLIENT_EXTRAS:-$extras}"
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec python -m jsclient demo "$@"
