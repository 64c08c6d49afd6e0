#!/usr/bin/env bash
# droidmesh's test command: installs what the tests need, then formatting, lints and every
# test of the workspace (unit, integration and cross-process end-to-end).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The cross-process tests in tests/ start the droidmesh binary itself.
cargo build -p droidmesh
cargo test --workspace
