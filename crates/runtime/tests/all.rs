//! Integration tests of the server bootstrap and client stack over real loopback gRPC.
mod server;
