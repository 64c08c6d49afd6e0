//! Errors of the runtime crate.
use std::path::PathBuf;

/// Result alias for the runtime crate.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot read config file {path}: {source}")]
    ConfigRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {message}")]
    ConfigSyntax { path: PathBuf, message: String },
    #[error("config refers to ${{{var}}}, but that environment variable is not set")]
    MissingVariable { var: String },
    #[error("environment override {var} cannot apply: {reason}")]
    BadOverride { var: String, reason: String },
    #[error("invalid config: {0}")]
    ConfigInvalid(String),
    #[error("invalid endpoint {endpoint:?}: {reason}")]
    BadEndpoint { endpoint: String, reason: String },
    #[error("telemetry setup failed: {0}")]
    Telemetry(String),
    #[error("gRPC server {name} failed: {message}")]
    Server { name: String, message: String },
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}
