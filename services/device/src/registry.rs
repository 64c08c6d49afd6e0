//! The devices this service knows: those the adb server lists and those reached directly,
//! each with its connection, cached screen size and latest UI snapshot.
use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use droidmesh_proto::v1::Transport;
use tokio::sync::OnceCell;

use crate::adb::{AdbDevice, Route, host};
use crate::error::{DeviceError, Result};
use crate::secret_fields::SecretFields;
use crate::ui_dump::ParsedUi;

/// A known device.
#[derive(Debug)]
pub struct Slot {
    pub adb: AdbDevice,
    pub transport: Transport,
    pub info: Mutex<SlotInfo>,
    /// (width, height, density) from `wm size` / `wm density`, read once.
    pub screen: OnceCell<(u32, u32, u32)>,
    /// The UI of the latest GetState, which indices in actions refer to.
    pub last_ui: Mutex<Option<Arc<ParsedUi>>>,
    /// Set once model and product were read from the device itself.
    described: OnceCell<()>,
    /// Fields a secret was typed into, masked in every later dump.
    pub secret_fields: SecretFields,
    /// What the latest observation looked like and, after an action settled, that
    /// observation for the next `GetState` to use.
    pub settle: crate::settle::SettleState,
    /// Where this device's UI tree is read from (uiautomator or the companion service).
    pub ui_source: crate::portal::SourceCell,
    /// How this device types text (a keyboard app or `input text`), once asked.
    pub keyboard: crate::typing::KeyboardCell,
    /// Set once a listing asked for the facts a first read would otherwise ask (screen size,
    /// UI source), answered or not: a phone that did not answer is not waited for again at
    /// every listing; its first read asks for what is still missing.
    pub learned: std::sync::atomic::AtomicBool,
}

impl Slot {
    /// A usable device whose model or product is not known yet.
    pub fn needs_description(&self) -> bool {
        let info = self.info.lock().unwrap_or_else(|p| p.into_inner());
        info.state == "device"
            && (info.model.is_empty() || info.product.is_empty())
            && self.described.get().is_none()
    }

    /// Whether adb last reported the device ready for commands (`device`).
    pub fn is_usable(&self) -> bool {
        self.info.lock().unwrap_or_else(|p| p.into_inner()).state == "device"
    }

    /// Fills model and product from the device's own properties when adb did not give them
    /// (a device reached directly), once per device; a failed read is tried again next time.
    /// Spaces become `_`, as `adb devices -l` shows them.
    pub async fn describe(&self) -> Result<()> {
        if !self.needs_description() {
            return Ok(());
        }
        self.described
            .get_or_try_init(|| async {
                let model = property(&self.adb.shell("getprop ro.product.model").await?);
                let product = property(&self.adb.shell("getprop ro.product.name").await?);
                let mut info = self.info.lock().unwrap_or_else(|p| p.into_inner());
                if info.model.is_empty() {
                    info.model = model;
                }
                if info.product.is_empty() {
                    info.product = product;
                }
                Ok(())
            })
            .await
            .map(|_| ())
    }
}

/// A property value as `getprop` printed it, in `adb devices -l` form; empty when the output
/// is not one short line (an error message, say).
fn property(out: &str) -> String {
    let value = out.trim();
    if value.is_empty() || value.len() > 92 || value.contains(['\n', ':']) {
        return String::new();
    }
    value
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect()
}

/// What adb last said about a device.
#[derive(Debug, Clone, Default)]
pub struct SlotInfo {
    pub state: String,
    pub model: String,
    pub product: String,
}

/// All known devices.
#[derive(Debug)]
pub struct Registry {
    server: Option<SocketAddrV4>,
    timeout: Duration,
    key_path: Option<PathBuf>,
    slots: RwLock<HashMap<String, Arc<Slot>>>,
    ui_source: crate::portal::UiSourcePref,
    server_warned: std::sync::atomic::AtomicBool,
    /// Where typed secrets' masks are kept across restarts, if anywhere.
    masks: Option<Arc<crate::mask_store::MaskStore>>,
}

impl Registry {
    pub fn new(
        server: Option<SocketAddrV4>,
        direct: &[SocketAddr],
        timeout: Duration,
        key_path: Option<PathBuf>,
        ui_source: crate::portal::UiSourcePref,
        masks: Option<Arc<crate::mask_store::MaskStore>>,
    ) -> Self {
        let reg = Self {
            server,
            timeout,
            key_path,
            slots: RwLock::default(),
            ui_source,
            server_warned: std::sync::atomic::AtomicBool::new(false),
            masks,
        };
        for addr in direct {
            reg.insert_direct(
                *addr,
                SlotInfo {
                    state: "device".into(),
                    ..SlotInfo::default()
                },
            );
        }
        reg
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A device's slot, with nothing known or done on it yet.
    fn slot(&self, adb: AdbDevice, transport: Transport, info: SlotInfo) -> Arc<Slot> {
        let secret_fields = SecretFields::kept(adb.serial(), self.masks.clone());
        Arc::new(Slot {
            adb,
            transport,
            info: Mutex::new(info),
            screen: OnceCell::new(),
            last_ui: Mutex::new(None),
            described: OnceCell::new(),
            secret_fields,
            settle: crate::settle::SettleState::default(),
            ui_source: crate::portal::SourceCell::new(self.ui_source),
            keyboard: crate::typing::KeyboardCell::default(),
            learned: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn insert_direct(&self, addr: SocketAddr, info: SlotInfo) -> Arc<Slot> {
        let serial = addr.to_string();
        let adb = AdbDevice::new(
            serial.clone(),
            Route::Direct(addr),
            self.timeout,
            self.key_path.clone(),
        );
        let slot = self.slot(adb, Transport::TcpDirect, info);
        self.write().insert(serial, slot.clone());
        slot
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Slot>>> {
        self.slots.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Slot>>> {
        self.slots.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-reads the adb server's device list and returns every known device.
    /// An unreachable adb server is an error only when no direct device is configured.
    pub async fn refresh(&self) -> Result<Vec<Arc<Slot>>> {
        if let Some(server) = self.server {
            match host::list_devices(server, self.timeout).await {
                Ok(listed) => self.merge_server_list(server, listed),
                Err(e) => {
                    let has_direct = self
                        .read()
                        .values()
                        .any(|s| s.transport == Transport::TcpDirect);
                    if !has_direct {
                        return Err(e);
                    }
                    // Said once: a mesh of direct devices without an adb server is normal.
                    if !self
                        .server_warned
                        .swap(true, std::sync::atomic::Ordering::Relaxed)
                    {
                        tracing::warn!(error = %e, "adb server unreachable; listing direct devices only");
                    } else {
                        tracing::debug!(error = %e, "adb server unreachable; listing direct devices only");
                    }
                }
            }
        }
        let mut all: Vec<Arc<Slot>> = self.read().values().cloned().collect();
        all.sort_by(|a, b| a.adb.serial().cmp(b.adb.serial()));
        Ok(all)
    }

    fn merge_server_list(&self, server: SocketAddrV4, listed: Vec<host::ServerDevice>) {
        let mut slots = self.write();
        // Devices the server no longer lists are forgotten.
        slots.retain(|serial, s| {
            s.transport != Transport::AdbServer || listed.iter().any(|d| &d.serial == serial)
        });
        for d in listed {
            let info = SlotInfo {
                state: d.state.clone(),
                model: d.model.clone(),
                product: d.product.clone(),
            };
            match slots.get(&d.serial) {
                // A configured direct device keeps its direct route.
                Some(s) if s.transport == Transport::TcpDirect => {}
                Some(s) => *s.info.lock().unwrap_or_else(|p| p.into_inner()) = info,
                None => {
                    let adb =
                        AdbDevice::new(d.serial.clone(), Route::Server(server), self.timeout, None);
                    let slot = self.slot(adb, Transport::AdbServer, info);
                    slots.insert(d.serial, slot);
                }
            }
        }
    }

    /// The device with this serial; asks the adb server again when it is not known yet.
    pub async fn get(&self, serial: &str) -> Result<Arc<Slot>> {
        if serial.trim().is_empty() {
            return Err(DeviceError::InvalidArgument(
                "serial is empty; pass a serial from ListDevices".into(),
            ));
        }
        if let Some(s) = self.read().get(serial) {
            return Ok(s.clone());
        }
        self.refresh().await?;
        self.read()
            .get(serial)
            .cloned()
            .ok_or_else(|| DeviceError::UnknownDevice {
                serial: serial.to_owned(),
            })
    }

    /// Serials of devices in the `device` state (the ones that can be leased).
    pub async fn usable_serials(&self) -> Result<Vec<String>> {
        Ok(self
            .refresh()
            .await?
            .iter()
            .filter(|s| s.is_usable())
            .map(|s| s.adb.serial().to_owned())
            .collect())
    }

    /// Attaches a device listening for ADB over TCP, through the adb server or directly.
    pub async fn connect(&self, address: &str, transport: Transport) -> Result<Arc<Slot>> {
        let addr: SocketAddr = address.trim().parse().map_err(|_| {
            DeviceError::InvalidArgument(format!(
                "address must be ip:port such as 192.168.1.20:5555, got '{address}'"
            ))
        })?;
        match transport {
            Transport::TcpDirect => {
                let slot = self.insert_direct(
                    addr,
                    SlotInfo {
                        state: "device".into(),
                        ..SlotInfo::default()
                    },
                );
                if let Err(e) = slot.describe().await {
                    self.write().remove(&addr.to_string());
                    return Err(e);
                }
                Ok(slot)
            }
            Transport::AdbServer | Transport::Unspecified => {
                let server = self.server.ok_or_else(|| {
                    DeviceError::InvalidArgument(
                        "no adb server is configured (device.adb_server); use TRANSPORT_TCP_DIRECT"
                            .into(),
                    )
                })?;
                host::connect(server, &addr.to_string(), self.timeout).await?;
                let serial = addr.to_string();
                // The server attaches asynchronously: wait until it reports the device.
                let deadline = tokio::time::Instant::now() + self.timeout;
                loop {
                    self.refresh().await?;
                    if let Some(s) = self.read().get(&serial).cloned() {
                        let state = s
                            .info
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .state
                            .clone();
                        if state == "device" {
                            return Ok(s);
                        }
                    }
                    if tokio::time::Instant::now() >= deadline {
                        return Err(DeviceError::Unavailable {
                            serial,
                            detail: "the adb server connected but never reported the device ready"
                                .into(),
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}
