//! The droidmesh executor: both ways a model acts on the device.
//!
//! - `RunCodeAct` (direct mode, [`codeact`]): a streaming loop. The model writes JavaScript; it
//!   runs in a QuickJS session whose functions are the device tools ([`sandbox_tools`]).
//! - `ExecuteSubgoal` (reasoning mode): one subgoal, one atomic action written as JSON, or a
//!   handoff to the scripter or the text manipulator. Failures the manager can act on come back
//!   as a failed `ActionResult`; bad requests and unusable models are RPC errors
//!   ([`ExecutorError`], which names its `ServiceErrorCode`).
//!
//! Both read the device the same way ([`observe`]) and run tools through one async dispatcher
//! keyed by the agent crate's `Tool` enum ([`device_tools`]), which calls the device service
//! under the task's lease. `type_secret` types the executor's secrets ([`secrets`]: its
//! environment and a directory of files) for the ids a request lists; a request naming one the
//! executor lacks is refused at its start; a value never reaches a prompt, an event, a result,
//! an error or a span.
//!
//! Tools the operator defines in config (`[executor.tools.<name>]`: webhooks, JavaScript
//! functions; `[executor.mcp.<server>]`: the tools of MCP servers started over stdio) are
//! CodeAct functions too ([`custom_tools`]), their arguments checked against a JSON Schema
//! before a call.
pub mod admission;
pub mod codeact;
pub mod config;
pub mod custom_tools;
pub mod device_tools;
pub mod error;
pub mod foreground;
pub mod model;
pub mod observe;
pub mod sandbox_tools;
pub mod secrets;
pub mod service;
pub mod spans;
mod subgoal;

use std::collections::HashMap;
use std::sync::Arc;

pub use config::ExecutorConfig;
pub use error::ExecutorError;
pub use secrets::{Secrets, SecretsConfig};
pub use service::Executor;

use droidmesh_agent::prompts::PromptSet;
use droidmesh_llm::LlmClient;
use droidmesh_proto::v1::executor_service_server::ExecutorServiceServer;
use droidmesh_runtime::device::DeviceClients;

/// The secrets of the process's environment, `DROIDMESH_SECRET_<ID>`; ids are
/// case-insensitive (`secret_ids: ["pin"]` and `["PIN"]` both name DROIDMESH_SECRET_PIN).
/// A task may type only those it lists in `secret_ids`.
pub fn secrets_from_env() -> HashMap<String, String> {
    std::env::vars()
        .filter_map(|(k, v)| {
            k.strip_prefix(secrets::ENV_PREFIX)
                .map(|id| (id.to_ascii_lowercase(), v))
        })
        .collect()
}

/// Device service endpoints the executor keeps a channel to; the least recently used is
/// dropped first.
pub const DEVICE_CHANNELS: usize = 16;

/// Builds the executor server. The MCP servers the config names are started here, and this
/// waits (within each one's `start_timeout_ms`) until each has listed its tools; they are
/// stopped when the server is dropped.
pub fn executor_service(
    cfg: ExecutorConfig,
    llm: LlmClient,
    default_device: String,
    secrets: impl Into<Secrets>,
) -> Result<ExecutorServiceServer<Executor>, String> {
    cfg.validate()?;
    let prompts = match &cfg.prompts_dir {
        Some(dir) => PromptSet::with_override_dir(dir),
        None => PromptSet::embedded(),
    }
    .map_err(|e| format!("prompt templates: {e}"))?;
    let devices = DeviceClients::new(
        &default_device,
        &cfg.device_endpoints,
        config::DEVICE_ENDPOINTS,
        std::time::Duration::from_millis(cfg.device_call_timeout_ms),
        DEVICE_CHANNELS,
    )?;
    let admission = Arc::new(admission::StartAdmission::new(
        cfg.start_places(),
        std::time::Duration::from_millis(cfg.start_hold_ms),
    ));
    let cards =
        droidmesh_app_cards::AppCards::new(&cfg.app_cards).map_err(|e| format!("executor.{e}"))?;
    let secrets: Secrets = secrets.into();
    // Last: starting the MCP servers is the slow part, done once the rest is known to be fine.
    let custom =
        custom_tools::CustomTools::start(&cfg.tools, &cfg.mcp, cfg.step_timeout_ms, &secrets)?;
    Ok(ExecutorServiceServer::new(Executor {
        cards,
        custom,
        cfg,
        llm,
        prompts: Arc::new(prompts),
        secrets,
        foreground: Arc::default(),
        admission,
        devices: Arc::new(devices),
    }))
}
