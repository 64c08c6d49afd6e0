//! Integration tests of the manager: a scripted LLM HTTP server on loopback, real gRPC clients,
//! and for `Plan` the real device service over a simulated device.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod bad_input;
mod endpoints;
mod plan;
mod structured;
