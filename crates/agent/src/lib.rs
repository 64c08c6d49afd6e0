//! What the agents share: the tool registry, prompt templates and parsers for model output.
//!
//! - [`tools`]: the CodeAct device tools as one table; prompts render it with
//!   [`tools::js_signatures`] and the executor builds its sandbox functions from it.
//! - [`prompts`]: the minijinja templates under `prompts/` (embedded, overridable from a folder,
//!   strict about undefined variables) and a typed context per template.
//! - [`parse`]: readers for CodeAct code, Manager tags, Executor actions and structured output.

pub mod parse;
pub mod prompts;
pub mod tools;

mod error;

pub use error::{Error, Result};
