#!/usr/bin/env bash
# The main job on a fresh machine: builds droidmesh and runs the demo goal end to end. With no
# model configured (no [llm] section, no OPENAI_API_KEY) it runs on built-in simulated phones
# and replays a recorded model session, and says so; with a key it runs a real model.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "run: building droidmesh (release; the first build takes a few minutes)"
cargo build --release -q -p droidmesh
exec target/release/droidmesh run "${1:-Open Settings and turn on Wi-Fi}"
