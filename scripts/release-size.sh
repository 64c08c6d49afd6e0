#!/usr/bin/env bash
# Builds the release droidmesh (the binary the Dockerfile ships) and reports its size, how long
# the build took, and whether it carries debug sections or a symbol table; fails when it is
# larger than the bound. Not run in CI: a release build takes many minutes on two cores. Run it
# after changing [profile.release] in Cargo.toml or adding a dependency.
#
# Usage: scripts/release-size.sh [path/to/droidmesh]   (given a binary, it measures it, no build)
#   RELEASE_SIZE_LIMIT_MB   the bound in MB of 10^6 bytes (default 40)
#   CARGO_TARGET_DIR        where to build (default target); a directory of its own keeps the
#                           release build from holding the lock of everyone's debug builds
# Exits 0 within the bound, 1 over it, 2 when there is no binary to measure.
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT_MB="${RELEASE_SIZE_LIMIT_MB:-40}"
if ! [[ $LIMIT_MB =~ ^[0-9]+$ ]]; then
  echo "release-size: RELEASE_SIZE_LIMIT_MB should be a whole number of MB, found '$LIMIT_MB'" >&2
  exit 2
fi
if [ $# -ge 1 ]; then
  BINARY="$1"
else
  BINARY="${CARGO_TARGET_DIR:-target}/release/droidmesh"
  START=$(date +%s)
  cargo build --release -p droidmesh --locked
  echo "release-size: cargo build --release -p droidmesh took $(($(date +%s) - START)) s"
fi
if [ ! -f "$BINARY" ]; then
  echo "release-size: no droidmesh binary at $BINARY (build it: cargo build --release -p droidmesh --locked)" >&2
  exit 2
fi

BYTES=$(stat -c %s "$BINARY")
LIMIT=$((LIMIT_MB * 1000000))
echo "release-size: $BINARY is $BYTES bytes ($(awk -v b="$BYTES" 'BEGIN { printf "%.1f", b / 1e6 }') MB; bound $LIMIT_MB MB)"
if command -v readelf >/dev/null; then
  SECTIONS=$(readelf -SW "$BINARY")
  # .debug_gdb_scripts is not debug info: rustc always writes it (a line naming gdb helpers).
  DEBUG=$(grep -o '\.debug_[a-z_]*' <<<"$SECTIONS" | grep -vx '\.debug_gdb_scripts' | sort -u | tr '\n' ' ' || true)
  SYMTAB=$(grep -c '\.symtab' <<<"$SECTIONS" || true)
  echo "release-size: debug sections: ${DEBUG:-none}; symbol table: $([ "$SYMTAB" -gt 0 ] && echo yes || echo no)"
else
  echo "release-size: readelf not found (binutils), sections not listed"
fi
if [ "$BYTES" -gt "$LIMIT" ]; then
  echo "release-size: $BINARY is $BYTES bytes, over the bound of $LIMIT bytes: look for debug info or symbols kept by [profile.release] in Cargo.toml (listed above), or a new dependency (cargo bloat)" >&2
  exit 1
fi
