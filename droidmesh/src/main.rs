//! The droidmesh binary: `sim`, `serve <service>`, `devices` (and, as they land, `up` and
//! `run`). Config is parsed and validated before any port is bound.
mod admin;
mod config;
mod mesh;
mod model_flags;
mod output;
mod run;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use config::Config;
use droidmesh_proto::v1::ListDevicesRequest;
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_runtime::{ClientOptions, ConfigSource, TelemetryOptions};
use mesh::{Mesh, Service};
use output::say;
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "droidmesh",
    version,
    about = "LLM agents that operate Android phones, as gRPC microservices"
)]
struct Cli {
    /// Config file (TOML). DROIDMESH_SECTION__KEY environment variables override it.
    #[arg(long, global = true, env = "DROIDMESH_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run simulated Android devices that speak ADB over TCP (attach with `adb connect`).
    Sim {
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
        /// Give the phones the companion accessibility service (`com.mobilerun.portal`),
        /// which answers the UI tree through `content query` at once.
        #[arg(long)]
        portal: bool,
        /// A TOML app set to use instead of the built-in one (the format of
        /// `crates/sim/apps/default.toml`).
        #[arg(long, value_name = "FILE")]
        apps: Option<std::path::PathBuf>,
    },
    /// Run a task and show its progress (starts the mesh in-process unless --gateway is given).
    Run(Box<run::RunArgs>),
    /// Run every service in this process, each on its own port, with simulated devices.
    Up {
        /// Simulated devices to start and attach (0: only the configured devices).
        #[arg(long, default_value_t = 2)]
        sims: usize,
        /// Admin address (host:port) serving GET /metrics for the whole process; defaults to
        /// the config's `[listen] admin`.
        #[arg(long)]
        admin: Option<std::net::SocketAddr>,
    },
    /// Serve one service (as each Kubernetes Deployment does).
    Serve {
        service: Service,
        /// Listen address (host:port); defaults to the config's [listen] section.
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        /// Admin address (host:port) serving GET /metrics; defaults to the config's
        /// `[listen] admin` (9464; 0 serves none).
        #[arg(long)]
        admin: Option<std::net::SocketAddr>,
    },
    /// Print a device's screen as the agents see it: indexed elements and phone state.
    State {
        serial: String,
        /// Device service endpoint; defaults to the config's [endpoints] section.
        #[arg(long)]
        endpoint: Option<String>,
    },
    /// List the devices the device service sees, with their leases.
    Devices {
        /// Device service endpoint; defaults to the config's [endpoints] section.
        #[arg(long)]
        endpoint: Option<String>,
    },
    /// API keys for the gateway (`gateway.auth.keys_file`).
    Keys {
        #[command(subcommand)]
        action: KeysAction,
    },
    /// Certificates for the `[tls]` section.
    Tls {
        #[command(subcommand)]
        action: TlsAction,
    },
}

#[derive(Debug, Subcommand)]
enum TlsAction {
    /// Write a private CA (`ca.crt`, `ca.key`; the folder's own if it has one) and a
    /// certificate it signs (`NAME.crt`, `NAME.key`), good for servers and clients, to try TLS
    /// and mutual TLS on one machine. Not for production: the keys are not encrypted.
    DevCerts {
        /// The folder to write to.
        dir: PathBuf,
        /// A DNS name or address the certificate is good for (repeat for several); none:
        /// localhost, 127.0.0.1 and ::1.
        #[arg(long = "host", value_name = "NAME")]
        hosts: Vec<String>,
        /// The certificate's file name, without extension.
        #[arg(long, default_value = "tls")]
        name: String,
        /// Days the certificates are valid.
        #[arg(long, default_value_t = 365)]
        days: u32,
    },
}

#[derive(Debug, Subcommand)]
enum KeysAction {
    /// Print a fresh random key once, and the entry to add to the keys file (its hash only).
    New {
        /// The tenant the key acts for: it sees and controls only that tenant's tasks.
        #[arg(long)]
        tenant: String,
        /// A device the key may use (repeat for several); none: every device.
        #[arg(long = "device", value_name = "SERIAL")]
        devices: Vec<String>,
        /// A secret id the key's tasks may name in `secret_ids` (repeat for several; ids are
        /// case-insensitive); none: no secret.
        #[arg(long = "secret", value_name = "ID")]
        secrets: Vec<String>,
        /// Refuse the key after this long (e.g. `90days`); none: it does not expire.
        #[arg(long)]
        expires_in: Option<humantime::Duration>,
    },
}

/// Loads the config and makes its `[tls]` the TLS of every client this process makes.
fn load(path: Option<PathBuf>) -> Result<Config> {
    let mut config = droidmesh_runtime::load_config::<Config>(&ConfigSource::from_process(path))
        .context("config is not usable")?;
    if config.tls.serves() {
        config.endpoints.upgrade_defaults_to_https();
    }
    if config.tls != droidmesh_runtime::tls::TlsConfig::default() {
        droidmesh_runtime::tls::ClientTls::from_config(&config.tls)
            .context("config is not usable")?
            .install();
    }
    Ok(config)
}

#[tokio::main]
async fn main() {
    // An error is a message with its causes, not a stack trace (whatever RUST_BACKTRACE says);
    // the exit code is 1, as for a task that failed.
    if let Err(e) = real_main(Cli::parse()).await {
        let _ = writeln!(std::io::stderr(), "error: {e:#}");
        std::process::exit(1);
    }
}

async fn real_main(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Sim {
            port,
            devices,
            host,
            realtime,
            dump_ms,
            portal,
            apps,
        } => {
            let opts = droidmesh_sim::SimOptions {
                host,
                base_port: port,
                devices,
                realtime,
                dump_cost: dump_ms.map(std::time::Duration::from_millis),
                portal,
                apps_file: apps,
            };
            droidmesh_sim::run_until_signal(opts)
                .await
                .context("simulator failed")?;
        }
        Command::Serve {
            service,
            listen,
            admin,
        } => {
            let mut config = load(cli.config)?;
            if service == Service::Device
                && let Some(note) = config.keep_masks_by_default()
            {
                say!("{note}");
            }
            let admin_addr = admin.or_else(|| config.listen.admin_addr());
            let mut telemetry_opts =
                TelemetryOptions::new(&format!("droidmesh-{}", service.name()));
            telemetry_opts.json = config.telemetry.json;
            telemetry_opts.metrics = admin_addr.is_some();
            let telemetry = droidmesh_runtime::init_telemetry(&telemetry_opts)?;
            let addr = listen.unwrap_or_else(|| config.listen.addr(service.port(&config)));
            if service == Service::Gateway {
                mesh::check_open(&config, addr.ip())?;
            }
            let (routes, opts, gateway) = mesh::routes(service, &config)?;
            mesh::check_descriptors(&config, &[service])?;
            let listener = droidmesh_runtime::server::bind(addr).await?;
            // The gateway's HTTP face stops with its gRPC port: at the signal, or when the
            // server ends (the sender goes with the signal's future).
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let http = match gateway {
                Some(g) => {
                    if !g.keys_required() {
                        say!("{}", mesh::OPEN_NOTE);
                    }
                    mesh::HttpFace::start(&config, g, stopped).await?
                }
                None => None,
            };
            let admin = admin::start(admin_addr, &telemetry).await?;
            let signal = async move {
                droidmesh_runtime::shutdown_signal().await;
                let _ = stop.send(true);
            };
            droidmesh_runtime::serve(listener, routes, opts, signal).await?;
            if let Some(h) = http {
                h.join().await?;
            }
            if let Some(a) = admin {
                a.stop().await?;
            }
        }
        Command::Run(args) => {
            let config = load(cli.config)?;
            let mut telemetry_opts = TelemetryOptions::new("droidmesh-run");
            telemetry_opts.default_filter = "warn".into();
            telemetry_opts.metrics = false;
            let _telemetry = droidmesh_runtime::init_telemetry(&telemetry_opts)?;
            if !run::run(*args, config).await? {
                std::process::exit(1);
            }
        }
        Command::Up { sims, admin } => {
            let mut config = load(cli.config)?;
            if let Some(note) = config.keep_masks_by_default() {
                say!("{note}");
            }
            let admin_addr = admin.or_else(|| config.listen.admin_addr());
            let mut telemetry_opts = TelemetryOptions::new("droidmesh-up");
            telemetry_opts.metrics = admin_addr.is_some();
            let telemetry = droidmesh_runtime::init_telemetry(&telemetry_opts)?;
            let no_model = config.llm.is_none() && !run::api_key_in_env();
            let admin = admin::start(admin_addr, &telemetry).await?;
            let mesh = Mesh::start(config, sims).await?;
            if no_model {
                say!(
                    "note: no model is configured (no [llm] section, no OPENAI_API_KEY): tasks will fail at their first step.\n      \
                     Configure one, or try `droidmesh run` without --gateway, which replays a recorded demo."
                );
            }
            for (service, addr) in &mesh.addrs {
                say!("{:<16} {}://{addr}", service.name(), mesh.scheme);
            }
            if let Some(h) = &mesh.http {
                say!(
                    "{:<16} {}://{} (HTTP/JSON and SSE; /openapi.json)",
                    "gateway-http",
                    mesh.scheme,
                    h.addr
                );
            }
            if let Some(fleet) = &mesh.sims {
                for a in fleet.addrs() {
                    say!(
                        "{:<16} {a} (simulated; `adb connect {a}` to look at it)",
                        "device"
                    );
                }
            }
            if let Some(a) = &admin {
                say!("{:<16} http://{}/metrics", "metrics", a.addr);
            }
            if mesh.gateway_open {
                say!("{}", mesh::OPEN_NOTE);
            }
            say!("ready; Ctrl-C stops everything");
            droidmesh_runtime::shutdown_signal().await;
            mesh.shutdown().await?;
            if let Some(a) = admin {
                a.stop().await?;
            }
        }
        Command::State { serial, endpoint } => {
            let config = load(cli.config)?;
            let mut client = device_client(endpoint.unwrap_or(config.endpoints.device))?;
            let state = client
                .get_state(droidmesh_proto::v1::GetStateRequest {
                    serial: serial.clone(),
                    include_screenshot: false,
                    screenshot_max_side: 0,
                    masks: Vec::new(),
                })
                .await
                .map_err(call_failed)
                .with_context(|| format!("cannot read the state of {serial}"))?
                .into_inner();
            print_state(&state);
        }
        Command::Keys {
            action:
                KeysAction::New {
                    tenant,
                    devices,
                    secrets,
                    expires_in,
                },
        } => {
            let expires_unix = match expires_in {
                None => None,
                Some(d) => Some(
                    std::time::SystemTime::now()
                        .checked_add(*d)
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .context("--expires-in is too far in the future")?
                        .as_secs(),
                ),
            };
            let key = droidmesh_gateway::auth::new_key();
            let entry =
                droidmesh_gateway::auth::key_entry(&key, &tenant, &devices, &secrets, expires_unix)
                    .map_err(|e| anyhow::anyhow!("cannot make a key: {e}"))?;
            say!("key (shown once; give it to the client, it is not stored anywhere):\n  {key}\n");
            say!(
                "add to the keys file (gateway.auth.keys_file); it holds only the key's hash:\n\n{entry}"
            );
            say!("clients send it as the header `authorization: Bearer <key>`");
        }
        Command::Tls {
            action:
                TlsAction::DevCerts {
                    dir,
                    hosts,
                    name,
                    days,
                },
        } => {
            let hosts = if hosts.is_empty() {
                droidmesh_runtime::tls::dev::local_names()
            } else {
                hosts
            };
            let files = droidmesh_runtime::tls::dev::write_dev_certs(&dir, &name, &hosts, days)
                .context("cannot write the certificates")?;
            if files.new_ca {
                say!(
                    "wrote a new CA: {} (its key {}: keep it private)",
                    files.ca.display(),
                    files.ca_key.display()
                );
            } else {
                say!("signed with the CA in {}", files.ca.display());
            }
            say!(
                "wrote {} and {} for {}, valid {days} days\n\n[tls]\ncert = {:?}\nkey = {:?}\nca = {:?}\nmutual = true",
                files.cert.display(),
                files.key.display(),
                hosts.join(", "),
                files.cert.display().to_string(),
                files.key.display().to_string(),
                files.ca.display().to_string()
            );
        }
        Command::Devices { endpoint } => {
            let config = load(cli.config)?;
            let endpoint = endpoint.unwrap_or(config.endpoints.device);
            let mut client = device_client(endpoint.clone())?;
            let devices = client
                .list_devices(ListDevicesRequest {})
                .await
                .map_err(call_failed)
                .with_context(|| format!("cannot list devices at {endpoint}"))?
                .into_inner()
                .devices;
            if devices.is_empty() {
                say!("no devices");
            }
            for d in devices {
                let lease = d
                    .lease
                    .map(|l| format!("  leased by {}", l.holder))
                    .unwrap_or_default();
                say!(
                    "{:<24} {:<10} {:<16} {}{}",
                    d.serial,
                    d.state,
                    d.model,
                    d.product,
                    lease
                );
            }
        }
    }
    Ok(())
}

/// A failed call as the user reads it: the service's answer, or a failed connection in words
/// (with the transport's own detail after them).
fn call_failed(status: tonic::Status) -> anyhow::Error {
    match droidmesh_runtime::peer::transport_failure(&status) {
        Some(transport) => anyhow::anyhow!(
            "the service {} ({})",
            transport.words(),
            droidmesh_runtime::peer::detail(&status)
        ),
        None => anyhow::anyhow!("{status}"),
    }
}

fn device_client(
    endpoint: String,
) -> Result<DeviceServiceClient<droidmesh_runtime::TracedChannel>> {
    let opts = ClientOptions {
        request_timeout: Some(Duration::from_secs(15)),
        ..ClientOptions::default()
    };
    Ok(DeviceServiceClient::new(droidmesh_runtime::connect(
        &endpoint, &opts,
    )?))
}

fn print_state(state: &droidmesh_proto::v1::UiState) {
    if let Some(p) = &state.phone {
        say!(
            "{}  app {}  activity {}  keyboard {}",
            state.serial,
            p.package,
            p.activity,
            if p.keyboard_shown { "shown" } else { "hidden" }
        );
    }
    for e in &state.elements {
        let class = e.class_name.rsplit('.').next().unwrap_or(&e.class_name);
        let label = if e.text.is_empty() {
            &e.content_desc
        } else {
            &e.text
        };
        let b = e.bounds.unwrap_or_default();
        let mut flags = Vec::new();
        for (on, name) in [
            (e.clickable, "clickable"),
            (e.checkable && e.checked, "checked"),
            (e.editable, "editable"),
            (e.focused, "focused"),
            (e.scrollable, "scrollable"),
        ] {
            if on {
                flags.push(name);
            }
        }
        say!(
            "{:>3}  {:<14} {:<36} [{},{}][{},{}] {}",
            e.index,
            class,
            format!("{label:?}"),
            b.left,
            b.top,
            b.right,
            b.bottom,
            flags.join(" ")
        );
    }
}
