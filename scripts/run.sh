#!/usr/bin/env bash
# The main job on a fresh machine: builds droidmesh, starts two simulated phones, attaches
# them to the adb server, serves the device service and shows what an agent sees.
# Nothing here needs a phone or an API key. Stops everything it started on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "run: building droidmesh (release)"
cargo build --release -q -p droidmesh
B=target/release/droidmesh

SIM_PORT=${SIM_PORT:-6555}
DEVICE_PORT=${DEVICE_PORT:-50051}
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

"$B" sim --port "$SIM_PORT" --devices 2 &
pids+=($!)
sleep 0.5
adb start-server >/dev/null 2>&1 || true
A="127.0.0.1:$SIM_PORT"
B2="127.0.0.1:$((SIM_PORT + 1))"
adb connect "$A" >/dev/null
adb connect "$B2" >/dev/null
for _ in $(seq 50); do
  [ "$(adb devices | grep -c -E "^127\.0\.0\.1:($SIM_PORT|$((SIM_PORT + 1)))\s+device")" = 2 ] && break
  sleep 0.1
done
adb devices -l

"$B" serve device --listen "127.0.0.1:$DEVICE_PORT" &
pids+=($!)
sleep 0.5
EP="http://127.0.0.1:$DEVICE_PORT"

echo; echo "== devices, as the device service lists them"
"$B" devices --endpoint "$EP"

echo; echo "== open Settings on $A and read the screen"
adb -s "$A" shell monkey -p com.android.settings 1 >/dev/null
"$B" state "$A" --endpoint "$EP" | head -16

echo; echo "== ground truth, read the way one reads a phone"
echo "wifi_on before: $(adb -s "$A" shell settings get global wifi_on)"
adb -s "$A" shell input tap 540 330
echo "wifi_on after tapping the Wi-Fi row: $(adb -s "$A" shell settings get global wifi_on)"
adb -s "$A" exec-out screencap -p > target/droidmesh-screen.png
echo "screenshot of $A: target/droidmesh-screen.png ($(wc -c < target/droidmesh-screen.png) bytes)"

if [ "${KEEP_RUNNING:-0}" = 1 ]; then
  echo; echo "running; press Ctrl-C to stop"; wait
fi
