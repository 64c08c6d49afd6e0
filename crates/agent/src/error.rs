//! The crate's error type: one variant per area, each with its own typed error.

use crate::{
    parse::{ExecutorError, ManagerError, StructuredError},
    prompts::PromptError,
    tools::ToolError,
};

/// Anything this crate can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading or rendering a prompt template.
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// A tool name or tool arguments.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// A Manager reply.
    #[error(transparent)]
    Manager(#[from] ManagerError),
    /// An Executor reply.
    #[error(transparent)]
    Executor(#[from] ExecutorError),
    /// Structured output.
    #[error(transparent)]
    Structured(#[from] StructuredError),
}

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
