//! Integration tests of the sandbox: one binary, a module per area.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod attacks;
mod common;
mod control;
mod engine;
mod host;
mod repl;
