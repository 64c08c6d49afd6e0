//! Integration tests of the text manipulator: the real simulator and device service on
//! loopback, a scripted LLM HTTP server, and a real gRPC client calling Manipulate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod rig;

mod bad_input;
mod device_edits;
mod echo;
mod endpoints;
mod errors;
mod retries;
