//! The services of one process: `serve <service>` runs one; `up` runs all of them, each on its
//! own port and talking gRPC exactly as when distributed, with simulated devices when asked.
use anyhow::{Context, Result};
use droidmesh_runtime::ServeOptions;
use droidmesh_runtime::tls::{ClientAuth, ServerTls};
use std::net::SocketAddr;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
pub use crate::services::Service;

/// The LLM client of the agent services: the configured providers, or the built-in defaults.
/// `held`: the secrets the service holds besides its environment's (the executor's files).
fn llm_client(
    config: &Config,
    held: Option<&droidmesh_executor::Secrets>,
) -> Result<droidmesh_llm::LlmClient> {
    droidmesh_llm::install_crypto_provider();
    let llm = config
        .llm
        .clone()
        .unwrap_or_else(droidmesh_llm::LlmConfig::defaults);
    // The secrets' values are redacted from captured content in every service, not only the
    // executor that types them; the executor's, read again as its files change, at each capture.
    let secrets = droidmesh_executor::secrets_from_env().into_values();
    let mut capture = droidmesh_llm::ContentCapture::new(config.telemetry.capture_content, secrets);
    if let Some(held) = held.cloned() {
        capture = capture.with_secret_source(std::sync::Arc::new(move || held.values()));
    }
    Ok(droidmesh_llm::LlmClient::from_config(&llm)
        .context("llm config is not usable")?
        .with_content_capture(capture))
}

/// What `up` and `serve gateway` say when the gateway has no keys.
pub const OPEN_NOTE: &str = "note: the gateway has no API keys (gateway.auth.keys_file is not set): it is open to anyone on this machine";

/// Refuses to serve a gateway without API keys beyond loopback (on `host`, its gRPC address,
/// or on `[listen] host`, its HTTP face's), unless `gateway.auth.open` says to.
pub fn check_open(config: &Config, host: std::net::IpAddr) -> Result<()> {
    let auth = &config.gateway.auth;
    if auth.keys_file.is_some() || auth.open {
        return Ok(());
    }
    let http = config.listen.gateway_http_addr().map(|a| a.ip());
    if let Some(beyond) = [Some(host), http]
        .into_iter()
        .flatten()
        .find(|ip| !ip.is_loopback())
    {
        anyhow::bail!(
            "the gateway would listen on {beyond}, beyond loopback, with no API keys: anyone who \
             reaches it could run tasks on every device. Set gateway.auth.keys_file (make keys \
             with `droidmesh keys new --tenant NAME`), or set gateway.auth.open = true to serve \
             without keys anyway"
        );
    }
    Ok(())
}

/// The gateway itself, when the service built is the gateway: its HTTP face serves it too.
pub type SharedGateway = Option<std::sync::Arc<droidmesh_gateway::GatewayService>>;

/// Builds a service's routes from the config (nothing is bound yet), with its drain: agents
/// get `listen.agent_drain_secs` to finish their runs, the others `listen.drain_secs`.
pub fn routes(
    service: Service,
    config: &Config,
) -> Result<(tonic::service::Routes, ServeOptions, SharedGateway)> {
    let (routes, mut opts, gateway) = bare_routes(service, config)?;
    let (drain, capacity) = match service {
        Service::Gateway | Service::Device => (config.listen.drain_secs, 0),
        _ => (
            config.listen.agent_drain_secs,
            config.listen.agent_max_in_flight,
        ),
    };
    opts.load = std::sync::Arc::new(droidmesh_runtime::LoadState::with_capacity(capacity));
    opts.tls = ServerTls::grpc(&config.tls, client_auth(service, config))
        .context("cannot serve TLS (config [tls])")?;
    opts.drain_timeout = std::time::Duration::from_secs(drain);
    opts.drain_notice = std::time::Duration::from_millis(config.listen.drain_notice_ms);
    opts.connections = config.grpc.clone();
    Ok((routes, opts, gateway))
}

/// Makes sure this process may hold every connection its ports allow (`services`' gRPC ports,
/// and the gateway's HTTP face when it serves one): raises the open-file limit as far as the
/// hard limit allows, else says which settings to lower.
pub fn check_descriptors(config: &Config, services: &[Service]) -> Result<()> {
    let grpc = config.grpc.descriptors() * services.len();
    let http = if services.contains(&Service::Gateway) && config.listen.gateway_http != 0 {
        config.gateway_http.descriptors()
    } else {
        0
    };
    let keys = if http > 0 {
        "grpc.max_connections and gateway_http.max_connections"
    } else {
        "grpc.max_connections"
    };
    let ports = u64::try_from(grpc + http).unwrap_or(u64::MAX);
    droidmesh_runtime::server::ensure_descriptors(ports, keys).map_err(anyhow::Error::msg)?;
    Ok(())
}

/// Whether a service's ports ask callers for a certificate: the device service and the agents
/// with `tls.mutual`; the gateway's public ports check one a caller offers (with a CA to
/// check it against) and ask for one only with `tls.gateway_client_certs`.
pub fn client_auth(service: Service, config: &Config) -> ClientAuth {
    let tls = &config.tls;
    match service {
        Service::Gateway if tls.gateway_client_certs => ClientAuth::Required,
        Service::Gateway if tls.ca.is_some() => ClientAuth::Optional,
        Service::Gateway => ClientAuth::None,
        _ if tls.mutual => ClientAuth::Required,
        _ => ClientAuth::None,
    }
}

/// `https` when the config serves TLS, else `http`.
pub fn scheme(config: &Config) -> &'static str {
    if config.tls.serves() { "https" } else { "http" }
}

fn bare_routes(
    service: Service,
    config: &Config,
) -> Result<(tonic::service::Routes, ServeOptions, SharedGateway)> {
    if service == Service::Gateway {
        let peers = droidmesh_gateway::Peers {
            device: config.endpoints.device.clone(),
            executor: config.endpoints.executor.clone(),
            manager: config.endpoints.manager.clone(),
            scripter: config.endpoints.scripter.clone(),
            text_manipulator: config.endpoints.text_manipulator.clone(),
        };
        // One gateway for both faces: gRPC here, HTTP by whoever serves it.
        // The composition root opens the task store; the gateway keeps tasks in it.
        let store = droidmesh_gateway::open_store(&config.gateway)
            .map_err(|e| anyhow::anyhow!("gateway cannot start: {e}"))?;
        let gateway = droidmesh_gateway::gateway(config.gateway.clone(), &peers, store)
            .map_err(|e| anyhow::anyhow!("gateway cannot start: {e}"))?;
        let svc = droidmesh_proto::v1::gateway_server::GatewayServer::from_arc(gateway.clone());
        return Ok((
            tonic::service::Routes::new(svc),
            ServeOptions::new(service.name(), service.grpc()),
            Some(gateway),
        ));
    }
    let routes = match service {
        Service::Device => {
            let svc = droidmesh_device::device_service(config.device.clone())
                .context("device service cannot start")?;
            tonic::service::Routes::new(svc)
        }
        Service::Executor => {
            let secrets = droidmesh_executor::Secrets::load(&config.secrets)
                .map_err(|e| anyhow::anyhow!("executor cannot start: {e}"))?;
            let svc = droidmesh_executor::executor_service(
                config.executor.clone(),
                llm_client(config, Some(&secrets))?,
                config.endpoints.device.clone(),
                secrets,
            )
            .map_err(|e| anyhow::anyhow!("executor cannot start: {e}"))?;
            tonic::service::Routes::new(svc)
        }
        Service::Manager => {
            let mut cfg = config.manager.clone();
            // One prompts folder serves every agent unless the manager names its own.
            if cfg.prompts_dir.is_none() {
                cfg.prompts_dir.clone_from(&config.executor.prompts_dir);
            }
            let svc = droidmesh_manager::manager_service(
                cfg,
                llm_client(config, None)?,
                config.endpoints.device.clone(),
            )
            .map_err(|e| anyhow::anyhow!("manager cannot start: {e}"))?;
            tonic::service::Routes::new(svc)
        }
        Service::Scripter => {
            let mut cfg = config.scripter.clone();
            if cfg.prompts_dir.is_none() {
                cfg.prompts_dir.clone_from(&config.executor.prompts_dir);
            }
            let svc = droidmesh_scripter::scripter_service(cfg, llm_client(config, None)?)
                .map_err(|e| anyhow::anyhow!("scripter cannot start: {e}"))?;
            tonic::service::Routes::new(svc)
        }
        Service::TextManipulator => {
            let mut cfg = config.text_manipulator.clone();
            if cfg.prompts_dir.is_none() {
                cfg.prompts_dir.clone_from(&config.executor.prompts_dir);
            }
            let svc = droidmesh_text_manipulator::text_manipulator_service(
                cfg,
                llm_client(config, None)?,
                config.endpoints.device.clone(),
            )
            .map_err(|e| anyhow::anyhow!("text manipulator cannot start: {e}"))?;
            tonic::service::Routes::new(svc)
        }
        Service::Gateway => anyhow::bail!("the gateway is built above"),
    };
    Ok((
        routes,
        ServeOptions::new(service.name(), service.grpc()),
        None,
    ))
}

/// The gateway's HTTP face, serving.
pub struct HttpFace {
    pub addr: SocketAddr,
    task: JoinHandle<Result<(), String>>,
}

impl HttpFace {
    /// Binds `[listen] gateway_http` (nothing when 0; a port that cannot be bound fails, as a
    /// service port does). Bound before anything is built, so a port in use stops the process
    /// before it makes any file.
    pub async fn bind(config: &Config) -> Result<Option<tokio::net::TcpListener>> {
        let Some(addr) = config.listen.gateway_http_addr() else {
            return Ok(None);
        };
        let listener = droidmesh_runtime::server::bind(addr).await.with_context(|| {
            format!(
                "cannot serve the gateway's HTTP face on {addr} (`[listen] gateway_http = 0` turns it off)"
            )
        })?;
        Ok(Some(listener))
    }

    /// Serves `gateway` on `listener` (from [`HttpFace::bind`]) until `stop` turns true or
    /// its sender goes; calls in progress then get `listen.drain_secs`.
    pub fn serve(
        listener: tokio::net::TcpListener,
        config: &Config,
        gateway: std::sync::Arc<droidmesh_gateway::GatewayService>,
        mut stop: watch::Receiver<bool>,
    ) -> Result<HttpFace> {
        let addr = listener
            .local_addr()
            .context("bound socket has no address")?;
        let tls = ServerTls::http1(&config.tls, client_auth(Service::Gateway, config))
            .context("cannot serve the gateway's HTTP face over TLS (config [tls])")?;
        let task = tokio::spawn(droidmesh_gateway::http::serve(
            listener,
            tls,
            gateway,
            config.gateway_http.clone(),
            std::time::Duration::from_secs(config.listen.drain_secs),
            async move {
                let _ = stop.wait_for(|s| *s).await;
            },
        ));
        Ok(HttpFace { addr, task })
    }

    /// Waits for the face to end (once its stop has been given).
    pub async fn join(self) -> Result<()> {
        self.task
            .await
            .context("the gateway's HTTP face failed")?
            .map_err(|e| anyhow::anyhow!("the gateway's HTTP face failed: {e}"))
    }
}

/// Every service of the mesh, running in this process.
pub struct Mesh {
    pub addrs: Vec<(Service, SocketAddr)>,
    /// `https` when the mesh serves TLS, else `http`.
    pub scheme: &'static str,
    /// The gateway's HTTP face, unless `[listen] gateway_http` is 0.
    pub http: Option<HttpFace>,
    pub sims: Option<droidmesh_sim::SimFleet>,
    /// The gateway has no API keys: every caller is one tenant.
    pub gateway_open: bool,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<Result<(), droidmesh_runtime::RuntimeError>>>,
}

impl Mesh {
    /// Starts `sims` simulated devices (attached to the device service directly over TCP),
    /// binds every service (port 0 in the config picks a free one) and points the endpoints
    /// at the bound addresses.
    pub async fn start(config: Config, sims: usize) -> Result<Mesh> {
        let phones = droidmesh_sim::SimOptions {
            devices: sims,
            ..droidmesh_sim::SimOptions::default()
        };
        Self::start_with_phones(config, phones).await
    }

    /// [`Mesh::start`] with simulated phones made as `phones` says (its host and port are the
    /// mesh's own; no phones when `phones.devices` is 0).
    pub async fn start_with_phones(
        mut config: Config,
        phones: droidmesh_sim::SimOptions,
    ) -> Result<Mesh> {
        check_open(&config, config.listen.host)?;
        check_descriptors(&config, &Service::ALL)?;
        let fleet = if phones.devices > 0 {
            let fleet = droidmesh_sim::start(droidmesh_sim::SimOptions {
                host: config.listen.host,
                base_port: 0,
                ..phones
            })
            .await
            .context("simulated devices cannot start")?;
            config
                .device
                .direct_devices
                .extend(fleet.addrs().iter().map(|a| a.to_string()));
            Some(fleet)
        } else {
            None
        };
        // Bind first, so endpoints name the real ports before any service is built (and a
        // port in use stops the mesh before the task store is made).
        let mut bound = Vec::new();
        for service in Service::ALL {
            let addr = config.listen.addr(service.port(&config));
            let listener = crate::commands::bind_service(service, addr).await?;
            let local = listener
                .local_addr()
                .context("bound socket has no address")?;
            bound.push((service, listener, local));
        }
        let mut http_listener = HttpFace::bind(&config).await?;
        let scheme = scheme(&config);
        for (service, _, local) in &bound {
            *service.endpoint_mut(&mut config.endpoints) = format!("{scheme}://{local}");
        }
        let (stop, _) = watch::channel(false);
        let mut tasks = Vec::new();
        let mut addrs = Vec::new();
        let mut http = None;
        let mut gateway_open = false;
        for (service, listener, local) in bound {
            let (routes, mut opts, gateway) = routes(service, &config)?;
            if let Some(g) = gateway {
                gateway_open = !g.keys_required();
                if let Some(l) = http_listener.take() {
                    http = Some(HttpFace::serve(l, &config, g, stop.subscribe())?);
                }
            }
            // One process stops as one: no replica elsewhere takes over, so nothing to notice,
            // and every service drains for as long as the gateway does.
            opts.drain_notice = std::time::Duration::ZERO;
            opts.drain_timeout = std::time::Duration::from_secs(config.listen.drain_secs);
            let mut rx = stop.subscribe();
            tasks.push(tokio::spawn(droidmesh_runtime::serve(
                listener,
                routes,
                opts,
                async move {
                    let _ = rx.wait_for(|s| *s).await;
                },
            )));
            addrs.push((service, local));
        }
        Ok(Mesh {
            addrs,
            scheme,
            http,
            sims: fleet,
            gateway_open,
            stop,
            tasks,
        })
    }

    pub fn endpoint(&self, service: Service) -> Option<String> {
        self.addrs
            .iter()
            .find(|(s, _)| *s == service)
            .map(|(_, a)| format!("{}://{a}", self.scheme))
    }

    /// Drains every service, then stops the simulators.
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.stop.send(true);
        for t in self.tasks {
            t.await.context("a service task failed")??;
        }
        if let Some(h) = self.http {
            h.join().await?;
        }
        if let Some(f) = self.sims {
            f.shutdown().await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::Service;
    use clap::ValueEnum;

    /// Every Deployment in k8s/base runs a service `droidmesh serve` knows, and every service
    /// has a Deployment.
    #[test]
    fn the_kubernetes_manifests_serve_every_service() {
        let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../k8s/base");
        let kustomization = std::fs::read_to_string(base.join("kustomization.yaml")).unwrap();
        let mut served = Vec::new();
        for line in kustomization.lines() {
            let Some(file) = line.trim().strip_prefix("- ") else {
                continue;
            };
            if !file.ends_with(".yaml") {
                continue;
            }
            let yaml = std::fs::read_to_string(base.join(file)).unwrap();
            let args = yaml
                .lines()
                .find_map(|l| l.trim().strip_prefix("args: [\"serve\", \""))
                .unwrap_or_else(|| panic!("{file} runs no `serve`"));
            let name = args.split('"').next().unwrap();
            let service = Service::from_str(name, false)
                .unwrap_or_else(|e| panic!("{file}: `serve {name}` is refused: {e}"));
            let port = service.port(&crate::config::Config::default());
            assert!(
                yaml.contains(&format!("containerPort: {port}")),
                "{file}: expected container port {port}"
            );
            served.push(service);
        }
        for s in Service::ALL {
            assert!(served.contains(&s), "no Deployment serves {}", s.name());
        }
    }
}
