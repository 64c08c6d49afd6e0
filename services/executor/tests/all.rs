//! Integration tests of the executor: a scripted LLM HTTP server on loopback, the real device
//! service and a simulated device, and a real gRPC client driving RunCodeAct (CodeAct loop) and
//! ExecuteSubgoal (one atomic action per subgoal).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod cards;
mod codeact;
mod custom_tools;
mod echo;
mod endpoints;
mod loops;
mod masking;
mod mcp;
mod models;
mod rig;
mod secrets;
mod steering;
mod subgoal;
