//! Integration tests of the scripter: a real gRPC client and server on loopback, a scripted
//! model (MockLlmServer), and real HTTP servers on loopback for the scripts to call.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod bad_input;
mod common;
mod echo;
mod fetch_api;
mod files;
mod http_limits;
mod http_policy;
mod lifecycle;
mod replicas;
mod runs;
