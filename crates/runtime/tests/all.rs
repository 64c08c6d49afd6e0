//! Integration tests of the server bootstrap and client stack over real loopback gRPC.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod connections;
mod server;
mod slow_reader;
