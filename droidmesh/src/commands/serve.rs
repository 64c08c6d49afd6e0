//! `droidmesh serve <service>` (one service, as each Kubernetes Deployment runs) and `droidmesh
//! up` (every service in this process, with simulated devices).
use anyhow::Result;
use droidmesh_runtime::TelemetryOptions;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::admin;
use crate::mesh::{self, Mesh, Service};
use crate::output::say;
use crate::run;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    service: Service,
    /// Listen address (host:port); defaults to the config's [listen] section.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Admin address (host:port) serving GET /metrics; defaults to the config's
    /// `[listen] admin` (9464; 0 serves none).
    #[arg(long)]
    admin: Option<SocketAddr>,
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Simulated devices to start and attach (0: only the configured devices).
    #[arg(long, default_value_t = 2)]
    sims: usize,
    /// Admin address (host:port) serving GET /metrics for the whole process; defaults to
    /// the config's `[listen] admin`.
    #[arg(long)]
    admin: Option<SocketAddr>,
}

/// Serves one service until a signal, then drains it (and the gateway's HTTP face with it).
pub async fn serve(config: Option<PathBuf>, args: ServeArgs) -> Result<()> {
    let ServeArgs {
        service,
        listen,
        admin,
    } = args;
    let mut config = super::load(config)?;
    if service == Service::Device
        && let Some(note) = config.keep_masks_by_default()
    {
        say!("{note}");
    }
    let admin_addr = admin.or_else(|| config.listen.admin_addr());
    let mut telemetry_opts = TelemetryOptions::new(&format!("droidmesh-{}", service.name()));
    telemetry_opts.json = config.telemetry.json;
    telemetry_opts.metrics = admin_addr.is_some();
    let telemetry = droidmesh_runtime::init_telemetry(&telemetry_opts)?;
    let addr = listen.unwrap_or_else(|| config.listen.addr(service.port(&config)));
    if service == Service::Gateway {
        mesh::check_open(&config, addr.ip())?;
    }
    mesh::check_descriptors(&config, &[service])?;
    // Every port first: one in use stops the process before it makes any file (the task
    // store, the device service's state directory).
    let listener = super::bind_service(service, addr).await?;
    let http_listener = match service {
        Service::Gateway => mesh::HttpFace::bind(&config).await?,
        _ => None,
    };
    let admin = admin::start(admin_addr, &telemetry).await?;
    let (routes, opts, gateway) = mesh::routes(service, &config)?;
    // The gateway's HTTP face stops with its gRPC port: at the signal, or when the
    // server ends (the sender goes with the signal's future).
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let http = match gateway {
        Some(g) => {
            if !g.keys_required() {
                say!("{}", mesh::OPEN_NOTE);
            }
            match http_listener {
                Some(l) => Some(mesh::HttpFace::serve(l, &config, g, stopped)?),
                None => None,
            }
        }
        None => None,
    };
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
    Ok(())
}

/// Runs the whole mesh in this process, says where each part listens, and stops it all at a
/// signal.
pub async fn up(config: Option<PathBuf>, args: UpArgs) -> Result<()> {
    let UpArgs { sims, admin } = args;
    let mut config = super::load(config)?;
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
    Ok(())
}
