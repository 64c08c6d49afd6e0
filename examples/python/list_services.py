"""Lists a gateway's gRPC services and the methods of droidmesh.v1.Gateway through server
reflection, like `grpcurl -plaintext HOST:PORT list` and `... describe droidmesh.v1.Gateway`.

Usage: python list_services.py [HOST:PORT]   (else $DROIDMESH_GATEWAY, else 127.0.0.1:50050)
"""

import os
import sys

import grpc
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


def main():
    target = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DROIDMESH_GATEWAY", "127.0.0.1:50050")
    with grpc.insecure_channel(target) as channel:
        grpc.channel_ready_future(channel).result(timeout=10)
        reflection = ProtoReflectionDescriptorDatabase(channel)
        for name in reflection.get_services():
            print(name)
        pool = descriptor_pool.DescriptorPool(reflection)
        gateway = pool.FindServiceByName("droidmesh.v1.Gateway")
        for m in gateway.methods:
            stream = "stream " if m.server_streaming else ""
            print(f"  rpc {m.name}({m.input_type.full_name}) returns ({stream}{m.output_type.full_name})")


if __name__ == "__main__":
    main()
