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
    /// Every problem of a config, each naming its key and where its value came from.
    #[error("{}", problem_list(.0))]
    ConfigInvalid(Vec<String>),
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

/// One problem on a line of its own after their count: `the config has 3 problems:` ...
fn problem_list(problems: &[String]) -> String {
    match problems {
        [one] => format!("the config has a problem: {one}"),
        many => {
            let mut out = format!("the config has {} problems:", many.len());
            for p in many {
                out.push_str("\n  ");
                out.push_str(p);
            }
            out
        }
    }
}
