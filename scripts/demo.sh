#!/usr/bin/env bash
# One command: set everything up, then run the demo on an embedded nats-server.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec python -m jsclient demo "$@"
