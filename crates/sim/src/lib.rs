//! droidmesh-sim: simulated Android phones that speak the device side of the ADB protocol over
//! TCP, so a real adb server attaches them with `adb connect HOST:PORT` exactly like a phone on
//! TCP debugging. Apps are data ([`apps`]); screens are laid out, dumped as uiautomator XML
//! and drawn as PNG from the same view tree; ground truth is read as on a phone
//! (`settings get global wifi_on`, `cat /sdcard/Notes/note.txt`,
//! `content query --uri content://contacts/phones/`).
mod actions;
pub mod apps;
pub mod clipboard;
pub mod clock;
mod conn;
mod controls;
pub mod device;
mod dirs;
mod expand;
mod forms;
pub mod fs;
pub mod keyboards;
mod layout;
pub mod procs;
pub mod providers;
pub mod query;
pub mod records;
pub mod render;
mod reset;
pub mod shell;
mod sync;
/// A private adb server for tests: built for this crate's tests and with the `testkit` feature
/// only.
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod view;
/// The message format, shared with the device service's direct client.
pub use droidmesh_adb_wire as wire;
mod xml;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use apps::AppSet;
use device::Device;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("app definitions are not usable: {0}")]
    Apps(String),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid options: {0}")]
    Options(String),
}

/// Where and how many simulated devices to run.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub host: IpAddr,
    /// Port of the first device; the others follow it. 0 gives every device an ephemeral port.
    pub base_port: u16,
    pub devices: usize,
    /// A TOML app set to use instead of the embedded one.
    pub apps_file: Option<PathBuf>,
    /// Screens change with the apps' delays (launches, slides, switches, spinners) as on a
    /// phone; off, every change is instant.
    pub realtime: bool,
    /// What one `uiautomator dump` costs; `None`: [`PHONE_DUMP_COST`] in real time, else
    /// nothing.
    pub dump_cost: Option<std::time::Duration>,
    /// The phone has the companion accessibility service (`com.mobilerun.portal`), which
    /// answers the UI tree through its content provider at once and types any text through
    /// its keyboard ([`keyboards`]).
    pub portal: bool,
    /// The phone has ADBKeyBoard (`com.android.adbkeyboard`), which types any text sent to it
    /// by broadcast while it is the selected keyboard.
    pub adb_keyboard: bool,
}

/// What `uiautomator dump` costs on a phone (it waits for the UI to idle and writes a file).
pub const PHONE_DUMP_COST: std::time::Duration = std::time::Duration::from_millis(1000);

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            base_port: 5555,
            devices: 1,
            apps_file: None,
            realtime: false,
            dump_cost: None,
            portal: false,
            adb_keyboard: false,
        }
    }
}

/// Most devices one fleet runs.
pub const MAX_DEVICES: usize = 256;

/// Connections one device serves at once; more are closed as they arrive. A phone's adbd
/// serves one adb server, and each connection may hold its own streams and queues.
pub const MAX_CONNECTIONS: usize = 64;

/// One running simulated device.
#[derive(Debug, Clone)]
pub struct SimDevice {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<Device>>,
    streams: Arc<StreamLog>,
}

/// Services of recent streams kept.
pub const SERVICES_KEPT: usize = 64;

/// The streams hosts opened on a device (every OPEN served: each shell command, exec, sync
/// session), for counting a client's exchanges. Kept apart from the device state, whose lock
/// a running shell may hold for long.
#[derive(Debug, Default)]
pub struct StreamLog {
    opened: std::sync::atomic::AtomicU64,
    /// The services of the last [`SERVICES_KEPT`] streams, oldest first.
    recent: Mutex<std::collections::VecDeque<String>>,
}

impl StreamLog {
    fn record(&self, service: &str) {
        self.opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() >= SERVICES_KEPT {
            recent.pop_front();
        }
        // A service line can be long (a script); what is kept of it is bounded.
        recent.push_back(service.chars().take(200).collect());
    }
}

impl SimDevice {
    /// Runs a shell command on the device directly (no ADB), as `adb shell` would.
    pub fn shell(&self, command: &str) -> shell::Output {
        shell::run(&self.state, command)
    }

    /// Streams hosts have opened on the device so far (each a round trip at least: one
    /// command, one sync session), and the services of the most recent ones.
    pub fn streams_opened(&self) -> (u64, Vec<String>) {
        let recent = self
            .streams
            .recent
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        (
            self.streams
                .opened
                .load(std::sync::atomic::Ordering::Relaxed),
            recent.iter().cloned().collect(),
        )
    }
}

/// Running devices; dropping it (or [`SimFleet::shutdown`]) stops them and closes their
/// connections.
#[derive(Debug)]
pub struct SimFleet {
    devices: Vec<SimDevice>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl SimFleet {
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.devices.iter().map(|d| d.addr).collect()
    }

    pub fn devices(&self) -> &[SimDevice] {
        &self.devices
    }

    /// Stops every device and waits for its listener to close.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            t.abort();
            let _ = t.await;
        }
    }
}

impl Drop for SimFleet {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The banner a device sends in its CNXN: `adb devices -l` shows these fields.
fn banner() -> Arc<str> {
    Arc::from(
        "device::ro.product.name=droidmesh_sim;ro.product.model=DroidMesh_Sim;ro.product.device=sim;features=shell_v2,cmd,stat_v2",
    )
}

/// Starts the devices and returns once all of them listen.
pub async fn start(opts: SimOptions) -> Result<SimFleet, SimError> {
    if opts.devices == 0 || opts.devices > MAX_DEVICES {
        return Err(SimError::Options(format!(
            "devices must be 1..={MAX_DEVICES}, got {}",
            opts.devices
        )));
    }
    let apps = match &opts.apps_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| SimError::Read {
                path: path.clone(),
                source,
            })?;
            AppSet::from_toml(&text)?
        }
        None => AppSet::default_set()?,
    };
    let apps = Arc::new(apps);
    let (stop, _) = watch::channel(false);
    let mut fleet = SimFleet {
        devices: Vec::new(),
        stop,
        tasks: Vec::new(),
    };
    for i in 0..opts.devices {
        let port = if opts.base_port == 0 {
            0
        } else {
            u16::try_from(usize::from(opts.base_port) + i).map_err(|_| {
                SimError::Options(format!("port {} + {i} is past 65535", opts.base_port))
            })?
        };
        let addr = SocketAddr::new(opts.host, port);
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| SimError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| SimError::Bind { addr, source })?;
        let serial = format!("droidmesh-sim-{}", addr.port());
        let mut device = Device::new(apps.clone(), &serial);
        device.realtime = opts.realtime;
        device.set_portal(opts.portal);
        device.set_adb_keyboard(opts.adb_keyboard);
        device.dump_cost = opts.dump_cost.unwrap_or(if opts.realtime {
            PHONE_DUMP_COST
        } else {
            std::time::Duration::ZERO
        });
        let state = Arc::new(Mutex::new(device));
        let streams = Arc::new(StreamLog::default());
        let task = tokio::spawn(accept_loop(
            listener,
            state.clone(),
            streams.clone(),
            fleet.stop.subscribe(),
        ));
        fleet.devices.push(SimDevice {
            addr,
            state,
            streams,
        });
        fleet.tasks.push(task);
    }
    Ok(fleet)
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<Mutex<Device>>,
    streams: Arc<StreamLog>,
    mut stop: watch::Receiver<bool>,
) {
    let banner = banner();
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    conns.retain(|c| !c.is_finished());
                    if conns.len() >= MAX_CONNECTIONS {
                        tracing::warn!(%peer, "refused a connection: {MAX_CONNECTIONS} are open on this device");
                        continue;
                    }
                    conns.push(tokio::spawn(conn::serve(stream, state.clone(), streams.clone(), banner.clone(), stop.clone())));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = stop.changed() => break,
        }
    }
    for c in conns {
        c.abort();
    }
}

/// Runs devices until SIGINT or SIGTERM, printing how to attach them.
pub async fn run_until_signal(opts: SimOptions) -> Result<(), SimError> {
    let fleet = start(opts).await?;
    for d in fleet.devices() {
        println!(
            "droidmesh-sim: device listening on {0} (attach it with: adb connect {0})",
            d.addr
        );
    }
    wait_for_signal().await;
    println!("droidmesh-sim: stopping");
    fleet.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        match term {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
