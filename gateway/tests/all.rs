//! Integration tests of the gateway: real gRPC clients and servers on loopback, the real device
//! service over Debian's adb server and simulated devices, and scripted agent services standing
//! in for the LLM-driven agents (direct mode's executor; reasoning mode's manager, executor,
//! scripter and text manipulator).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod agents;
mod bad_input;
mod hardening;
mod harness;
mod http;
mod limits;
mod load;
mod minds;
mod reasoning;
mod reasoning_control;
mod tasks;
mod tenant_limits;
mod tenant_refusals;
mod tenants;
