#!/usr/bin/env bash
# Installs what the client examples (examples/) and scripts/check-clients.sh need: a virtualenv
# with the pins of examples/python/requirements.txt (grpcio, grpcio-tools, grpcio-reflection)
# in target/clients/python, and examples/node's locked packages (`npm ci`). Go comes from
# Debian's golang-go (scripts/setup.sh); its example needs nothing else. Idempotent: reinstalls
# only when the pins or the lockfile change. Prints the virtualenv's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${CARGO_TARGET_DIR:-$PWD/target}/clients"
VENV="$DIR/python"
REQ=examples/python/requirements.txt
mkdir -p "$DIR"
if ! [ -x "$VENV/bin/python" ] || ! cmp -s "$REQ" "$VENV/.requirements"; then
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    echo "clients-tools: installing Debian's python3-venv" >&2
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  echo "clients-tools: installing $(grep -v '^#' "$REQ" | xargs) into $VENV" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ" >&2
  cp "$REQ" "$VENV/.requirements"
fi
LOCK=examples/node/package-lock.json
if ! [ -d examples/node/node_modules/@grpc/grpc-js ] || ! cmp -s "$LOCK" "$DIR/node.lock"; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "clients-tools: npm is not installed (Debian: apt-get install npm)" >&2
    exit 2
  fi
  echo "clients-tools: npm ci in examples/node" >&2
  (cd examples/node && npm ci --no-audit --no-fund --loglevel=error >&2)
  cp "$LOCK" "$DIR/node.lock"
fi
echo "$VENV"
