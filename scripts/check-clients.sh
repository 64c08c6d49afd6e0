#!/usr/bin/env bash
# Runs the client examples of examples/ (Python gRPC and HTTP, Node gRPC, Go HTTP, and the
# Python server-reflection listing) against one `droidmesh up` on loopback, and checks each
# ran the demo task to its answer. Installs what they need first (scripts/clients-tools.sh;
# Go from Debian's golang-go, see scripts/setup.sh).
# Usage: scripts/check-clients.sh [path/to/droidmesh]
set -euo pipefail
cd "$(dirname "$0")/.."
BINARY="${1:-${CARGO_TARGET_DIR:-target}/debug/droidmesh}"
if [ ! -x "$BINARY" ]; then
  echo "check-clients: no droidmesh binary at $BINARY (build it: cargo build -p droidmesh --locked)" >&2
  exit 2
fi
for tool in go node; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "check-clients: $tool is not installed (run scripts/setup.sh)" >&2
    exit 2
  fi
done
VENV="$(bash scripts/clients-tools.sh | tail -1)"
exec python3 scripts/check_clients.py --binary "$BINARY" --python "$VENV/bin/python"
