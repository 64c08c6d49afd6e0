//! Integration tests of the executor's CodeAct loop: a scripted LLM HTTP server on loopback,
//! the real device service and a simulated device, and a real gRPC client driving RunCodeAct.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod codeact;
