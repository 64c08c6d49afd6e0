//! Integration tests of the simulator: Debian's adb server attaches simulated devices over
//! loopback TCP and drives them with the same commands a user types.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod adb;
mod clipboard;
mod clock;
mod determinism;
mod flow;
mod fuzz;
mod notes;
mod portal;
mod records;
mod screen;
mod shell;
mod stdin;
mod timing;
mod tools;
mod tools_flows;
mod tools_table;
mod transport;
mod unicode;
