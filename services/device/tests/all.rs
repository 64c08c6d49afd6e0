//! Integration tests of the device service: a real gRPC server and client, a real adb server
//! and simulated devices speaking ADB over loopback TCP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod it;
