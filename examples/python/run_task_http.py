"""Runs the demo goal on a droidmesh gateway over HTTP/JSON and follows its Server-Sent Events.

Standard library only. Usage: python run_task_http.py [HOST:PORT]
(else $DROIDMESH_GATEWAY_HTTP, else 127.0.0.1:50049).
$DROIDMESH_DEVICE, if set, is the serial of the phone to use (else any free one).
Exits 0 when the task succeeded, 1 when it failed, 2 when a request failed.
"""

import http.client
import json
import os
import sys

GOAL = "Open Settings and turn on Wi-Fi"


def main():
    try:
        return run_task()
    except (OSError, http.client.HTTPException, ValueError) as e:  # ValueError: bad JSON
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


def run_task():
    base = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DROIDMESH_GATEWAY_HTTP", "127.0.0.1:50049")
    conn = http.client.HTTPConnection(base, timeout=300)
    conn.request("POST", "/v1/tasks", body=json.dumps({"goal": GOAL, "device": os.environ.get("DROIDMESH_DEVICE", "")}),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    body = resp.read()
    if resp.status != 201:
        print(f"error: POST /v1/tasks: {resp.status} {body.decode(errors='replace')}", file=sys.stderr)
        return 2
    task_id = json.loads(body)["taskId"]
    print(f"task {task_id}")

    conn.request("GET", f"/v1/tasks/{task_id}/events", headers={"Accept": "text/event-stream"})
    resp = conn.getresponse()
    if resp.status != 200:
        print(f"error: GET events: {resp.status} {resp.read().decode(errors='replace')}", file=sys.stderr)
        return 2
    completed, name, data = None, "", []
    for raw in resp:  # one SSE line at a time: "id: N", "event: kind", "data: {...}", ""
        line = raw.decode().rstrip("\r\n")
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line and data:  # a blank line ends an event
            event = json.loads("\n".join(data))
            if name == "error":  # the stream failed: {"code": ..., "message": ...}
                print(f"error: {event.get('code')}: {event.get('message')}", file=sys.stderr)
                return 2
            print(f"{event['seq']} {name}", flush=True)
            if name == "completed":
                completed = event["completed"]
            name, data = "", []
    conn.close()
    if completed is None:
        print("error: the event stream ended before the task completed", file=sys.stderr)
        return 2
    if not completed.get("success"):
        print(f"failed: {completed.get('error') or completed.get('answer', '')}", file=sys.stderr)
        return 1
    print(f"answer: {completed.get('answer', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
