//! The droidmesh scripter: runs the off-device JavaScript sessions of `<script>` subgoals.
//!
//! `RunScript` holds one QuickJS session for the length of the call. The model writes
//! JavaScript step by step; the session grants a `fetch`-like HTTP API (reqwest underneath,
//! with an address policy checked after DNS resolution and on every redirect hop, timeouts,
//! size caps and a request budget) and the files of the task's workspace. A reply without code
//! ends the run; its `AgentFinished` carries the `ActionResult` and the files left behind.
pub mod config;
pub mod error;
mod functions;
pub mod http;
mod result;
mod run;
pub mod service;
pub mod workspace;

/// The address policy, now droidmesh's address guard ([`droidmesh_netguard::policy`]).
pub use droidmesh_netguard::policy;

use std::sync::Arc;

pub use config::{HttpConfig, ScripterConfig};
pub use error::ScripterError;
pub use service::Scripter;

use droidmesh_agent::prompts::PromptSet;
use droidmesh_llm::LlmClient;
use droidmesh_proto::v1::scripter_service_server::ScripterServiceServer;
use tokio::sync::Semaphore;

/// Builds the scripter server.
pub fn scripter_service(
    cfg: ScripterConfig,
    llm: LlmClient,
) -> Result<ScripterServiceServer<Scripter>, String> {
    cfg.validate()?;
    let prompts = match &cfg.prompts_dir {
        Some(dir) => PromptSet::with_override_dir(dir),
        None => PromptSet::embedded(),
    }
    .map_err(|e| format!("prompt templates: {e}"))?;
    let http = http::Http::new(&cfg.http)?;
    let slots = Arc::new(Semaphore::new(cfg.max_concurrent_runs));
    let replica = Arc::from(cfg.replica_name());
    Ok(ScripterServiceServer::new(Scripter {
        replica,
        cfg: Arc::new(cfg),
        llm,
        prompts: Arc::new(prompts),
        http,
        slots,
    }))
}
