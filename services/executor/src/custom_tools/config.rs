//! `[executor.tools.<name>]`: a tool the operator defines, which CodeAct scripts call as a
//! JavaScript function taking one object of named arguments. It is a webhook (an HTTP request
//! to a fixed URL, through droidmesh's address guard) or a JavaScript function (run in a
//! sandbox of its own); its arguments are checked against a JSON Schema before anything is
//! done. Every problem is reported at once, each naming its key
//! (`executor.tools.weather.webhook.url ...`).
use std::collections::BTreeMap;

use droidmesh_agent::parse::OutputSchema;
use serde::Deserialize;
use serde_json::Value;

use super::headers::HeaderTemplate;

/// One tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// What the tool does, for the model (a sentence or two).
    pub description: String,
    /// The JSON Schema of the argument object: a TOML table, or the schema as JSON text.
    /// Its top level must be `type = "object"`. Unset: a tool without arguments.
    #[serde(default)]
    pub parameters: Option<Value>,
    /// Calls an HTTP endpoint.
    #[serde(default)]
    pub webhook: Option<WebhookConfig>,
    /// A JavaScript function expression, `function (args) { ... }` or `(args) => ...`, run in
    /// a fresh sandbox with the argument object; its value (awaited when a promise) is the
    /// tool's answer.
    #[serde(default)]
    pub js: Option<String>,
    /// Longest a call may take: the webhook's request and response, or the function's run.
    /// At most `executor.step_timeout_ms` (a call holds the step's script until it ends);
    /// unset: 10 s, or the step's timeout when that is shorter.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Calls one task may make (a refused call does not count).
    #[serde(default = "default_max_calls")]
    pub max_calls_per_run: u32,
}

/// A webhook tool's request.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// An http or https URL. The arguments go as a JSON body, or as query parameters for GET.
    pub url: String,
    /// GET, POST, PUT, PATCH or DELETE.
    #[serde(default = "default_method")]
    pub method: String,
    /// Headers sent with every call. `{secret:ID}` in a value is replaced by the executor's
    /// secret ID (`DROIDMESH_SECRET_<ID>` or the file `ID` in `[secrets] dir`), read at each
    /// call; a value is never shown anywhere, and each secret it holds is cut out of the
    /// answer before the model reads it.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Hosts that may be reached although they are (or resolve to) loopback, private,
    /// link-local or metadata addresses: names or IP literals, optionally `:port`, as the
    /// scripter's `http.allow_hosts`. Others are refused before a connection is made.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Largest answer read; a larger one fails the call.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: u64,
}

/// A call's timeout when the tool sets none (or the step's, when shorter).
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

impl ToolConfig {
    /// The call timeout in effect under a step timeout of `step_timeout_ms`.
    pub fn timeout_ms(&self, step_timeout_ms: u64) -> u64 {
        self.timeout_ms
            .unwrap_or_else(|| DEFAULT_TIMEOUT_MS.min(step_timeout_ms))
    }
}

fn default_max_calls() -> u32 {
    50
}

fn default_method() -> String {
    "POST".into()
}

fn default_max_response_bytes() -> u64 {
    1024 * 1024
}

/// Largest `max_response_bytes`: an answer is held in memory and handed to the script.
pub const MAX_RESPONSE_CEILING: u64 = 16 * 1024 * 1024;

/// Names a tool cannot take: the sandbox's own globals and JavaScript's reserved words.
const RESERVED: &[&str] = &[
    "ui_state",
    "console",
    "sleep",
    "globalThis",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "undefined",
    "NaN",
    "Infinity",
    "eval",
    "arguments",
];

/// The methods a webhook may use.
pub const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

/// Every problem with the tools, each naming its key; empty when they are fine. A call may
/// take up to `step_timeout_ms`.
pub fn problems(tools: &BTreeMap<String, ToolConfig>, step_timeout_ms: u64) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, tool) in tools {
        let key = format!("executor.tools.{name}");
        if let Err(why) = check_name(name) {
            problems.push(format!("{key}: the name {why}"));
        }
        if tool.description.trim().is_empty() {
            problems.push(format!(
                "{key}.description is empty; say in a sentence what the tool does"
            ));
        }
        if let Err(why) = parameters(tool.parameters.as_ref()) {
            problems.push(format!("{key}.parameters {why}"));
        }
        if let Some(ms) = tool.timeout_ms
            && !(10..=step_timeout_ms).contains(&ms)
        {
            // A call blocks the step's script, which cannot be stopped until it returns.
            problems.push(format!(
                "{key}.timeout_ms must be between 10 and executor.step_timeout_ms ({step_timeout_ms}), got {ms}: a call holds the step's script until it ends"
            ));
        }
        if tool.max_calls_per_run == 0 {
            problems.push(format!(
                "{key}.max_calls_per_run must be at least 1, got 0 (leave the tool out instead)"
            ));
        }
        match (&tool.webhook, &tool.js) {
            (Some(_), Some(_)) => problems.push(format!(
                "{key} has both `webhook` and `js`; give one of them"
            )),
            (None, None) => problems.push(format!(
                "{key} needs `webhook = {{ url = \"...\" }}` or `js = \"function (args) {{ ... }}\"`"
            )),
            (Some(hook), None) => webhook_problems(&format!("{key}.webhook"), hook, &mut problems),
            (None, Some(js)) => {
                if let Err(why) = super::js::check(js) {
                    problems.push(format!("{key}.js {why}"));
                }
            }
        }
    }
    problems
}

/// Why `name` cannot name a tool, if it cannot.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let identifier = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if !identifier {
        return Err(format!(
            "`{name}` is not a JavaScript identifier (letters, digits, `_` and `$`, not starting with a digit)"
        ));
    }
    if let Some(tool) = droidmesh_agent::tools::find(name) {
        return Err(format!(
            "`{name}` is taken by the device tool `{}`; choose another",
            tool.name
        ));
    }
    if RESERVED.contains(&name) {
        return Err(format!(
            "`{name}` is reserved in the sandbox's JavaScript; choose another"
        ));
    }
    Ok(())
}

/// The argument schema as written (`None`: no arguments) and compiled; the error says what is
/// wrong, worded to follow the key.
pub fn parameters(written: Option<&Value>) -> Result<(Value, OutputSchema), String> {
    let schema = match written {
        None => serde_json::json!({"type": "object", "properties": {}}),
        Some(Value::String(text)) => serde_json::from_str(text).map_err(|e| {
            format!("is not JSON text: {e}; write the schema as JSON or as a table")
        })?,
        Some(other) => other.clone(),
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!(
            "must be the JSON Schema of an object (`type = \"object\"` with `properties`), got {}",
            droidmesh_proto::text::shorten(&schema.to_string(), 120)
        ));
    }
    let compiled = OutputSchema::new(&schema).map_err(|e| format!("does not compile: {e}"))?;
    Ok((schema, compiled))
}

fn webhook_problems(key: &str, hook: &WebhookConfig, problems: &mut Vec<String>) {
    match reqwest::Url::parse(hook.url.trim()) {
        Err(e) => problems.push(format!(
            "{key}.url must be an absolute http or https URL, got `{}`: {e}",
            droidmesh_proto::text::shorten(&hook.url, 200)
        )),
        Ok(url) => {
            if let Err(e) = droidmesh_netguard::check_scheme(&url) {
                problems.push(format!("{key}.url: {e}"));
            }
        }
    }
    if !METHODS.contains(&hook.method.to_ascii_uppercase().as_str()) {
        problems.push(format!(
            "{key}.method must be one of {}, got `{}`",
            METHODS.join(", "),
            hook.method
        ));
    }
    for (name, value) in &hook.headers {
        if let Err(why) = HeaderTemplate::parse(name, value) {
            problems.push(format!("{key}.headers.{name} {why}"));
        }
    }
    if let Err(e) = droidmesh_netguard::AllowList::new(&hook.allow_hosts) {
        problems.push(format!("{key}.{e}"));
    }
    if !(1..=MAX_RESPONSE_CEILING).contains(&hook.max_response_bytes) {
        problems.push(format!(
            "{key}.max_response_bytes must be between 1 and {MAX_RESPONSE_CEILING}, got {}",
            hook.max_response_bytes
        ));
    }
}
