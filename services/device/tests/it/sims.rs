//! The shared fleet: one adb server with simulators attached, kept alive on a background
//! runtime for the whole test binary. Each test gets its own device from it.
#![allow(dead_code)]
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::OnceLock;

use droidmesh_device::DeviceConfig;
use droidmesh_sim::testkit::{AdbServer, require_adb};
use droidmesh_sim::{SimFleet, SimOptions};

/// Devices of the shared fleet, each given to one test so tests do not disturb each other.
pub const DEV_SETTINGS: usize = 0;
pub const DEV_NOTES: usize = 1;
pub const DEV_CONTACTS: usize = 2;
pub const DEV_LEASES: usize = 3;
pub const DEV_ERRORS: usize = 4;
pub const FLEET_SIZE: usize = 5;

pub struct Shared {
    pub adb: AdbServer,
    pub serials: Vec<String>,
}

static SHARED: OnceLock<Option<Shared>> = OnceLock::new();

/// The shared adb server and fleet; without adb the tests fail, or are skipped visibly
/// (`None`) when DROIDMESH_SKIP_ADB_TESTS=1.
pub fn shared() -> Option<&'static Shared> {
    SHARED
        .get_or_init(|| {
            if !require_adb("device service integration tests") {
                return None;
            }
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Runtime::new().unwrap();
                rt.block_on(async move {
                    let fleet = start_fleet(FLEET_SIZE).await;
                    tx.send(fleet.addrs()).unwrap();
                    // Keep the fleet serving until the test process exits.
                    std::future::pending::<()>().await;
                    drop(fleet);
                });
            });
            let addrs: Vec<SocketAddr> = rx.recv().unwrap();
            let adb = AdbServer::start().unwrap();
            let serials = addrs.iter().map(|a| adb.connect(*a).unwrap()).collect();
            Some(Shared { adb, serials })
        })
        .as_ref()
}

pub async fn start_fleet(devices: usize) -> SimFleet {
    droidmesh_sim::start(SimOptions {
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        base_port: 0,
        devices,
        ..SimOptions::default()
    })
    .await
    .unwrap()
}

/// Service configuration pointing at the shared adb server.
pub fn config(shared: &Shared) -> DeviceConfig {
    DeviceConfig {
        adb_server: format!("127.0.0.1:{}", shared.adb.port),
        command_timeout_ms: 3_000,
        ..DeviceConfig::default()
    }
}
