#!/usr/bin/env bash
# Generates the Python gRPC stubs of droidmesh's protos (protos/droidmesh/v1/*.proto) with
# grpcio-tools into a directory (default examples/python/gen, not committed).
# Usage: examples/python/generate.sh [OUT_DIR]   (PYTHON: the interpreter with grpcio-tools)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PROTOS="$HERE/../../protos"
OUT="${1:-$HERE/gen}"
mkdir -p "$OUT"
"${PYTHON:-python3}" -m grpc_tools.protoc -I "$PROTOS" --python_out="$OUT" --grpc_python_out="$OUT" \
  "$PROTOS"/droidmesh/v1/*.proto
