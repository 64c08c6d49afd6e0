"""Checks the gateway's HTTP face against its OpenAPI document (run by scripts/check-http.sh).

Starts `droidmesh up` on loopback (two simulated phones, every agent, the recorded Wi-Fi demo
as the model: no network), waits for the address it prints for the HTTP face, then:
  1. validates GET /openapi.json against the OpenAPI 3.0 specification;
  2. runs the demo task over HTTP, follows its Server-Sent Events to the end, and validates
     every event, the task and the task list against the document's own schemas;
  3. runs schemathesis from the document (bounded examples and time), failing on any 5xx, a
     status, content type or body the document does not describe.
The mesh is stopped (SIGTERM, then SIGKILL after 15 s) on every exit.
"""

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate

from mesh_up import DEMO_GOAL, Mesh

SCHEMATHESIS_EXAMPLES = 150
SCHEMATHESIS_DEADLINE = 100


def fail(message):
    print(f"check-http: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def request(base, method, path, body=None, timeout=30):
    conn = http.client.HTTPConnection(base, timeout=timeout)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, resp.getheader("Content-Type"), data


def events(base, path, timeout=60):
    """The Server-Sent Events of `path` to the end of the stream: (id, event, data) each."""
    conn = http.client.HTTPConnection(base, timeout=timeout)
    conn.request("GET", path)
    resp = conn.getresponse()
    if resp.status != 200 or resp.getheader("Content-Type") != "text/event-stream":
        fail(f"GET {path}: {resp.status} {resp.getheader('Content-Type')}: {resp.read()[:500]!r}")
    out, current = [], {}
    for raw in resp:
        line = raw.decode().rstrip("\n")
        if not line:
            if "data" in current:
                out.append(current)
            current = {}
        elif line.startswith(":"):
            continue
        else:
            key, _, value = line.partition(": ")
            current[key] = value
    conn.close()
    return out


def validator(doc, name):
    """A validator of component schema `name`, resolving refs within the document."""
    schema = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
    return OAS30Validator(schema)


def check(doc_validator, what, value):
    errors = sorted(doc_validator.iter_errors(value), key=lambda e: list(e.path))
    if errors:
        fail(f"{what} does not match its schema: {errors[0].message} at {list(errors[0].path)}")


def run_demo(base, doc):
    status, ctype, body = request(base, "POST", "/v1/tasks", {"goal": DEMO_GOAL})
    if status != 201 or ctype != "application/json":
        fail(f"POST /v1/tasks: {status} {ctype}: {body[:500]!r}")
    created = json.loads(body)
    check(validator(doc, "droidmesh.v1.SubmitTaskResponse"), "SubmitTaskResponse", created)
    task_id = created["taskId"]
    seen = events(base, f"/v1/tasks/{task_id}/events")
    event_schema = validator(doc, "droidmesh.v1.TaskEvent")
    for i, ev in enumerate(seen, start=1):
        data = json.loads(ev["data"])
        check(event_schema, f"event {i}", data)
        if ev.get("id") != str(i) or data["seq"] != str(i) or ev.get("event") not in data:
            fail(f"event {i} is numbered or named wrongly: {ev}")
    last = json.loads(seen[-1]["data"]) if seen else {}
    if "completed" not in last or not last["completed"].get("success"):
        fail(f"the demo task did not succeed: {last}")
    status, _, body = request(base, "GET", f"/v1/tasks/{task_id}")
    task = json.loads(body)
    check(validator(doc, "droidmesh.v1.Task"), "Task", task)
    if status != 200 or task.get("state") != "TASK_STATE_SUCCEEDED":
        fail(f"GET /v1/tasks/{task_id}: {status} {task}")
    status, _, body = request(base, "GET", "/v1/tasks?pageSize=5")
    check(validator(doc, "droidmesh.v1.ListTasksResponse"), "ListTasksResponse", json.loads(body))
    status, _, body = request(base, "GET", "/v1/devices")
    check(validator(doc, "droidmesh.v1.ListDevicesResponse"), "ListDevicesResponse", json.loads(body))
    print(f"check-http: the demo task ran over HTTP: {len(seen)} events, each valid; "
          f"answer: {last['completed'].get('answer', '')!r}")


def run_schemathesis(schemathesis, base, workdir):
    cmd = [
        schemathesis, "run", f"http://{base}/openapi.json",
        "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                    "response_schema_conformance,response_headers_conformance,"
                    "unsupported_method,allow_header_conformance",
        "--max-examples", str(SCHEMATHESIS_EXAMPLES),
        "--phases", "examples,coverage,fuzzing",
        "--request-timeout", "15",
        # One worker: hypothesis parses lambdas with ast, which CPython 3.11 does not do safely
        # from two threads at once ("AST constructor recursion depth mismatch").
        "--workers", "1",
        "--seed", "1",
        "--suppress-health-check", "all",
        "--no-color",
    ]
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=workdir, timeout=SCHEMATHESIS_DEADLINE,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        fail(f"schemathesis did not finish within {SCHEMATHESIS_DEADLINE} s")
    if done.returncode != 0:
        fail(f"schemathesis found problems (exit {done.returncode}); see above")
    print(f"check-http: schemathesis passed in {time.monotonic() - started:.1f} s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--schemathesis", required=True)
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="droidmesh-check-http-") as tmp:
        workdir = Path(tmp)
        mesh = Mesh(args.binary, workdir, fail)
        try:
            status, ctype, body = request(mesh.base, "GET", "/openapi.json")
            if status != 200 or ctype != "application/json":
                fail(f"GET /openapi.json: {status} {ctype}")
            doc = json.loads(body)
            validate(doc)
            print(f"check-http: /openapi.json is a valid OpenAPI {doc['openapi']} document "
                  f"({len(doc['paths'])} paths, {len(doc['components']['schemas'])} schemas)")
            run_demo(mesh.base, doc)
            run_schemathesis(args.schemathesis, mesh.base, workdir)
        except SystemExit:
            print(mesh.output()[-4000:], file=sys.stderr)
            raise
        finally:
            mesh.stop()
    print(f"check-http: ok in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
