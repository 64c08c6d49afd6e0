//! The droidmesh manager. `Plan` is the planner of reasoning mode: the device's state and the
//! task's history in, subgoals routed to the executor, scripter or text manipulator out (or a
//! completion, a request for a person's help, a direct answer). `StructureOutput` turns a
//! task's final answer into JSON that validates against the caller's JSON Schema.
pub mod config;
mod device;
pub mod error;
mod model;
mod plan;
pub mod prompt;
mod service;
mod structured;

use std::sync::Arc;

use droidmesh_agent::prompts::PromptSet;
use droidmesh_llm::LlmClient;
use droidmesh_proto::v1::manager_service_server::ManagerServiceServer;

pub use config::ManagerConfig;
pub use error::ManagerError;
pub use plan::AGENT;
pub use service::{MAX_TASK_ID_BYTES, Manager};
pub use structured::{MAX_ATTEMPTS, MAX_FIELD_BYTES};

/// Builds the manager server. `default_device` is the device service a `Plan` reads from when
/// its request names none (empty: every request must name one).
pub fn manager_service(
    cfg: ManagerConfig,
    llm: LlmClient,
    default_device: String,
) -> Result<ManagerServiceServer<Manager>, String> {
    cfg.validate()?;
    let prompts = match &cfg.prompts_dir {
        Some(d) => PromptSet::with_override_dir(d),
        None => PromptSet::embedded(),
    }
    .map_err(|e| format!("prompt templates: {e}"))?;
    let devices = device::Devices::new(&cfg, default_device)?;
    let cards =
        droidmesh_app_cards::AppCards::new(&cfg.app_cards).map_err(|e| format!("manager.{e}"))?;
    Ok(ManagerServiceServer::new(Manager {
        llm,
        prompts: Arc::new(prompts),
        devices: Arc::new(devices),
        cards,
    }))
}
