//! The services of one process: `serve <service>` runs one; `up` runs all of them, each on its
//! own port and talking gRPC exactly as when distributed, with simulated devices when asked.
use anyhow::{Context, Result};
use droidmesh_runtime::ServeOptions;
use std::net::SocketAddr;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;

/// The services this binary can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Service {
    Device,
    Executor,
    Manager,
    Gateway,
}

impl Service {
    pub const ALL: [Service; 4] = [
        Service::Device,
        Service::Executor,
        Service::Manager,
        Service::Gateway,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Service::Device => "device",
            Service::Executor => "executor",
            Service::Manager => "manager",
            Service::Gateway => "gateway",
        }
    }

    pub fn port(self, config: &Config) -> u16 {
        match self {
            Service::Device => config.listen.device,
            Service::Executor => config.listen.executor,
            Service::Manager => config.listen.manager,
            Service::Gateway => config.listen.gateway,
        }
    }
}

/// The LLM client of the agent services: the configured providers, or the built-in defaults.
fn llm_client(config: &Config) -> Result<droidmesh_llm::LlmClient> {
    droidmesh_llm::install_crypto_provider();
    let llm = config
        .llm
        .clone()
        .unwrap_or_else(droidmesh_llm::LlmConfig::defaults);
    droidmesh_llm::LlmClient::from_config(&llm).context("llm config is not usable")
}

/// Builds a service's routes from the config (nothing is bound yet).
pub fn routes(service: Service, config: &Config) -> Result<(tonic::service::Routes, ServeOptions)> {
    use droidmesh_proto::service_names as names;
    Ok(match service {
        Service::Device => {
            let svc = droidmesh_device::device_service(config.device.clone())
                .context("device service cannot start")?;
            (
                tonic::service::Routes::new(svc),
                ServeOptions::new("device", &[names::DEVICE]),
            )
        }
        Service::Executor => {
            let svc = droidmesh_executor::executor_service(
                config.executor.clone(),
                llm_client(config)?,
                config.endpoints.device.clone(),
                droidmesh_executor::secrets_from_env(),
            )
            .map_err(|e| anyhow::anyhow!("executor cannot start: {e}"))?;
            (
                tonic::service::Routes::new(svc),
                ServeOptions::new("executor", &[names::EXECUTOR]),
            )
        }
        Service::Manager => {
            let svc = droidmesh_manager::manager_service(
                droidmesh_manager::ManagerConfig {
                    prompts_dir: config.executor.prompts_dir.clone(),
                    ..droidmesh_manager::ManagerConfig::default()
                },
                llm_client(config)?,
                config.endpoints.device.clone(),
            )
            .map_err(|e| anyhow::anyhow!("manager cannot start: {e}"))?;
            (
                tonic::service::Routes::new(svc),
                ServeOptions::new("manager", &[names::MANAGER]),
            )
        }
        Service::Gateway => {
            let peers = droidmesh_gateway::Peers {
                device: config.endpoints.device.clone(),
                executor: config.endpoints.executor.clone(),
                manager: config.endpoints.manager.clone(),
                scripter: config.endpoints.scripter.clone(),
                text_manipulator: config.endpoints.text_manipulator.clone(),
            };
            let svc = droidmesh_gateway::gateway_service(config.gateway.clone(), &peers)
                .map_err(|e| anyhow::anyhow!("gateway cannot start: {e}"))?;
            (
                tonic::service::Routes::new(svc),
                ServeOptions::new("gateway", &[names::GATEWAY]),
            )
        }
    })
}

/// Every service of the mesh, running in this process.
pub struct Mesh {
    pub addrs: Vec<(Service, SocketAddr)>,
    pub sims: Option<droidmesh_sim::SimFleet>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<Result<(), droidmesh_runtime::RuntimeError>>>,
}

impl Mesh {
    /// Starts `sims` simulated devices (attached to the device service directly over TCP),
    /// binds every service (port 0 in the config picks a free one) and points the endpoints
    /// at the bound addresses.
    pub async fn start(mut config: Config, sims: usize) -> Result<Mesh> {
        let fleet = if sims > 0 {
            let fleet = droidmesh_sim::start(droidmesh_sim::SimOptions {
                host: config.listen.host,
                base_port: 0,
                devices: sims,
                ..droidmesh_sim::SimOptions::default()
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
        // Bind first, so endpoints name the real ports before any service is built.
        let mut bound = Vec::new();
        for service in Service::ALL {
            let addr = config.listen.addr(service.port(&config));
            let listener = droidmesh_runtime::server::bind(addr).await?;
            let local = listener
                .local_addr()
                .context("bound socket has no address")?;
            bound.push((service, listener, local));
        }
        for (service, _, local) in &bound {
            let ep = format!("http://{local}");
            match service {
                Service::Device => config.endpoints.device = ep,
                Service::Executor => config.endpoints.executor = ep,
                Service::Manager => config.endpoints.manager = ep,
                Service::Gateway => config.endpoints.gateway = ep,
            }
        }
        let (stop, _) = watch::channel(false);
        let mut tasks = Vec::new();
        let mut addrs = Vec::new();
        for (service, listener, local) in bound {
            let (routes, opts) = routes(service, &config)?;
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
            sims: fleet,
            stop,
            tasks,
        })
    }

    pub fn endpoint(&self, service: Service) -> Option<String> {
        self.addrs
            .iter()
            .find(|(s, _)| *s == service)
            .map(|(_, a)| format!("http://{a}"))
    }

    /// Drains every service, then stops the simulators.
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.stop.send(true);
        for t in self.tasks {
            t.await.context("a service task failed")??;
        }
        if let Some(f) = self.sims {
            f.shutdown().await;
        }
        Ok(())
    }
}
