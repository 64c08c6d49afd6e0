//! The ADB layer: runs device commands over an adb server (adb_client, off the async workers)
//! or straight to a device's ADB-over-TCP port (our own async client), bounded by a timeout.
pub mod direct;
pub mod host;
pub mod key;

use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

use adb_client::server_device::ADBServerDevice;
use adb_client::{ADBDeviceExt, RustADBError};

use crate::error::{DeviceError, Result};

/// How a device is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Through the adb server at this address.
    Server(SocketAddrV4),
    /// Straight to the device's ADB port.
    Direct(SocketAddr),
}

/// One device and the way to reach it.
#[derive(Debug)]
pub struct AdbDevice {
    serial: String,
    route: Route,
    timeout: Duration,
    /// The connection kept to a direct device; `None` through a server.
    direct: Option<direct::DirectDevice>,
    /// This device's `device.serial` metric attribute.
    label: opentelemetry::KeyValue,
}

impl AdbDevice {
    pub fn new(
        serial: String,
        route: Route,
        timeout: Duration,
        key_path: Option<std::path::PathBuf>,
    ) -> Self {
        let direct = match &route {
            Route::Direct(addr) => Some(direct::DirectDevice::new(*addr, key_path)),
            Route::Server(_) => None,
        };
        Self {
            label: crate::metrics::serial_label(&serial),
            serial,
            route,
            timeout,
            direct,
        }
    }

    pub fn serial(&self) -> &str {
        &self.serial
    }

    pub fn route(&self) -> &Route {
        &self.route
    }

    /// Opens (or reuses) a direct connection now, so that a bad address fails at connect time.
    pub async fn probe(&self) -> Result<()> {
        self.shell("echo ok").await.map(|_| ())
    }

    /// Runs `command` in the device's shell and returns its raw output (binary safe: shell v2
    /// through the server when the device offers it, the `exec:` service directly). Its time
    /// goes into `droidmesh.adb.command.duration`.
    pub async fn shell_bytes(&self, command: &str) -> Result<Vec<u8>> {
        let started = std::time::Instant::now();
        let result = self.run_shell(command).await;
        crate::metrics::adb_command(&self.label, started.elapsed(), result.as_ref().err());
        result
    }

    async fn run_shell(&self, command: &str) -> Result<Vec<u8>> {
        let timed_out = || DeviceError::Timeout {
            serial: self.serial.clone(),
            command: command.to_owned(),
            timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
        };
        let addr = match (&self.route, &self.direct) {
            (Route::Server(addr), _) => *addr,
            (Route::Direct(_), Some(dev)) => {
                // Cancel-safe: on timeout the stream is closed on the device.
                return match tokio::time::timeout(self.timeout, dev.shell(command)).await {
                    Err(_) => Err(timed_out()),
                    Ok(Ok(out)) => Ok(out),
                    Ok(Err(direct::DirectError::Connection(detail))) => {
                        Err(DeviceError::Unavailable {
                            serial: self.serial.clone(),
                            detail: format!("`{command}` failed: {detail}"),
                        })
                    }
                    Ok(Err(direct::DirectError::Refused(detail))) => Err(DeviceError::Adb {
                        target: format!("device {}", self.serial),
                        detail: format!("`{command}` failed: {detail}"),
                    }),
                };
            }
            (Route::Direct(addr), None) => {
                return Err(DeviceError::Unavailable {
                    serial: self.serial.clone(),
                    detail: format!("no connection was set up for {addr}"),
                });
            }
        };
        let serial = self.serial.clone();
        let cmd = command.to_owned();
        // A detached thread rather than `spawn_blocking`: adb_client reads without a timeout,
        // so a stalled device can hold the call forever. The caller gives up after
        // `self.timeout`; the thread ends when the device's connection finally breaks, and a
        // runtime shutting down never waits for it.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let work = move || -> std::result::Result<Vec<u8>, RustADBError> {
            let mut out = Vec::new();
            let mut dev = ADBServerDevice::new(serial, Some(addr));
            dev.shell_command(&cmd, Some(&mut out), None)?;
            Ok(out)
        };
        let spawned = std::thread::Builder::new()
            .name("adb-call".into())
            .spawn(move || {
                let _ = tx.send(work());
            });
        if let Err(e) = spawned {
            return Err(DeviceError::Unavailable {
                serial: self.serial.clone(),
                detail: format!("cannot start a worker thread for `{command}`: {e}"),
            });
        }
        match tokio::time::timeout(self.timeout, rx).await {
            Err(_) => Err(timed_out()),
            Ok(Err(join)) => Err(DeviceError::Unavailable {
                serial: self.serial.clone(),
                detail: format!("the adb worker for `{command}` stopped: {join}"),
            }),
            Ok(Ok(Err(e))) => Err(classify(&self.serial, command, e)),
            Ok(Ok(Ok(out))) => Ok(out),
        }
    }

    /// Runs `command` and returns its output as text (invalid UTF-8 replaced).
    pub async fn shell(&self, command: &str) -> Result<String> {
        let bytes = self.shell_bytes(command).await?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }
}

/// Sorts adb_client errors into "the device is gone" and "the device said no".
fn classify(serial: &str, command: &str, e: RustADBError) -> DeviceError {
    let text = e.to_string();
    let gone = match &e {
        RustADBError::IOError(_) => true,
        RustADBError::ADBRequestFailed(msg) => {
            let m = msg.to_ascii_lowercase();
            [
                "not found",
                "offline",
                "closed",
                "no devices",
                "unauthorized",
                "connection",
            ]
            .iter()
            .any(|w| m.contains(w))
        }
        _ => false,
    };
    if gone {
        DeviceError::Unavailable {
            serial: serial.to_owned(),
            detail: format!("`{command}` failed: {text}"),
        }
    } else {
        DeviceError::Adb {
            target: format!("device {serial}"),
            detail: format!("`{command}` failed: {text}"),
        }
    }
}
