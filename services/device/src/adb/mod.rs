//! The ADB layer: runs device commands through adb_client, off the async workers and bounded
//! by a timeout, over an adb server or straight to a device's ADB-over-TCP port.
pub mod host;
pub mod key;

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use adb_client::server_device::ADBServerDevice;
use adb_client::tcp::ADBTcpDevice;
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

/// Idle direct-TCP connections to one device. adb_client's TCP device is one connection that
/// cannot run two sessions at once, so concurrent commands take separate connections; each
/// keeps its CNXN handshake for the next call. A connection that failed is dropped.
type Pool = Arc<Mutex<Vec<ADBTcpDevice>>>;

/// One device and the way to reach it.
#[derive(Debug)]
pub struct AdbDevice {
    serial: String,
    route: Route,
    timeout: Duration,
    key_path: Option<std::path::PathBuf>,
    pool: Pool,
}

impl AdbDevice {
    pub fn new(
        serial: String,
        route: Route,
        timeout: Duration,
        key_path: Option<std::path::PathBuf>,
    ) -> Self {
        Self {
            serial,
            route,
            timeout,
            key_path,
            pool: Arc::default(),
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
    /// through the server, the raw `shell:` service directly).
    pub async fn shell_bytes(&self, command: &str) -> Result<Vec<u8>> {
        let serial = self.serial.clone();
        let cmd = command.to_owned();
        let route = self.route.clone();
        let pool = self.pool.clone();
        let key = self.key_path.clone();
        // A detached thread rather than `spawn_blocking`: adb_client reads without a timeout,
        // so a stalled device can hold the call forever. The caller gives up after
        // `self.timeout`; the thread ends when the device's connection finally breaks, and a
        // runtime shutting down never waits for it.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let work = move || -> std::result::Result<Vec<u8>, RustADBError> {
            let mut out = Vec::new();
            match route {
                Route::Server(addr) => {
                    let mut dev = ADBServerDevice::new(serial, Some(addr));
                    dev.shell_command(&cmd, Some(&mut out), None)?;
                }
                Route::Direct(addr) => {
                    let idle = pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
                    let mut dev = match idle {
                        Some(d) => d,
                        None => {
                            let key = key.or_else(key::default_key_path).ok_or_else(|| {
                                RustADBError::ADBRequestFailed(
                                    "no home directory for the adb key; set device.adb_key_path"
                                        .into(),
                                )
                            })?;
                            key::ensure_key(&key)
                                .map_err(|e| RustADBError::ADBRequestFailed(e.to_string()))?;
                            ADBTcpDevice::new_with_custom_private_key(addr, key)?
                        }
                    };
                    dev.shell_command(&cmd, Some(&mut out), None)?;
                    pool.lock().unwrap_or_else(|p| p.into_inner()).push(dev);
                }
            }
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
            Err(_) => Err(DeviceError::Timeout {
                serial: self.serial.clone(),
                command: command.to_owned(),
                timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            }),
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
