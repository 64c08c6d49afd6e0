//! The agents' prompt templates: embedded, allow-listed, overridable from a folder, strict.
//!
//! The templates live in the repository's `prompts/` folder, one folder per agent, and are
//! compiled into the binary. [`PromptSet::with_override_dir`] replaces any of them with a file
//! of the same relative path from a folder (other files there are ignored). Every template is
//! compiled and checked when the set is built: a syntax error, or a variable its typed context
//! does not provide, fails the load with the file's name. Rendering uses minijinja's strict
//! undefined behaviour, so a missing value is an error, never an empty string.
//!
//! Templates are rendered with `trim_blocks` and `lstrip_blocks`, no auto-escaping, and two
//! extra filters: `quote`, which writes a string as a JSON string literal (one line, quotes and
//! newlines escaped), and `ui_lines`, which writes a screen's elements one per line (see
//! `screen::ui_lines` for the format).

mod context;
mod screen;

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
};

use minijinja::{
    AutoEscape, Environment, UndefinedBehavior,
    syntax::SyntaxConfig,
    value::{Serde, Value},
};
use serde::Serialize;

pub use context::{
    ActionRecord, CodeActStep, CodeActSystem, CodeActUser, ExecutorSystem, ManagerSystem,
    PhoneState, Screen, ScripterFile, ScripterSystem, ScripterUser, StructuredOutputSystem,
    TextManipulatorErrorCorrection, TextManipulatorSystem, UiElement,
};
pub use context::{ConversationTurn, ProducedFile};
pub use screen::screen;

/// A template that can be rendered, with the relative path it has under `prompts/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PromptName {
    /// `codeact/system.jinja`
    CodeActSystem,
    /// `codeact/user.jinja`
    CodeActUser,
    /// `manager/system.jinja`
    ManagerSystem,
    /// `executor/system.jinja`
    ExecutorSystem,
    /// `scripter/system.jinja`
    ScripterSystem,
    /// `scripter/user.jinja`
    ScripterUser,
    /// `text_manipulator/system.jinja`
    TextManipulatorSystem,
    /// `text_manipulator/error_correction.jinja`
    TextManipulatorErrorCorrection,
    /// `structured_output/system.jinja`
    StructuredOutputSystem,
}

impl PromptName {
    /// Every renderable template.
    pub const ALL: [PromptName; 9] = [
        PromptName::CodeActSystem,
        PromptName::CodeActUser,
        PromptName::ManagerSystem,
        PromptName::ExecutorSystem,
        PromptName::ScripterSystem,
        PromptName::ScripterUser,
        PromptName::TextManipulatorSystem,
        PromptName::TextManipulatorErrorCorrection,
        PromptName::StructuredOutputSystem,
    ];

    /// The template's path relative to `prompts/`.
    pub fn path(self) -> &'static str {
        match self {
            PromptName::CodeActSystem => "codeact/system.jinja",
            PromptName::CodeActUser => "codeact/user.jinja",
            PromptName::ManagerSystem => "manager/system.jinja",
            PromptName::ExecutorSystem => "executor/system.jinja",
            PromptName::ScripterSystem => "scripter/system.jinja",
            PromptName::ScripterUser => "scripter/user.jinja",
            PromptName::TextManipulatorSystem => "text_manipulator/system.jinja",
            PromptName::TextManipulatorErrorCorrection => "text_manipulator/error_correction.jinja",
            PromptName::StructuredOutputSystem => "structured_output/system.jinja",
        }
    }
}

/// A context type bound to its template.
pub trait Prompt: Serialize {
    /// The template this context renders.
    const NAME: PromptName;
}

/// Macro files the templates import; their variables come from macro arguments only.
const PARTIALS: &[&str] = &["shared/macros.jinja"];

/// Every template compiled into the binary: the allow list of names.
const EMBEDDED: &[(&str, &str)] = &[
    (
        "codeact/system.jinja",
        include_str!("../../../../prompts/codeact/system.jinja"),
    ),
    (
        "codeact/user.jinja",
        include_str!("../../../../prompts/codeact/user.jinja"),
    ),
    (
        "manager/system.jinja",
        include_str!("../../../../prompts/manager/system.jinja"),
    ),
    (
        "executor/system.jinja",
        include_str!("../../../../prompts/executor/system.jinja"),
    ),
    (
        "scripter/system.jinja",
        include_str!("../../../../prompts/scripter/system.jinja"),
    ),
    (
        "scripter/user.jinja",
        include_str!("../../../../prompts/scripter/user.jinja"),
    ),
    (
        "text_manipulator/system.jinja",
        include_str!("../../../../prompts/text_manipulator/system.jinja"),
    ),
    (
        "text_manipulator/error_correction.jinja",
        include_str!("../../../../prompts/text_manipulator/error_correction.jinja"),
    ),
    (
        "structured_output/system.jinja",
        include_str!("../../../../prompts/structured_output/system.jinja"),
    ),
    (
        "shared/macros.jinja",
        include_str!("../../../../prompts/shared/macros.jinja"),
    ),
];

/// Why templates could not be loaded or rendered.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// The override folder is missing or unreadable.
    #[error("cannot read prompt override folder {}: {source}", path.display())]
    OverrideDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// An override file exists but cannot be read.
    #[error("cannot read prompt template {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A template does not compile.
    #[error("prompt template {file} does not compile: {message}")]
    Syntax {
        /// The file (`embedded:<path>` for a built-in template).
        file: String,
        /// The compiler's message, with the line.
        message: String,
    },
    /// A template uses variables its context does not provide.
    #[error("prompt template {file} uses undefined variables: {names}; expected only: {expected}")]
    UnknownVariables {
        /// The file.
        file: String,
        /// The unknown names, comma separated.
        names: String,
        /// The names the context provides.
        expected: String,
    },
    /// Rendering failed (an undefined value, a wrong type, a failing filter).
    #[error("rendering prompt {name} failed: {message}")]
    Render {
        /// The template's path.
        name: &'static str,
        /// minijinja's message, with the line.
        message: String,
    },
}

/// A loaded, checked set of prompt templates.
#[derive(Debug)]
pub struct PromptSet {
    env: Environment<'static>,
    overridden: Vec<String>,
}

impl PromptSet {
    /// The templates compiled into the binary.
    pub fn embedded() -> Result<Self, PromptError> {
        Self::load(None)
    }

    /// The embedded templates, each replaced by the file of the same relative path in `dir`
    /// when there is one. Files in `dir` that are not template names are ignored.
    pub fn with_override_dir(dir: impl AsRef<Path>) -> Result<Self, PromptError> {
        Self::load(Some(dir.as_ref()))
    }

    /// Relative paths of the templates taken from the override folder.
    pub fn overridden(&self) -> &[String] {
        &self.overridden
    }

    /// Renders the template bound to the context's type.
    pub fn render<P: Prompt>(&self, context: &P) -> Result<String, PromptError> {
        let name = P::NAME.path();
        let fail = |e: minijinja::Error| PromptError::Render {
            name,
            message: describe(&e),
        };
        let template = self.env.get_template(name).map_err(fail)?;
        template.render(Value::from(Serde(context))).map_err(fail)
    }

    fn load(dir: Option<&Path>) -> Result<Self, PromptError> {
        if let Some(dir) = dir {
            std::fs::read_dir(dir).map_err(|source| PromptError::OverrideDir {
                path: dir.to_owned(),
                source,
            })?;
        }
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| syntax_error("(syntax configuration)", &e))?;
        env.set_syntax(syntax);
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_auto_escape_callback(|_| AutoEscape::None);
        env.add_filter("quote", quote);
        env.add_filter("ui_lines", screen::ui_lines);
        let mut overridden = Vec::new();
        let mut files = Vec::with_capacity(EMBEDDED.len());
        for &(name, source) in EMBEDDED {
            let path = dir.map(|d| d.join(name)).filter(|p| p.is_file());
            let file = match &path {
                Some(path) => {
                    let text =
                        std::fs::read_to_string(path).map_err(|source| PromptError::Read {
                            path: path.clone(),
                            source,
                        })?;
                    let file = path.display().to_string();
                    env.add_template_owned(name, text)
                        .map_err(|e| syntax_error(&file, &e))?;
                    overridden.push(name.to_owned());
                    file
                }
                None => {
                    let file = format!("embedded:{name}");
                    env.add_template(name, source)
                        .map_err(|e| syntax_error(&file, &e))?;
                    file
                }
            };
            files.push((name, file));
        }
        let set = Self { env, overridden };
        set.check_variables(&files)?;
        Ok(set)
    }

    /// Refuses templates that name variables their context does not provide.
    fn check_variables(&self, files: &[(&str, String)]) -> Result<(), PromptError> {
        let globals: HashSet<String> = self.env.globals().map(|(k, _)| k.to_owned()).collect();
        for (name, file) in files {
            let mut expected: Vec<String> = match PromptName::ALL.iter().find(|p| p.path() == *name)
            {
                Some(prompt) => context::context_fields(*prompt),
                None if PARTIALS.contains(name) => Vec::new(),
                None => continue,
            };
            let template = self
                .env
                .get_template(name)
                .map_err(|e| syntax_error(file, &e))?;
            let mut unknown: Vec<String> = template
                .undeclared_variables(false)
                .into_iter()
                .filter(|v| !globals.contains(v) && !expected.contains(v))
                .collect();
            if !unknown.is_empty() {
                unknown.sort();
                expected.sort();
                return Err(PromptError::UnknownVariables {
                    file: file.clone(),
                    names: unknown.join(", "),
                    expected: if expected.is_empty() {
                        "macro arguments".to_owned()
                    } else {
                        expected.join(", ")
                    },
                });
            }
        }
        Ok(())
    }
}

fn syntax_error(file: &str, e: &minijinja::Error) -> PromptError {
    PromptError::Syntax {
        file: file.to_owned(),
        message: describe(e),
    }
}

/// minijinja's message with its detail and location, on one line.
fn describe(e: &minijinja::Error) -> String {
    let mut message = e.kind().to_string();
    if let Some(detail) = e.detail() {
        message.push_str(": ");
        message.push_str(detail);
    }
    if let (Some(name), Some(line)) = (e.name(), e.line()) {
        message.push_str(&format!(" (at {name} line {line})"));
    }
    message
}

/// Longest handoff context shown in a prompt, in characters.
pub const HANDOFF_CONTEXT_CHARS: usize = 4_000;

/// A handoff context as a prompt shows it: pretty JSON, cut at [`HANDOFF_CONTEXT_CHARS`] with
/// a note saying so; `None` when there is nothing to show.
pub fn handoff_text(context: &serde_json::Value) -> Option<String> {
    let empty = match context {
        serde_json::Value::Null => true,
        serde_json::Value::Object(m) => m.is_empty(),
        _ => false,
    };
    if empty {
        return None;
    }
    let text = serde_json::to_string_pretty(context).unwrap_or_else(|_| context.to_string());
    Some(droidmesh_proto::text::shorten_noting(
        &text,
        HANDOFF_CONTEXT_CHARS,
    ))
}

/// The `quote` filter: a string as a JSON string literal.
fn quote(value: &str) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| format!("\"{value}\""))
}
