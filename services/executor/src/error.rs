//! The executor's error type, the [`ServiceErrorCode`] of each kind, and the one place it becomes
//! a gRPC status.
use droidmesh_llm::LlmError;
use droidmesh_runtime::{ServiceError, ServiceErrorCode};
use tonic::Status;

/// What makes an executor RPC fail as a whole. Failures a caller's planner can act on (a reply
/// that does not parse, a refused device action) are not errors: they come back as a failed
/// `ActionResult`.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    /// The request is malformed: no lease, an empty goal or subgoal, a stream that does not
    /// start with `start`.
    #[error("{0}")]
    InvalidRequest(String),
    /// The device service endpoint cannot be used.
    #[error("device endpoint '{endpoint}': {detail}")]
    DeviceEndpoint { endpoint: String, detail: String },
    /// The agent's model cannot be used at all: a refused key, a bad configuration or override,
    /// a replay with no answers left.
    #[error("the {agent} model cannot be used ({model}): {source}")]
    ModelUnusable {
        agent: &'static str,
        /// `provider/model`, or the profile's name when it could not be resolved.
        model: String,
        source: LlmError,
    },
    /// A model call failed in a way a later call may not (rate limits, timeouts, 5xx).
    #[error("the {agent} model call failed: {source}")]
    ModelCall {
        agent: &'static str,
        source: LlmError,
    },
    /// The request names a secret this executor does not hold; the message names the id and
    /// where it was looked for, never a value.
    #[error("{0}")]
    SecretMissing(String),
    /// A prompt template does not render with this request.
    #[error("the {0} prompt does not render: {1}")]
    Prompt(&'static str, String),
    /// The caller's stream failed; its status is passed on.
    #[error("{}", .0.message())]
    Client(Status),
}

impl ServiceError for ExecutorError {
    fn error_code(&self) -> ServiceErrorCode {
        match self {
            ExecutorError::InvalidRequest(_) | ExecutorError::DeviceEndpoint { .. } => {
                ServiceErrorCode::BadRequest
            }
            ExecutorError::ModelUnusable { .. } | ExecutorError::SecretMissing(_) => {
                ServiceErrorCode::Conflict
            }
            ExecutorError::ModelCall { .. } => ServiceErrorCode::Unavailable,
            ExecutorError::Prompt(..) => ServiceErrorCode::Internal,
            ExecutorError::Client(s) => ServiceErrorCode::from_grpc(s.code()),
        }
    }

    /// The caller's own stream failure is passed on as it came (with its metadata).
    fn to_status(&self) -> Status {
        match self {
            ExecutorError::Client(s) => s.clone(),
            e => Status::new(e.error_code().grpc(), e.public_message()),
        }
    }
}

/// The one place where executor errors become gRPC statuses.
impl From<ExecutorError> for Status {
    fn from(e: ExecutorError) -> Self {
        e.to_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn to_status(e: ExecutorError) -> Status {
        Status::from(e)
    }

    #[test]
    fn request_errors_are_invalid_and_an_unusable_model_is_a_failed_precondition() {
        let s = to_status(ExecutorError::InvalidRequest("subgoal is empty".into()));
        assert_eq!(
            (s.code(), s.message()),
            (Code::InvalidArgument, "subgoal is empty")
        );
        let s = to_status(ExecutorError::ModelUnusable {
            agent: "executor",
            model: "mock/scripted-model".into(),
            source: LlmError::Config("no key".into()),
        });
        assert_eq!(s.code(), Code::FailedPrecondition);
        assert_eq!(
            s.message(),
            "the executor model cannot be used (mock/scripted-model): llm configuration: no key"
        );
        let s = to_status(ExecutorError::ModelCall {
            agent: "executor",
            source: LlmError::Connect("refused".into()),
        });
        assert_eq!(s.code(), Code::Unavailable);
        let s = to_status(ExecutorError::Client(Status::cancelled("gone")));
        assert_eq!((s.code(), s.message()), (Code::Cancelled, "gone"));
    }
}
