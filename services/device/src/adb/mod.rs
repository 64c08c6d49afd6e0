//! The ADB layer: runs device commands through an adb server or straight to a device's
//! ADB-over-TCP port, both with our own async clients, bounded by a timeout.
pub mod direct;
pub mod host;
pub mod key;
pub mod server;

use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

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
    /// The device behind the adb server; `None` for a direct device.
    server: Option<server::ServerRoute>,
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
        let (direct, server) = match &route {
            Route::Direct(addr) => (Some(direct::DirectDevice::new(*addr, key_path)), None),
            Route::Server(addr) => (None, Some(server::ServerRoute::new(*addr, serial.clone()))),
        };
        Self {
            label: crate::metrics::serial_label(&serial),
            serial,
            route,
            timeout,
            direct,
            server,
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
        let Some(route) = &self.server else {
            return Err(DeviceError::Unavailable {
                serial: self.serial.clone(),
                detail: format!("no route was set up through the adb server at {addr}"),
            });
        };
        // Cancel-safe: on timeout the connection is dropped and the server closes the stream.
        match tokio::time::timeout(self.timeout, route.shell(command)).await {
            Err(_) => Err(timed_out()),
            Ok(Ok(out)) => Ok(out),
            Ok(Err(server::ServerError::Unavailable(detail))) => Err(DeviceError::Unavailable {
                serial: self.serial.clone(),
                detail: format!("`{command}` failed: {detail}"),
            }),
            Ok(Err(server::ServerError::Refused(detail))) => Err(DeviceError::Adb {
                target: format!("device {}", self.serial),
                detail: format!("`{command}` failed: {detail}"),
            }),
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
