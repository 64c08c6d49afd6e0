//! Parsers for model replies: tolerant of real habits, never panicking, errors worded for the
//! model that has to fix its reply.

mod code;
mod echo;
mod executor;
pub mod json;
mod manager;
mod plan;
mod structured;
mod tags;

pub use code::{CodeExtraction, FinalMessage, extract_code, final_message};
pub use echo::{CodeChoice, EchoText, IgnoredBlock, IgnoredWhy, PromptEcho, choose_code};
pub use executor::{ExecutorAction, ExecutorError, parse_executor};
pub use manager::{Accomplished, HumanHelp, ManagerError, ManagerOutput, parse_manager};
pub use plan::{Subgoal, SubgoalKind, parse_plan};
pub use structured::{
    OutputSchema, StructuredError, Violation, structured_output, validate_schema,
};
