//! One function per `droidmesh` command, each taking its parsed arguments; `main` only parses
//! and dispatches. The config is loaded (and validated) here before any port is bound.
mod credentials;
mod devices;
mod serve;

pub use credentials::{KeyArgs, TlsDevCertsArgs, keys_new, tls_dev_certs};
pub use devices::{DevicesArgs, StateArgs, devices, state};
pub use serve::{ServeArgs, UpArgs, serve, up};

use anyhow::{Context, Result};
use droidmesh_runtime::{ConfigSource, TelemetryOptions};
use std::net::IpAddr;
use std::path::PathBuf;

use crate::config::Config;
use crate::{eval, run};

/// Loads the config and makes its `[tls]` the TLS of every client this process makes.
fn load(path: Option<PathBuf>) -> Result<Config> {
    // A config's problems say what they are about on their own (each key and its source).
    let config = Config::load(&ConfigSource::from_process(path))?;
    if config.tls != droidmesh_runtime::tls::TlsConfig::default() {
        droidmesh_runtime::tls::ClientTls::from_config(&config.tls)
            .context("config is not usable")?
            .install();
    }
    Ok(config)
}

/// Binds a service's port; a port in use is said with the key that moves it.
pub(crate) async fn bind_service(
    service: crate::mesh::Service,
    addr: std::net::SocketAddr,
) -> Result<tokio::net::TcpListener> {
    droidmesh_runtime::server::bind(addr)
        .await
        .map_err(|e| match e {
            droidmesh_runtime::RuntimeError::Bind { addr, source }
                if source.kind() == std::io::ErrorKind::AddrInUse =>
            {
                anyhow::anyhow!(
                    "cannot bind {addr} for the {}: the port is in use; stop what holds it, or \
                 choose another port with `[listen] {}` (or `serve --listen`)",
                    service.name(),
                    service.spec().endpoint_key.trim_start_matches("endpoints.")
                )
            }
            other => anyhow::Error::new(other),
        })
}

#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Port of the first device; more devices take the following ports.
    #[arg(long, default_value_t = 5555)]
    port: u16,
    #[arg(long, default_value_t = 1)]
    devices: usize,
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Change screens with the apps' delays, as a phone does (starting windows, screens
    /// sliding in, switches landing late, spinners); without it every change is instant.
    #[arg(long)]
    realtime: bool,
    /// What one `uiautomator dump` costs, in ms (default: 1000 with --realtime, else 0).
    #[arg(long)]
    dump_ms: Option<u64>,
    /// Give the phones the companion app (`com.mobilerun.portal`): its accessibility
    /// service answers the UI tree through `content query` at once, and its keyboard types
    /// any text (`content insert --uri content://com.mobilerun.portal/keyboard/input`).
    #[arg(long)]
    portal: bool,
    /// Give the phones ADBKeyBoard (`com.android.adbkeyboard/.AdbIME`), which types any text
    /// sent by `am broadcast -a ADB_INPUT_B64` while it is the selected keyboard.
    #[arg(long)]
    adb_keyboard: bool,
    /// A TOML app set to use instead of the built-in one (the format of
    /// `crates/sim/apps/default.toml`).
    #[arg(long, value_name = "FILE")]
    apps: Option<PathBuf>,
}

/// `droidmesh sim`: simulated devices until a signal.
pub async fn sim(args: SimArgs) -> Result<()> {
    let opts = droidmesh_sim::SimOptions {
        host: args.host,
        base_port: args.port,
        devices: args.devices,
        realtime: args.realtime,
        dump_cost: args.dump_ms.map(std::time::Duration::from_millis),
        portal: args.portal,
        adb_keyboard: args.adb_keyboard,
        apps_file: args.apps,
    };
    droidmesh_sim::run_until_signal(opts)
        .await
        .context("simulator failed")
}

/// `droidmesh eval`: the task suite; a run in which a task could not be set up or checked
/// exits 1 (a task the agent failed is a finding, not an error).
pub async fn eval(config: Option<PathBuf>, args: eval::EvalArgs) -> Result<()> {
    let config = load(config)?;
    let mut telemetry_opts = TelemetryOptions::new("droidmesh-eval");
    telemetry_opts.default_filter = "warn".into();
    telemetry_opts.metrics = false;
    let _telemetry = droidmesh_runtime::init_telemetry(&telemetry_opts)?;
    if !eval::eval(args, config).await? {
        std::process::exit(1);
    }
    Ok(())
}

/// `droidmesh run`: one task with live progress; a task that did not complete exits 1.
pub async fn run(config: Option<PathBuf>, args: run::RunArgs) -> Result<()> {
    let config = load(config)?;
    let mut telemetry_opts = TelemetryOptions::new("droidmesh-run");
    telemetry_opts.default_filter = "warn".into();
    telemetry_opts.metrics = false;
    let _telemetry = droidmesh_runtime::init_telemetry(&telemetry_opts)?;
    if !run::run(args, config).await? {
        std::process::exit(1);
    }
    Ok(())
}
