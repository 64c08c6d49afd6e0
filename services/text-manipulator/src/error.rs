//! The text manipulator's error type, the [`ServiceErrorCode`] of each kind, and the one place
//! it becomes a `tonic::Status`.
//!
//! Only requests that cannot be served at all are errors. What goes wrong with the edit itself
//! (no field focused, a program that keeps failing, typing that did not take) is a failed
//! `ActionResult` in a successful response, for the manager to act on.
use droidmesh_runtime::{ServiceError, ServiceErrorCode};
use tonic::Status;

#[derive(Debug, thiserror::Error)]
pub enum TextManipulatorError {
    /// The request names no edit.
    #[error("subgoal is empty: expected the edit to make (the text after `TEXT_TASK:`)")]
    EmptySubgoal,
    /// `apply` without a lease to type under.
    #[error(
        "apply needs device.lease with a serial and a lease id: the gateway leases the device first"
    )]
    ApplyWithoutLease,
    /// The focused field must be read, but the request names no device.
    #[error(
        "original is absent and device.lease names no serial: pass the field's text or the device to read it from"
    )]
    NoDevice,
    /// `max_retries` above the limit.
    #[error("max_retries must be at most {limit}, got {got}")]
    TooManyRetries { limit: u32, got: u32 },
    /// `original` longer than the configured limit.
    #[error("original has {chars} characters; at most {limit} are accepted")]
    OriginalTooLong { chars: usize, limit: usize },
    /// A text field of the request past its limit.
    #[error("{field} is {bytes} bytes; at most {limit} are accepted")]
    TooLong {
        field: &'static str,
        bytes: usize,
        limit: usize,
    },
    /// The request's model override cannot be used (unknown provider, temperature outside
    /// 0–2, no tokens).
    #[error("llm override for `text_manipulator`: {0}")]
    BadOverride(droidmesh_llm::LlmError),
    /// The device endpoint cannot be turned into a channel.
    #[error("device endpoint '{endpoint}' is not usable: {reason}")]
    BadEndpoint { endpoint: String, reason: String },
    /// The model cannot be used at all (credentials, configuration, a spent replay).
    #[error("the model {model} cannot be used: {source}")]
    Model {
        model: String,
        source: droidmesh_llm::LlmError,
    },
    /// The device service does not know the request's device.
    #[error(
        "device {serial} is not known to the device service at {endpoint}: name a device it lists ({message})"
    )]
    UnknownDevice {
        serial: String,
        endpoint: String,
        message: String,
    },
    /// The device's state cannot be read.
    #[error("cannot read device {serial} through {endpoint}: {message}")]
    DeviceUnreadable {
        serial: String,
        endpoint: String,
        message: String,
    },
    /// A prompt template does not render (a broken override).
    #[error("the text manipulator's prompt does not render: {0}")]
    Prompt(#[from] droidmesh_agent::prompts::PromptError),
    /// The JavaScript sandbox itself failed (not the program in it).
    #[error("the javascript sandbox failed: {0}")]
    Sandbox(#[from] droidmesh_sandbox::SandboxError),
}

impl ServiceError for TextManipulatorError {
    fn error_code(&self) -> ServiceErrorCode {
        use TextManipulatorError as E;
        match self {
            E::EmptySubgoal
            | E::ApplyWithoutLease
            | E::NoDevice
            | E::TooManyRetries { .. }
            | E::OriginalTooLong { .. }
            | E::TooLong { .. }
            | E::BadOverride(_)
            | E::BadEndpoint { .. } => ServiceErrorCode::BadRequest,
            E::UnknownDevice { .. } => ServiceErrorCode::NotFound,
            E::Model { .. } => ServiceErrorCode::Conflict,
            E::DeviceUnreadable { .. } => ServiceErrorCode::Unavailable,
            E::Prompt(_) | E::Sandbox(_) => ServiceErrorCode::Internal,
        }
    }
}

/// The one place where text manipulator errors become gRPC statuses.
impl From<TextManipulatorError> for Status {
    fn from(e: TextManipulatorError) -> Self {
        e.to_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn to_status(e: &TextManipulatorError) -> Status {
        e.to_status()
    }

    #[test]
    fn each_error_gets_the_code_a_caller_can_act_on() {
        assert_eq!(
            to_status(&TextManipulatorError::EmptySubgoal).code(),
            Code::InvalidArgument
        );
        assert_eq!(
            to_status(&TextManipulatorError::ApplyWithoutLease).code(),
            Code::InvalidArgument
        );
        let model = TextManipulatorError::Model {
            model: "mock/gpt".into(),
            source: droidmesh_llm::LlmError::Config("no key".into()),
        };
        let status = to_status(&model);
        assert_eq!(status.code(), Code::FailedPrecondition);
        assert!(
            status.message().contains("mock/gpt"),
            "{}",
            status.message()
        );
        let device = TextManipulatorError::DeviceUnreadable {
            serial: "emulator-5554".into(),
            endpoint: "http://127.0.0.1:1".into(),
            message: "connection refused".into(),
        };
        let status = to_status(&device);
        assert_eq!(status.code(), Code::Unavailable);
        assert!(
            status.message().contains("emulator-5554"),
            "{}",
            status.message()
        );
    }
}
