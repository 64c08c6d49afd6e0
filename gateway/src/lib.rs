//! The droidmesh gateway: the public `Gateway` service. It owns every task (record, device
//! lease, event log), routes direct-mode tasks to the executor's CodeAct stream and final
//! answers to the manager's structured output, and never calls an LLM itself.
pub mod config;
pub mod runner;
pub mod service;
pub mod store;

pub use config::{GatewayConfig, Peers};
pub use service::GatewayService;

use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::executor_service_client::ExecutorServiceClient;
use droidmesh_proto::v1::gateway_server::GatewayServer;
use droidmesh_proto::v1::manager_service_client::ManagerServiceClient;
use droidmesh_runtime::ClientOptions;

/// Builds the gateway server; peers are connected lazily, so it starts before they do.
pub fn gateway_service(
    cfg: GatewayConfig,
    peers: &Peers,
) -> Result<GatewayServer<GatewayService>, String> {
    cfg.validate()?;
    // Agent calls stream for the length of a task: no per-request deadline on them.
    let streaming = ClientOptions {
        request_timeout: None,
        ..ClientOptions::default()
    };
    let unary = ClientOptions {
        request_timeout: Some(std::time::Duration::from_secs(30)),
        ..ClientOptions::default()
    };
    let connect = |what: &str, ep: &str, opts: &ClientOptions| {
        droidmesh_runtime::connect(ep, opts).map_err(|e| format!("{what} endpoint '{ep}': {e}"))
    };
    let deps = runner::Deps {
        cfg,
        device: DeviceServiceClient::new(connect("device", &peers.device, &unary)?),
        executor: ExecutorServiceClient::new(connect("executor", &peers.executor, &streaming)?),
        manager: ManagerServiceClient::new(connect("manager", &peers.manager, &unary)?),
        device_endpoint: peers
            .device
            .split(',')
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
    };
    Ok(GatewayServer::new(GatewayService::new(deps)))
}
