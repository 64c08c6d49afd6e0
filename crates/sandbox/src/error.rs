//! The crate's error type: failures of the sandbox itself, never of a script (see `ScriptError`).

/// A failure of the sandbox machinery. Script failures are reported in
/// [`RunOutcome::error`](crate::RunOutcome::error) instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The engine could not be created (out of memory, bad configuration).
    #[error("could not start the javascript engine: {0}")]
    Engine(String),
    /// A capability is malformed (bad or duplicate name, bad parameter list).
    #[error("invalid capability: {0}")]
    InvalidCapability(String),
    /// A global could not be set.
    #[error("cannot set global `{name}`: {reason}")]
    InvalidGlobal {
        /// The global's name.
        name: String,
        /// Why it was refused.
        reason: String,
    },
    /// The session's thread could not be started.
    #[error("could not start the sandbox thread: {0}")]
    Thread(#[from] std::io::Error),
    /// The session's thread has ended (it was dropped or its engine failed).
    #[error("the sandbox session has ended")]
    Closed,
}

/// `Result` with [`SandboxError`].
pub type Result<T, E = SandboxError> = std::result::Result<T, E>;
