//! What the agents share: the tool registry, prompt templates and parsers for model output.
//!
//! - [`tools`]: the device tools as one table keyed by [`tools::Tool`]; prompts render it with
//!   [`tools::js_signatures`] (CodeAct) and [`tools::json_actions`] (reasoning mode), and the
//!   executor builds its sandbox functions and checks JSON actions against it.
//! - [`prompts`]: the minijinja templates under `prompts/` (embedded, overridable from a folder,
//!   strict about undefined variables) and a typed context per template.
//! - [`parse`]: readers for CodeAct code, Manager tags, Executor actions and structured output.
//! - [`budget`]: token estimates and the history that fits a model's context window.
//! - [`steer`]: steering a running task, the same in both modes: the messages a user sends,
//!   what each does, and the caps on notes, memory and history.
//! - [`loops`]: loop detection, the same in both modes: the same action on an unchanged
//!   screen, repeated.

pub mod budget;
pub mod loops;
pub mod parse;
pub mod prompts;
pub mod steer;
pub mod tools;

mod error;

pub use error::{Error, Result};
