"""Runs the client examples of examples/ against one `droidmesh up` (run by scripts/check-clients.sh).

Starts the mesh on loopback (scripts/mesh_up.py: simulated phones, the recorded Wi-Fi demo as
the model, no network), generates the Python stubs with grpcio-tools, builds the Go example,
then runs each example against the gateway's gRPC or HTTP address and checks that it exited 0,
printed its events numbered 1, 2, 3, ... without gaps, ending with `completed`, and printed the
demo's answer; that every example saw the same kinds of events; that each exits 1 when the
task fails (the demo again on its phone, where Wi-Fi is now on); and that server reflection
lists droidmesh.v1.Gateway and its methods. Every step has a deadline; the mesh is stopped on
every exit. Standard library only.
"""

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mesh_up import DEMO_CASSETTE, REPO, Mesh

ANSWER = "Wi-Fi is on: the switch in Settings reads ON"
EXAMPLE_DEADLINE = 60
BUILD_DEADLINE = 180
EXAMPLES = 4  # examples, phones, and the demo tasks of each phone (2) the cassette holds


def fail(message):
    print(f"check-clients: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def run(cmd, deadline, env=None, cwd=None):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=deadline, env=env,
                              cwd=cwd, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(map(str, cmd))} did not finish within {deadline} s")


def demo_cassette(workdir, tasks):
    """The recorded demo, its interactions repeated `tasks` times: a replayed interaction is
    not played again, so each demo task (one after another) plays the next copy."""
    cassette = json.loads(DEMO_CASSETTE.read_text())
    cassette["interactions"] = cassette["interactions"] * tasks
    path = workdir / "demo-repeated.json"
    path.write_text(json.dumps(cassette))
    return path


def serials(base):
    """The serials of the mesh's phones, from GET /v1/devices."""
    conn = http.client.HTTPConnection(base, timeout=10)
    conn.request("GET", "/v1/devices")
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    if resp.status != 200:
        fail(f"GET /v1/devices: {resp.status} {body[:500]!r}")
    return [d["serial"] for d in json.loads(body).get("devices", [])]


def kinds(name, out):
    """The event kinds an example printed ("seq kind" lines), checked to be numbered 1, 2, ..."""
    lines = re.findall(r"^(\d+) (\w+)$", out, re.M)
    seqs = [int(s) for s, _ in lines]
    if not lines or seqs != list(range(1, len(lines) + 1)):
        fail(f"{name} printed events numbered {seqs}, expected 1, 2, 3, ... without gaps:\n{out}")
    # gRPC clients name kinds as in the .proto (step_started), HTTP as in its JSON (stepStarted).
    found = [k.replace("_", "").lower() for _, k in lines]
    if found[-1] != "completed":
        fail(f"{name}: the last event is {lines[-1][1]}, expected completed:\n{out}")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--python", required=True, help="the virtualenv's python (grpcio, grpcio-tools)")
    parser.add_argument("--go", default="go")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="droidmesh-check-clients-") as tmp:
        workdir = Path(tmp)
        stubs = workdir / "gen"
        done = run(["bash", REPO / "examples/python/generate.sh", stubs], BUILD_DEADLINE,
                   env={**os.environ, "PYTHON": args.python})
        if done.returncode != 0:
            fail(f"generating the Python stubs failed:\n{done.stderr}")
        go_cache = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "clients/go-cache"
        go_env = {**os.environ, "GOCACHE": str(go_cache), "GOPROXY": "off", "GOFLAGS": "-mod=mod",
                  "GOTOOLCHAIN": "local"}
        go_binary = workdir / "runtask"
        done = run([args.go, "build", "-o", go_binary, "."], BUILD_DEADLINE, env=go_env,
                   cwd=REPO / "examples/go")
        if done.returncode != 0:
            fail(f"building the Go example failed:\n{done.stdout}{done.stderr}")

        mesh = Mesh(args.binary, workdir, fail, cassette=demo_cassette(workdir, 2 * EXAMPLES),
                    sims=EXAMPLES)
        try:
            grpc_addr = mesh.printed("gateway")
            if not grpc_addr:
                fail(f"up did not print the gateway's gRPC address:\n{mesh.output()}")
            examples = [
                ("python gRPC", [args.python, REPO / "examples/python/run_task.py", grpc_addr]),
                ("python HTTP", [args.python, REPO / "examples/python/run_task_http.py", mesh.base]),
                ("node gRPC", ["node", REPO / "examples/node/run_task.js", grpc_addr]),
                ("go HTTP", [go_binary, mesh.base]),
            ]
            phones = serials(mesh.base)
            if len(examples) != EXAMPLES or len(phones) != EXAMPLES:
                fail(f"{len(examples)} examples, {len(phones)} phones {phones}: expected {EXAMPLES} of each")
            seen = {}
            for (name, cmd), phone in zip(examples, phones):
                # The demo turns Wi-Fi on, so each example gets a phone of its own where it is off.
                env = {**os.environ, "DROIDMESH_PY_STUBS": str(stubs), "DROIDMESH_DEVICE": phone}
                t0 = time.monotonic()
                done = run(cmd, EXAMPLE_DEADLINE, env=env)
                out = done.stdout
                if done.returncode != 0:
                    fail(f"{name} exited with {done.returncode}:\n{out}{done.stderr}")
                seen[name] = kinds(name, out)
                if f"answer: {ANSWER}" not in out.splitlines():
                    fail(f"{name} did not print the demo's answer {ANSWER!r}:\n{out}")
                print(f"check-clients: {name}: {len(seen[name])} events, answer printed, "
                      f"{time.monotonic() - t0:.1f} s")
            first = next(iter(seen.values()))
            for name, found in seen.items():
                if found != first:
                    fail(f"{name} saw the events {found}, the python gRPC example {first}")

            # Again on the same phones, where Wi-Fi is now on: the replayed taps turn it off,
            # the task fails, and each example must say so with exit status 1, no answer.
            for (name, cmd), phone in zip(examples, phones):
                env = {**os.environ, "DROIDMESH_PY_STUBS": str(stubs), "DROIDMESH_DEVICE": phone}
                done = run(cmd, EXAMPLE_DEADLINE, env=env)
                if done.returncode != 1 or "answer:" in done.stdout or \
                        not done.stderr.startswith("failed: "):
                    fail(f"{name} on a phone with Wi-Fi on exited with {done.returncode}, expected "
                         f"1 and `failed: ...`:\n{done.stdout}{done.stderr}")
                kinds(name, done.stdout)
                print(f"check-clients: {name}: a failed task exits 1 ({done.stderr.strip()!r})")

            done = run([args.python, REPO / "examples/python/list_services.py", grpc_addr],
                       EXAMPLE_DEADLINE)
            listed = done.stdout
            if done.returncode != 0 or "droidmesh.v1.Gateway" not in listed.splitlines() or \
                    "  rpc RunTask(droidmesh.v1.TaskRequest) returns (stream droidmesh.v1.TaskEvent)" \
                    not in listed.splitlines():
                fail(f"reflection did not list droidmesh.v1.Gateway and RunTask "
                     f"(exit {done.returncode}):\n{listed}{done.stderr}")
            print(f"check-clients: reflection lists {len(listed.splitlines())} lines:\n{listed}", end="")
        except SystemExit:
            print(mesh.output()[-4000:], file=sys.stderr)
            raise
        finally:
            mesh.stop()
    print(f"check-clients: ok in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
