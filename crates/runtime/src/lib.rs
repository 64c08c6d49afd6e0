//! What every droidmesh service repeats: config loading, telemetry, the server bootstrap and the gRPC client stack.
