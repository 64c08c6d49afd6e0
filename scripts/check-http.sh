#!/usr/bin/env bash
# Checks the gateway's HTTP face against its own OpenAPI document: starts `droidmesh up` (the
# whole mesh, simulated phones, the recorded demo as the model; loopback only), validates
# /openapi.json, runs the demo task over HTTP and checks its JSON and events against the
# document's schemas, then runs schemathesis against it (bounded examples, a time limit),
# failing on any 5xx or response that does not conform. Stops the mesh on exit.
# Usage: scripts/check-http.sh [path/to/droidmesh]
set -euo pipefail
cd "$(dirname "$0")/.."
BINARY="${1:-${CARGO_TARGET_DIR:-target}/debug/droidmesh}"
if [ ! -x "$BINARY" ]; then
  echo "check-http: no droidmesh binary at $BINARY (build it: cargo build -p droidmesh --locked)" >&2
  exit 2
fi
VENV="$(bash scripts/http-tools.sh | tail -1)"
exec "$VENV/bin/python" scripts/check_http.py --binary "$BINARY" --schemathesis "$VENV/bin/schemathesis"
