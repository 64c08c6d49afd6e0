#!/usr/bin/env bash
# Installs what droidmesh's tests need on a fresh Debian machine: the `adb` server that
# attaches our simulated devices (Debian's platform-tools). Idempotent; needs root or sudo.
set -euo pipefail
if command -v adb >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing Debian's adb"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq adb >/dev/null
adb version | head -1
