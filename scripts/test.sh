#!/usr/bin/env bash
# droidmesh's test command: installs what the tests need, then formatting, lints and every
# test of the workspace (unit, integration and cross-process end-to-end).
set -euo pipefail
cd "$(dirname "$0")/.."
# Every relative link of README.md, ARCHITECTURE.md and docs/ names a file and heading that exist.
python3 scripts/check_links.py
# The gateway's modules import downward only: no import circle among them.
python3 scripts/module_cycles.py
# Crates import downward: libraries, then services, the gateway, the binary (cargo metadata);
# only dev-dependencies enable a crate's `testkit` feature.
python3 scripts/check_layers.py
bash scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The cross-process tests in tests/ start the droidmesh binary itself. The Dockerfile builds
# the same (with --release); scripts/check-k8s.sh checks that they agree.
cargo build -p droidmesh --locked
# k8s/ renders, validates against the Kubernetes schemas and agrees with this binary.
bash scripts/check-k8s.sh "${CARGO_TARGET_DIR:-target}/debug/droidmesh"
# The gateway's HTTP face answers as its OpenAPI document says (droidmesh up + schemathesis).
bash scripts/check-http.sh "${CARGO_TARGET_DIR:-target}/debug/droidmesh"
# The client examples in examples/ (Python, Node, Go) run the demo task to its answer.
bash scripts/check-clients.sh "${CARGO_TARGET_DIR:-target}/debug/droidmesh"
cargo test --workspace
