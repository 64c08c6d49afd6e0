//! The device tools a CodeAct script may call, as one data table shared by prompts and sandbox.
//!
//! The prompt shows [`js_signatures`] of the table; the executor builds its sandbox host
//! functions from the same [`ToolSpec`]s (same names, same parameter order and types), so what
//! the model is told and what the sandbox accepts cannot drift apart. Reasoning mode's executor
//! writes one action as JSON (`{"action": "tap", "index": 3}`); its action names and argument
//! names are the tool names and parameter names of this table ([`json_actions`],
//! [`ToolSpec::args_in_order`]).

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

/// One device tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolSpec {
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

const fn req(name: &'static str, ty: ParamType, description: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        ty,
        required: true,
        description,
    }
}

const fn opt(name: &'static str, ty: ParamType, description: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        ty,
        required: false,
        description,
    }
}

fn table() -> Vec<ToolSpec> {
    use ParamType::{Boolean, Integer, String as Text};
    let index = req("index", Integer, "the element's index in ui_state");
    let tool = |name, params, returns, description, aliases| ToolSpec {
        name,
        params,
        returns,
        description,
        aliases,
    };
    let stroke = |verb: &'static str| {
        vec![
            req("x1", Integer, "start x in screen pixels"),
            req("y1", Integer, "start y in screen pixels"),
            req("x2", Integer, "end x in screen pixels"),
            req("y2", Integer, "end y in screen pixels"),
            opt("duration_ms", Integer, verb),
        ]
    };
    vec![
        tool(
            "tap",
            vec![index.clone()],
            "string",
            "Tap the centre of an element. Returns what was tapped.",
            &["click", "tap_by_index", "click_by_index"],
        ),
        tool(
            "tap_at",
            vec![
                req("x", Integer, "x in screen pixels"),
                req("y", Integer, "y in screen pixels"),
            ],
            "string",
            "Tap a point on the screen, for targets that have no element of their own.",
            &["click_at", "tap_coordinates"],
        ),
        tool(
            "long_press",
            vec![index.clone()],
            "string",
            "Press and hold an element for about a second (context menus, selection).",
            &["long_click", "long_tap"],
        ),
        tool(
            "type_text",
            vec![
                req("text", Text, "the text to type"),
                opt(
                    "index",
                    Integer,
                    "element to focus first; omitted types into the focused field",
                ),
                opt(
                    "clear",
                    Boolean,
                    "erase the field's current text first (default false)",
                ),
            ],
            "string",
            "Type text into a text field.",
            &["type", "input_text", "enter_text"],
        ),
        tool(
            "press_key",
            vec![req(
                "key",
                Text,
                "one of back, home, enter, delete, tab, app_switch, menu, search, volume_up, \
                 volume_down, power, dpad_up, dpad_down, dpad_left, dpad_right, escape",
            )],
            "string",
            "Press a hardware or keyboard key.",
            &["key", "press", "keyevent"],
        ),
        tool(
            "back",
            Vec::new(),
            "string",
            "Go back one screen (the system back key).",
            &["go_back"],
        ),
        tool(
            "home",
            Vec::new(),
            "string",
            "Go to the home screen.",
            &["go_home"],
        ),
        tool(
            "swipe",
            stroke("how long the gesture lasts (default 300)"),
            "string",
            "Swipe from one point to another. Swipe up (y1 > y2) to scroll a list down.",
            &["scroll"],
        ),
        tool(
            "drag",
            stroke("how long the drag lasts (default 1500)"),
            "string",
            "Press at the start point, move slowly to the end point and release \
             (moving icons, sliders).",
            &["drag_and_drop"],
        ),
        tool(
            "wait",
            vec![req("ms", Integer, "milliseconds, at most 10000")],
            "void",
            "Pause, for screens that are still loading.",
            &["sleep"],
        ),
        tool(
            "open_app",
            vec![req(
                "name_or_package",
                Text,
                "a launcher label such as \"Settings\" or a package such as \"com.android.settings\"",
            )],
            "string",
            "Launch an app, or bring it to the front.",
            &["start_app", "launch_app", "open"],
        ),
        tool(
            "list_packages",
            Vec::new(),
            "Array<{ package: string, label: string }>",
            "List the apps installed on the device.",
            &["list_apps"],
        ),
        tool(
            "remember",
            vec![req("note", Text, "one fact worth keeping")],
            "void",
            "Keep a note; every later step shows you your notes.",
            &["add_memory", "note"],
        ),
        tool(
            "complete",
            vec![
                req("success", Boolean, "whether the goal was reached"),
                req(
                    "reason",
                    Text,
                    "the final answer, or why the goal cannot be reached",
                ),
            ],
            "void",
            "End the task. Call it once, as the last statement of your final step.",
            &["finish", "done"],
        ),
        tool(
            "request_human_help",
            vec![req(
                "question",
                Text,
                "what you need a person to do or answer",
            )],
            "string",
            "Ask a person for help (a CAPTCHA, a login code, a choice only the user can make). \
             The task pauses until they reply; returns their reply.",
            &["ask_human", "human_help"],
        ),
        tool(
            "type_secret",
            vec![
                req("secret_id", Text, "one of the allowed secret ids"),
                opt(
                    "index",
                    Integer,
                    "element to focus first; omitted types into the focused field",
                ),
            ],
            "string",
            "Type a stored secret (a password, a card number) without ever seeing its value.",
            &["input_secret"],
        ),
    ]
}

static TOOLS: LazyLock<Vec<ToolSpec>> = LazyLock::new(table);

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

#[cfg(test)]
#[path = "tools_tests.rs"]
mod tests;
