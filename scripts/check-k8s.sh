#!/usr/bin/env bash
# Checks k8s/ and the Dockerfile: renders the kustomize base and every overlay, validates each
# object against the Kubernetes schemas (strict; versions in scripts/check_k8s.py), and checks
# that the manifests agree with the code and config: every `serve` target exists in the binary,
# ports, probes, drain deadlines, autoscaling metrics, scrape annotations, the collector, and
# the Dockerfile's build against CI's. Usage: scripts/check-k8s.sh [path/to/droidmesh]
set -euo pipefail
cd "$(dirname "$0")/.."
BINARY="${1:-${CARGO_TARGET_DIR:-target}/debug/droidmesh}"
if [ ! -x "$BINARY" ]; then
  echo "check-k8s: no droidmesh binary at $BINARY (build it: cargo build -p droidmesh --locked)" >&2
  exit 2
fi
VENV="$(bash scripts/k8s-tools.sh | tail -1)"
exec "$VENV/bin/python" scripts/check_k8s.py --binary "$BINARY" --kubectl "${KUBECTL:-$VENV/bin/kubectl}"
