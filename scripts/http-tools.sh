#!/usr/bin/env bash
# Installs the tools scripts/check-http.sh uses (openapi-spec-validator and schemathesis) into
# a virtualenv from PyPI, pinned in scripts/http-requirements.txt. Idempotent: reinstalls only
# when the pins change. Prints the virtualenv's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${DROIDMESH_HTTP_TOOLS:-$PWD/target/http-tools}"
REQ=scripts/http-requirements.txt
STAMP="$VENV/.requirements"
if [ -x "$VENV/bin/schemathesis" ] && [ -f "$STAMP" ] && cmp -s "$REQ" "$STAMP"; then
  echo "$VENV"
  exit 0
fi
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "http-tools: installing Debian's python3-venv" >&2
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
fi
echo "http-tools: installing $(grep -v '^#' "$REQ" | xargs) into $VENV" >&2
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ" >&2
cp "$REQ" "$STAMP"
echo "$VENV"
