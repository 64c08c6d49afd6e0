//! The manager service's error type, the [`ServiceErrorCode`] of each kind, and the one place it
//! becomes a gRPC status.
use droidmesh_llm::LlmError;
use droidmesh_runtime::{ServiceError, ServiceErrorCode};
use tonic::Status;

/// Everything that makes a manager RPC fail. A model reply that cannot be read is not here:
/// `Plan` returns it to the caller as a parse warning, not as an error.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The request is malformed or incomplete; the message says what to fix.
    #[error("{0}")]
    InvalidArgument(String),
    /// The model cannot be used at all, so another call would fail the same way: a refused
    /// key, a configuration that cannot work, a replay cassette with nothing left.
    #[error("the {agent} model {model} cannot be used: {source}")]
    ModelUnusable {
        agent: &'static str,
        model: String,
        source: LlmError,
    },
    /// The model call failed in a way a later call may not (rate limit, server error,
    /// timeout, a response that could not be read).
    #[error("the {agent} model {model} failed: {source}")]
    ModelFailed {
        agent: &'static str,
        model: String,
        source: LlmError,
    },
    /// The device service does not know the request's device.
    #[error(
        "device {serial} is not known to the device service at {endpoint}: name a device it lists ({detail})"
    )]
    UnknownDevice {
        serial: String,
        endpoint: String,
        detail: String,
    },
    /// The device's state could not be read through the device service.
    #[error("device {serial} (device service {endpoint}) could not be read: {detail}")]
    DeviceUnreadable {
        serial: String,
        endpoint: String,
        detail: String,
    },
    /// A prompt template failed to render.
    #[error("the {template} prompt does not render: {detail}")]
    Prompt {
        template: &'static str,
        detail: String,
    },
}

impl ManagerError {
    /// Sorts a failed model call: errors no retry can fix, and the rest.
    pub fn model(agent: &'static str, model: String, source: LlmError) -> Self {
        match source {
            source if source.is_unusable() => Self::ModelUnusable {
                agent,
                model,
                source,
            },
            _ => Self::ModelFailed {
                agent,
                model,
                source,
            },
        }
    }
}

impl ServiceError for ManagerError {
    fn error_code(&self) -> ServiceErrorCode {
        match self {
            ManagerError::InvalidArgument(_) => ServiceErrorCode::BadRequest,
            ManagerError::UnknownDevice { .. } => ServiceErrorCode::NotFound,
            ManagerError::ModelUnusable { .. } => ServiceErrorCode::Conflict,
            ManagerError::ModelFailed { .. } | ManagerError::DeviceUnreadable { .. } => {
                ServiceErrorCode::Unavailable
            }
            ManagerError::Prompt { .. } => ServiceErrorCode::Internal,
        }
    }
}

/// The one place where manager errors become gRPC statuses.
impl From<ManagerError> for Status {
    fn from(e: ManagerError) -> Self {
        e.to_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn to_status(e: ManagerError) -> Status {
        Status::from(e)
    }

    #[test]
    fn each_error_has_its_code() {
        let unusable = ManagerError::model(
            "manager",
            "mock/m".into(),
            LlmError::Auth {
                status: 401,
                message: "bad key".into(),
            },
        );
        let status = to_status(unusable);
        assert_eq!(status.code(), Code::FailedPrecondition);
        assert!(
            status.message().contains("manager model mock/m"),
            "{status:?}"
        );
        let busy = ManagerError::model(
            "manager",
            "mock/m".into(),
            LlmError::Server {
                status: 503,
                message: "busy".into(),
            },
        );
        assert_eq!(to_status(busy).code(), Code::Unavailable);
        let device = ManagerError::DeviceUnreadable {
            serial: "emu-1".into(),
            endpoint: "http://127.0.0.1:1".into(),
            detail: "refused".into(),
        };
        let status = to_status(device);
        assert_eq!(status.code(), Code::Unavailable);
        assert!(status.message().contains("emu-1"), "{status:?}");
        assert_eq!(
            to_status(ManagerError::InvalidArgument("instruction is empty".into())).code(),
            Code::InvalidArgument
        );
    }
}
