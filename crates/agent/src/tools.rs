//! The device tools a CodeAct script may call, as one data table shared by prompts and sandbox.
//!
//! The prompt shows [`js_signatures`] of the table; the executor builds its sandbox host
//! functions from the same [`ToolSpec`]s (same names, same parameter order and types), so what
//! the model is told and what the sandbox accepts cannot drift apart. Reasoning mode's executor
//! writes one action as JSON (`{"action": "tap", "index": 3}`); its action names and argument
//! names are the tool names and parameter names of this table ([`json_actions`],
//! [`ToolSpec::args_in_order`]). Each entry carries its [`Tool`], the enum executors dispatch
//! on, so a name is resolved once ([`find`]) and never matched as a string again.
//!
//! Tools the operator defines in config are not in the table (their names are known only at
//! start): [`custom`] renders them for the CodeAct prompt from their JSON Schemas.

use std::{fmt::Write as _, sync::LazyLock};

use serde::Serialize;
use serde_json::{Map, Value};

/// The parameter types of the sandbox, so that what the prompt declares, what executor JSON
/// is checked against and what the sandbox accepts are one type system (`Integer` refuses
/// `2.7` everywhere).
pub use droidmesh_sandbox::ParamType;

/// One parameter of a tool, in call order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParamSpec {
    /// The parameter's name (a JavaScript identifier; also the JSON key in executor actions).
    pub name: &'static str,
    /// The accepted type.
    pub ty: ParamType,
    /// Whether a call must pass it; optional parameters come after required ones.
    pub required: bool,
    /// One line for the prompt.
    pub description: &'static str,
}

/// Every device tool, as a value: what executors dispatch on. Its name is the sandbox
/// function's name and the `action` of executor JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    /// `tap(index)`
    Tap,
    /// `tap_at(x, y)`
    TapAt,
    /// `long_press(index)`
    LongPress,
    /// `type_text(text, index?, clear?)`
    TypeText,
    /// `press_key(key)`
    PressKey,
    /// `back()`
    Back,
    /// `home()`
    Home,
    /// `swipe(x1, y1, x2, y2, duration_ms?)`
    Swipe,
    /// `drag(x1, y1, x2, y2, duration_ms?)`
    Drag,
    /// `wait(ms)`
    Wait,
    /// `open_app(name_or_package)`
    OpenApp,
    /// `list_packages()`
    ListPackages,
    /// `remember(note)`
    Remember,
    /// `complete(success, reason)`
    Complete,
    /// `request_human_help(...)`
    RequestHumanHelp,
    /// `type_secret(secret_id, index?)`
    TypeSecret,
}

impl Tool {
    /// Every tool, in declaration order (the order prompts list them).
    pub const ALL: [Tool; 16] = [
        Tool::Tap,
        Tool::TapAt,
        Tool::LongPress,
        Tool::TypeText,
        Tool::PressKey,
        Tool::Back,
        Tool::Home,
        Tool::Swipe,
        Tool::Drag,
        Tool::Wait,
        Tool::OpenApp,
        Tool::ListPackages,
        Tool::Remember,
        Tool::Complete,
        Tool::RequestHumanHelp,
        Tool::TypeSecret,
    ];

    /// The tool's name: the sandbox function and the executor JSON `action`.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Tap => "tap",
            Tool::TapAt => "tap_at",
            Tool::LongPress => "long_press",
            Tool::TypeText => "type_text",
            Tool::PressKey => "press_key",
            Tool::Back => "back",
            Tool::Home => "home",
            Tool::Swipe => "swipe",
            Tool::Drag => "drag",
            Tool::Wait => "wait",
            Tool::OpenApp => "open_app",
            Tool::ListPackages => "list_packages",
            Tool::Remember => "remember",
            Tool::Complete => "complete",
            Tool::RequestHumanHelp => "request_human_help",
            Tool::TypeSecret => "type_secret",
        }
    }

    /// The tool's table entry.
    pub fn spec(self) -> &'static ToolSpec {
        // The table is built from `ALL`, whose order is the declaration order (a test checks).
        &device_tools()[self as usize]
    }

    /// Whether reasoning mode's executor may choose it (see [`ATOMIC_ACTIONS`]).
    pub fn is_atomic(self) -> bool {
        ATOMIC_ACTIONS.contains(&self.name())
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One device tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolSpec {
    /// Which tool this is.
    pub tool: Tool,
    /// The global function name in the sandbox and the `action` name in executor JSON.
    pub name: &'static str,
    /// Parameters in call order.
    pub params: Vec<ParamSpec>,
    /// What the call returns, as a TypeScript type (`string`, `void`, ...).
    pub returns: &'static str,
    /// One or two sentences for the prompt.
    pub description: &'static str,
    /// Other names models use for this action (`click` for `tap`); accepted by [`find`].
    pub aliases: &'static [&'static str],
}

/// Why executor arguments do not fit a tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// No tool has this name or alias.
    #[error("unknown tool `{name}`; expected one of: {known}")]
    Unknown {
        /// The name as given.
        name: String,
        /// The known names, comma separated.
        known: String,
    },
    /// A required argument is absent or null.
    #[error("{signature}: missing required argument `{param}`")]
    Missing {
        /// The tool's signature.
        signature: String,
        /// The parameter.
        param: &'static str,
    },
    /// An argument has the wrong JSON type.
    #[error("{signature}: argument `{param}` must be {expected}, found {found}")]
    WrongType {
        /// The tool's signature.
        signature: String,
        /// The parameter.
        param: &'static str,
        /// The expected type with its article ("an integer").
        expected: &'static str,
        /// What was found: its JSON type and, when short, its value (`number 2.7`).
        found: String,
    },
    /// An argument the tool does not take.
    #[error("{signature}: unexpected argument `{arg}`")]
    Unexpected {
        /// The tool's signature.
        signature: String,
        /// The argument's name.
        arg: String,
    },
}

/// Keys `press_key` accepts (the device service's `Key` enum, lower case).
pub const KEYS: &[&str] = &[
    "back",
    "home",
    "enter",
    "delete",
    "tab",
    "app_switch",
    "menu",
    "search",
    "volume_up",
    "volume_down",
    "power",
    "dpad_up",
    "dpad_down",
    "dpad_left",
    "dpad_right",
    "escape",
];

/// The tools reasoning mode's executor may choose from: one physical action each, no
/// bookkeeping (`remember`, `complete`) and no questions.
pub const ATOMIC_ACTIONS: &[&str] = &[
    "tap",
    "tap_at",
    "long_press",
    "type_text",
    "press_key",
    "back",
    "home",
    "swipe",
    "drag",
    "wait",
    "open_app",
    "type_secret",
];

static TOOLS: LazyLock<Vec<ToolSpec>> =
    LazyLock::new(|| Tool::ALL.iter().map(|&tool| table::spec(tool)).collect());

/// Every device tool, in the order prompts list them.
pub fn device_tools() -> &'static [ToolSpec] {
    &TOOLS
}

/// The tool with this name or alias (ASCII case-insensitive).
pub fn find(name: &str) -> Option<&'static ToolSpec> {
    let name = name.trim();
    let tools = device_tools();
    tools
        .iter()
        .find(|t| t.name.eq_ignore_ascii_case(name))
        .or_else(|| {
            tools
                .iter()
                .find(|t| t.aliases.iter().any(|a| a.eq_ignore_ascii_case(name)))
        })
}

/// The tools named in an allow list (a persona), in table order; an empty list grants all.
pub fn select<S: AsRef<str>>(allow: &[S]) -> Result<Vec<ToolSpec>, ToolError> {
    if allow.is_empty() {
        return Ok(device_tools().to_vec());
    }
    let mut names = Vec::with_capacity(allow.len());
    for name in allow {
        let name = name.as_ref();
        match find(name) {
            Some(tool) => names.push(tool.name),
            None => return Err(unknown(name)),
        }
    }
    Ok(device_tools()
        .iter()
        .filter(|t| names.contains(&t.name))
        .cloned()
        .collect())
}

fn unknown(name: &str) -> ToolError {
    let known: Vec<&str> = device_tools().iter().map(|t| t.name).collect();
    ToolError::Unknown {
        name: name.to_owned(),
        known: known.join(", "),
    }
}

impl ToolSpec {
    /// The call signature, e.g. `type_text(text: string, index?: number, clear?: boolean): string`.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| {
                let optional = if p.required { "" } else { "?" };
                format!("{}{optional}: {}", p.name, p.ty.js_name())
            })
            .collect();
        format!("{}({}): {}", self.name, params.join(", "), self.returns)
    }

    /// Checks executor arguments (named, as in `{"action": "tap", "index": 3}`) and returns one
    /// value per parameter in call order, `null` for an omitted optional one.
    pub fn args_in_order(&self, args: &Map<String, Value>) -> Result<Vec<Value>, ToolError> {
        if let Some(extra) = args
            .keys()
            .find(|k| !self.params.iter().any(|p| p.name == k.as_str()))
        {
            return Err(ToolError::Unexpected {
                signature: self.signature(),
                arg: extra.clone(),
            });
        }
        let mut ordered = Vec::with_capacity(self.params.len());
        for param in &self.params {
            match args.get(param.name) {
                None | Some(Value::Null) if param.required => {
                    return Err(ToolError::Missing {
                        signature: self.signature(),
                        param: param.name,
                    });
                }
                None | Some(Value::Null) => ordered.push(Value::Null),
                Some(value) if param.ty.accepts(value) => ordered.push(value.clone()),
                Some(value) => {
                    return Err(ToolError::WrongType {
                        signature: self.signature(),
                        param: param.name,
                        expected: param.ty.expected(),
                        found: describe(value),
                    });
                }
            }
        }
        Ok(ordered)
    }
}

/// The name of a JSON value's type, for error messages.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value as an error message shows it: its type, and the value itself when it is short
/// (`number 2.7`, `string "3"`).
fn describe(value: &Value) -> String {
    let text = value.to_string();
    match value {
        Value::Null => "null".to_owned(),
        Value::Array(_) | Value::Object(_) => json_type(value).to_owned(),
        _ if text.chars().count() > 40 => json_type(value).to_owned(),
        _ => format!("{} {text}", json_type(value)),
    }
}

/// Renders tools as JavaScript signatures, one per line with its description, described
/// parameters indented below:
///
/// ```text
/// tap(index: number): string — Tap the centre of an element. Returns what was tapped.
///     index: the element's index in ui_state
/// ```
pub fn js_signatures(tools: &[ToolSpec]) -> String {
    let mut out = String::new();
    for tool in tools {
        let _ = writeln!(out, "{} — {}", tool.signature(), tool.description);
        for param in &tool.params {
            let _ = writeln!(out, "    {}: {}", param.name, param.description);
        }
    }
    out
}

/// Renders tools as the JSON actions of reasoning mode's executor, one per line:
///
/// ```text
/// {"action": "tap", "index": <number>} — Tap the centre of an element. Returns what was tapped.
/// ```
///
/// Optional arguments are marked with `?` after their name.
pub fn json_actions(tools: &[ToolSpec]) -> String {
    let mut out = String::new();
    for tool in tools {
        let _ = write!(out, "{{\"action\": \"{}\"", tool.name);
        for param in &tool.params {
            let optional = if param.required { "" } else { "?" };
            let _ = write!(
                out,
                ", \"{}\"{optional}: <{}>",
                param.name,
                param.ty.js_name()
            );
        }
        let _ = writeln!(out, "}} — {}", tool.description);
    }
    out
}

pub mod custom;
mod table;

pub use custom::{CustomToolSpec, custom_signatures};

#[cfg(test)]
#[path = "tools_tests.rs"]
mod tests;
