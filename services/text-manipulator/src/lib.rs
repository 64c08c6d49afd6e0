//! The droidmesh text manipulator: rewrites the focused text field for `TEXT_TASK:` subgoals.
//!
//! `Manipulate` takes the field's text (from the request, or read from the device's focused
//! field), asks the model for a short JavaScript program that computes the new text, and runs
//! it in a fresh sandbox that grants only the constant `ORIGINAL` and `input_text(text)`. A
//! program that fails (syntax, exception, time or memory limit, no or several `input_text`
//! calls, a text the phone cannot type) is shown to the model with its error for another try.
//! With `apply`, the text is typed into the field under the task's lease (cleared first) and
//! read back.
//!
//! What cannot be served is an RPC error (its `ServiceErrorCode` in [`error`]); an edit that did not
//! happen is a failed `ActionResult` in the response.
mod attempts;
pub mod config;
pub mod device;
pub mod error;
pub mod program;
mod report;
pub mod service;

use std::sync::Arc;
use std::time::Duration;

pub use config::TextManipulatorConfig;
pub use error::TextManipulatorError;
pub use service::TextManipulator;

use droidmesh_agent::prompts::PromptSet;
use droidmesh_llm::LlmClient;
use droidmesh_proto::v1::text_manipulator_service_server::TextManipulatorServiceServer;

/// Builds the text manipulator server. `default_device` is the device service endpoint used
/// when a request's binding names none; a binding may name it or one of
/// `cfg.device_endpoints`, and nothing else.
pub fn text_manipulator_service(
    cfg: TextManipulatorConfig,
    llm: LlmClient,
    default_device: String,
) -> Result<TextManipulatorServiceServer<TextManipulator>, String> {
    cfg.validate()?;
    let prompts = match &cfg.prompts_dir {
        Some(dir) => PromptSet::with_override_dir(dir),
        None => PromptSet::embedded(),
    }
    .map_err(|e| format!("prompt templates: {e}"))?;
    let devices = device::Devices::new(
        &default_device,
        &cfg.device_endpoints,
        Duration::from_millis(cfg.device_timeout_ms),
    )?;
    Ok(TextManipulatorServiceServer::new(TextManipulator {
        cfg,
        llm,
        prompts: Arc::new(prompts),
        devices,
    }))
}
