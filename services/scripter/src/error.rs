//! The scripter's error type and the one place it becomes a gRPC status.
//!
//! Failures inside a run (the model, a script, an HTTP request) are not errors of the RPC: they
//! end the run with `AgentFinished { success: false }` and say why. These are the failures that
//! keep a run from starting.
use droidmesh_runtime::{ServiceError, ServiceErrorCode};
use tonic::Status;

#[derive(Debug, thiserror::Error)]
pub enum ScripterError {
    /// The request is malformed (empty task, bad model override, ...).
    #[error("{0}")]
    InvalidRequest(String),
    /// Every run slot of this replica is taken.
    #[error("the scripter is already running {running} scripts, its limit; try again shortly")]
    Busy { running: usize },
    /// The task's workspace folder could not be prepared.
    #[error("the task workspace is not usable: {0}")]
    Workspace(String),
    /// The JavaScript sandbox could not start.
    #[error("the javascript sandbox could not start: {0}")]
    Sandbox(String),
    /// A prompt template does not render.
    #[error("the scripter prompt does not render: {0}")]
    Prompt(String),
}

impl ServiceError for ScripterError {
    fn error_code(&self) -> ServiceErrorCode {
        match self {
            ScripterError::InvalidRequest(_) => ServiceErrorCode::BadRequest,
            ScripterError::Busy { .. } => ServiceErrorCode::TooManyRequests,
            ScripterError::Workspace(_) | ScripterError::Sandbox(_) | ScripterError::Prompt(_) => {
                ServiceErrorCode::Internal
            }
        }
    }
}

/// The one place where scripter errors become gRPC statuses.
impl From<ScripterError> for Status {
    fn from(e: ScripterError) -> Self {
        e.to_status()
    }
}
