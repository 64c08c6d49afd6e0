"""Runs the demo goal on a droidmesh gateway over gRPC and follows its events to the end.

Usage: python run_task.py [HOST:PORT]   (else $DROIDMESH_GATEWAY, else 127.0.0.1:50050)
$DROIDMESH_DEVICE, if set, is the serial of the phone to use (else any free one).
Needs the stubs of generate.sh (in ./gen, or the directory in $DROIDMESH_PY_STUBS).
Exits 0 when the task succeeded, 1 when it failed, 2 when the call itself failed.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, os.environ.get("DROIDMESH_PY_STUBS", str(Path(__file__).parent / "gen")))

import grpc  # noqa: E402
from droidmesh.v1 import gateway_pb2, gateway_pb2_grpc  # noqa: E402

GOAL = "Open Settings and turn on Wi-Fi"


def main():
    target = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DROIDMESH_GATEWAY", "127.0.0.1:50050")
    device = os.environ.get("DROIDMESH_DEVICE", "")
    with grpc.insecure_channel(target) as channel:
        gateway = gateway_pb2_grpc.GatewayStub(channel)
        try:
            task_id = gateway.SubmitTask(gateway_pb2.TaskRequest(goal=GOAL, device=device), timeout=10).task_id
            print(f"task {task_id}")
            completed = None
            # Past events first, then live ones, each once; the stream ends after `completed`.
            for event in gateway.WatchTask(gateway_pb2.WatchTaskRequest(task_id=task_id), timeout=300):
                kind = event.WhichOneof("kind")
                print(f"{event.seq} {kind}", flush=True)
                if kind == "completed":
                    completed = event.completed
        except grpc.RpcError as e:
            print(f"error: {e.code().name}: {e.details()}", file=sys.stderr)
            return 2
    if completed is None:
        print("error: the event stream ended before the task completed", file=sys.stderr)
        return 2
    if not completed.success:
        print(f"failed: {completed.error or completed.answer}", file=sys.stderr)
        return 1
    print(f"answer: {completed.answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
