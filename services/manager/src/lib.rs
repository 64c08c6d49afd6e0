//! The droidmesh manager. `StructureOutput` turns a task's final answer into JSON that
//! validates against the caller's JSON Schema. `Plan` (reasoning mode) is not served yet.
pub mod error;
mod model;
mod service;
mod structured;

use std::sync::Arc;

use droidmesh_agent::prompts::PromptSet;
use droidmesh_llm::LlmClient;
use droidmesh_proto::v1::manager_service_server::ManagerServiceServer;

pub use error::{ManagerError, to_status};
pub use service::Manager;
pub use structured::MAX_ATTEMPTS;

/// Builds the manager server.
pub fn manager_service(
    llm: LlmClient,
    prompts_dir: Option<&str>,
) -> Result<ManagerServiceServer<Manager>, String> {
    let prompts = match prompts_dir {
        Some(d) => PromptSet::with_override_dir(d),
        None => PromptSet::embedded(),
    }
    .map_err(|e| format!("prompt templates: {e}"))?;
    Ok(ManagerServiceServer::new(Manager {
        llm,
        prompts: Arc::new(prompts),
    }))
}
