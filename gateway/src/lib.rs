//! The droidmesh gateway: the public `Gateway` service. It owns every task (record, device
//! lease, event log) and runs it under the driver of its mode: direct tasks relay the
//! executor's CodeAct stream; reasoning tasks loop manager → agent → manager, routing each
//! subgoal by its kind and each handoff to the agent asked for. Final answers go to the
//! manager's structured output. It never calls an LLM itself.
pub mod agents;
pub mod auth;
pub mod busy;
pub mod check;
pub mod config;
pub mod conversations;
pub mod deps;
pub mod direct;
pub mod driver;
pub mod entry;
pub mod error;
pub mod http;
pub mod limits;
pub mod metrics;
pub mod persist;
pub mod queue;
pub mod quota;
pub mod reasoning;
pub mod record;
pub mod relay;
pub mod routing;
pub mod runner;
pub mod service;
pub mod store;
pub mod task_state;
pub mod watch;
pub mod writer;

pub use config::{GatewayConfig, Peers};
pub use service::GatewayService;

use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::executor_service_client::ExecutorServiceClient;
use droidmesh_proto::v1::manager_service_client::ManagerServiceClient;
use droidmesh_proto::v1::scripter_service_client::ScripterServiceClient;
use droidmesh_proto::v1::text_manipulator_service_client::TextManipulatorServiceClient;
use droidmesh_runtime::ClientOptions;

/// Builds the gateway itself, to be shared by its faces (the gRPC server through
/// `GatewayServer::from_arc`, the HTTP face) so every check and limit applies to both. Tasks
/// are kept in `store`, which the caller opened ([`open_store`]; `None`: in memory only).
/// Peers are connected lazily, so it starts before they do.
pub fn gateway(
    cfg: GatewayConfig,
    peers: &Peers,
    store: Option<persist::Opened>,
) -> Result<std::sync::Arc<GatewayService>, String> {
    cfg.validate()?;
    // Agent calls wait for models, which may be slow: they are bounded per call by
    // `agent_call_timeout_ms` (CodeAct's stream lasts the task), not by the channel.
    let keepalive = std::time::Duration::from_millis(cfg.peer_keepalive_ms);
    let mut discovery = droidmesh_runtime::balance::Discovery {
        resolve_every: std::time::Duration::from_millis(cfg.resolve_every_ms),
        probe_every: std::time::Duration::from_millis(cfg.probe_every_ms),
        capacity_wait: std::time::Duration::from_millis(cfg.agent_wait_ms),
        ..Default::default()
    };
    if let Some(path) = &cfg.hosts_file {
        discovery.resolver = std::sync::Arc::new(
            droidmesh_runtime::balance::HostsFileResolver::new(path.clone()),
        );
    }
    let agent = ClientOptions {
        request_timeout: None,
        keepalive,
        keepalive_timeout: keepalive * 2,
        discovery,
        ..ClientOptions::default()
    };
    let unary = ClientOptions {
        request_timeout: Some(std::time::Duration::from_millis(cfg.device_call_timeout_ms)),
        ..agent.clone()
    };
    let connect = |what: &str, ep: &str, opts: &ClientOptions| {
        droidmesh_runtime::connect(ep, opts).map_err(|e| format!("{what} endpoint '{ep}': {e}"))
    };
    let agents = agents::Agents {
        manager: ManagerServiceClient::new(connect("manager", &peers.manager, &agent)?),
        executor: ExecutorServiceClient::new(connect("executor", &peers.executor, &agent)?),
        scripter: ScripterServiceClient::new(connect("scripter", &peers.scripter, &agent)?),
        text_manipulator: TextManipulatorServiceClient::new(connect(
            "text_manipulator",
            &peers.text_manipulator,
            &agent,
        )?),
        endpoints: [
            peers.manager.clone(),
            peers.executor.clone(),
            peers.scripter.clone(),
            peers.text_manipulator.clone(),
        ],
    };
    let conversations = std::sync::Arc::new(conversations::Conversations::new(
        cfg.conversation_turns,
        cfg.max_conversations,
    ));
    let deps = deps::Deps {
        conversations,
        released: std::sync::Arc::default(),
        store: None,
        cfg,
        device: DeviceServiceClient::new(connect("device", &peers.device, &unary)?),
        agents,
        device_endpoint: peers
            .device
            .split(',')
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
    };
    Ok(std::sync::Arc::new(GatewayService::new(deps, store)?))
}

/// Opens the task store `cfg.store` names for this process (`None` for `memory`), as the
/// composition root does before it builds the gateway. Connecting to PostgreSQL blocks,
/// bounded by `replica_timeout_ms`.
pub fn open_store(cfg: &GatewayConfig) -> Result<Option<persist::Opened>, String> {
    let owner = writer::owner();
    let backend: std::sync::Arc<dyn persist::TaskStore> = match cfg.store_at()? {
        config::StoreAt::Memory => return Ok(None),
        config::StoreAt::Sqlite(path) => std::sync::Arc::new(
            persist::sqlite::SqliteStore::open(&path).map_err(|e| e.to_string())?,
        ),
        config::StoreAt::Postgres(url) => std::sync::Arc::new(
            persist::postgres::PostgresStore::open_blocking(
                &url.0,
                &owner,
                std::time::Duration::from_millis(cfg.replica_timeout_ms),
                cfg.store_ca.as_deref(),
            )
            .map_err(|e| e.to_string())?,
        ),
    };
    Ok(Some(persist::Opened { backend, owner }))
}
