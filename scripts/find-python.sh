#!/usr/bin/env bash
# Print the path of a working CPython X.Y interpreter (e.g. `find-python.sh 3.13`):
# pythonX.Y on PATH, else one that pyenv has installed. Exit 1 when there is none.
set -uo pipefail
v="$1"
check() { "$1" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$v'.split('.'))))" 2>/dev/null; }
if cand=$(command -v "python$v" 2>/dev/null) && check "$cand"; then
    echo "$cand"; exit 0
fi
if command -v pyenv >/dev/null 2>&1; then
    for cand in "$(pyenv root)"/versions/"$v".*/bin/python"$v"; do
        if [ -x "$cand" ] && check "$cand"; then echo "$cand"; exit 0; fi
    done
fi
exit 1
