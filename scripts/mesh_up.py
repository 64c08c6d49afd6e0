"""Starts `droidmesh up` for the scripts' checks (scripts/check_http.py, scripts/check_clients.py).

Loopback only: every service on a free port, the HTTP face on one the caller picks, no adb
server, the recorded Wi-Fi demo as the model (no network), the task store in the check's own
directory. Waits (with a deadline) until the HTTP face answers, reads the addresses `up`
prints, and stops the mesh (SIGTERM, then SIGKILL after 15 s) in stop(). Standard library only.
"""

import http.client
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO_GOAL = "Open Settings and turn on Wi-Fi"
DEMO_CASSETTE = REPO / "droidmesh/demo/wifi-on.json"
UP_DEADLINE = 60


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(port, cassette, data_dir):
    return f"""
[listen]
host = "127.0.0.1"
gateway = 0
device = 0
executor = 0
manager = 0
scripter = 0
text_manipulator = 0
gateway_http = {port}
admin = 0

[device]
adb_server = ""

[gateway]
# Generated requests may queue for a busy phone: not for long.
device_wait_ms = 2000
# The task store (SQLite by default) in the check's own directory.
data_dir = "{data_dir}"

[llm.providers.demo]
wire = "replay"
cassette = "{cassette}"

[llm.profiles.default]
provider = "demo"
model = "recorded-demo-model"
"""


class Mesh:
    """`droidmesh up` on loopback; `fail(message)` is called (and must not return) on trouble.
    `sims` simulated phones; the model replays `cassette` (by default the recorded demo, which answers one demo task)."""

    def __init__(self, binary, workdir, fail, cassette=DEMO_CASSETTE, sims=2):
        self.fail = fail
        port = free_port()
        cfg = workdir / "droidmesh.toml"
        cfg.write_text(config(port, cassette, workdir))
        self.log = open(workdir / "up.log", "w+")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DROIDMESH_")}
        env.update({"RUST_LOG": "warn", "NO_COLOR": "1"})
        self.proc = subprocess.Popen(
            [binary, "--config", str(cfg), "up", "--sims", str(sims)],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env,
        )
        self.base = self.wait_for_http(port)

    def wait_for_http(self, port):
        """The HTTP face's address as `up` prints it, once it answers."""
        deadline = time.monotonic() + UP_DEADLINE
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.fail(f"droidmesh up exited with {self.proc.returncode}:\n{self.output()}")
            found = self.printed("gateway-http")
            if found:
                if found != f"127.0.0.1:{port}":
                    self.fail(f"up prints the HTTP face at {found}, the config asked 127.0.0.1:{port}")
                try:
                    conn = http.client.HTTPConnection(found, timeout=5)
                    conn.request("GET", "/v1/devices")
                    status = conn.getresponse().status
                    conn.close()
                    if status == 200:
                        return found
                except OSError:
                    pass
            time.sleep(0.1)
        self.fail(f"droidmesh up did not serve HTTP within {UP_DEADLINE} s:\n{self.output()}")

    def printed(self, service):
        """The host:port `up` printed for `service` ("gateway", "gateway-http", ...), or None."""
        found = re.search(rf"^{re.escape(service)}\s+http://(\S+)", self.output(), re.M)
        return found.group(1) if found else None

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

