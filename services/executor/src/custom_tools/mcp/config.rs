//! `[executor.mcp.<server>]`: an MCP server the executor starts over stdio (a program, its
//! arguments, its environment), whose tools CodeAct scripts call as JavaScript functions
//! named `<prefix><tool>`. Every problem is reported at once, each naming its key
//! (`executor.mcp.files.command ...`); what can only be known once the server answers (its
//! tools' names and schemas) is checked when the executor starts ([`super::McpHub::start`]).
use std::collections::BTreeMap;

use serde::Deserialize;

use crate::custom_tools::config::{DEFAULT_TIMEOUT_MS, MAX_RESPONSE_CEILING};
use crate::custom_tools::secret_text::SecretText;

/// One server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program: a path, or a name looked up on the executor's `PATH`.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Its environment, besides `PATH`, `HOME`, `USER`, `LANG`, `LC_ALL`, `TZ` and `TMPDIR`
    /// (taken from the executor's when set); nothing else of the executor's environment is
    /// passed (its `DROIDMESH_SECRET_*` variables in particular). `{secret:ID}` in a value is
    /// replaced by the executor's secret ID when the server starts; a value is never shown
    /// anywhere, and each secret it holds is cut out of the server's answers and stderr.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The server's tools to offer, by the names the server gives; unset: every tool it
    /// lists. A name it does not list stops the executor from starting.
    #[serde(default)]
    pub include_tools: Option<Vec<String>>,
    /// The server's tools to leave out, by the names the server gives.
    #[serde(default)]
    pub exclude_tools: Vec<String>,
    /// Put before each tool's name to make its function's name; unset: `<server>_`.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Longest the server may take to start: the process started, `initialize` answered, its
    /// tools listed.
    #[serde(default = "default_start_timeout_ms")]
    pub start_timeout_ms: u64,
    /// Longest a call may take, starting the server again included. At most
    /// `executor.step_timeout_ms` (a call holds the step's script until it ends); unset:
    /// 10 s, or the step's timeout when that is shorter.
    #[serde(default)]
    pub call_timeout_ms: Option<u64>,
    /// Longest message read from the server (one JSON-RPC line: an answer with its
    /// envelope). A longer one fails the call in progress, and the server is stopped (its
    /// connection cannot be read on) and started again on the next call.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: u64,
    /// Calls one task may make of each of the server's tools (a refused call does not count).
    #[serde(default = "default_max_calls")]
    pub max_calls_per_run: u32,
    /// Times in a row the server is started again after it exits (or is stopped) without a
    /// call answered in between; past that its tools fail until the executor restarts.
    #[serde(default = "default_max_restarts")]
    pub max_restarts: u32,
}

fn default_start_timeout_ms() -> u64 {
    10_000
}

fn default_max_response_bytes() -> u64 {
    1024 * 1024
}

fn default_max_calls() -> u32 {
    50
}

fn default_max_restarts() -> u32 {
    3
}

/// Smallest `max_response_bytes`: the server's first answers (`initialize`, its tool list)
/// must fit.
pub const MIN_RESPONSE_BYTES: u64 = 1024;
/// Largest `start_timeout_ms`.
pub const MAX_START_TIMEOUT_MS: u64 = 300_000;
/// Largest `max_restarts`.
pub const MAX_RESTARTS: u32 = 100;

impl McpServerConfig {
    /// The prefix of the server's function names.
    pub fn prefix(&self, server: &str) -> String {
        self.prefix.clone().unwrap_or_else(|| format!("{server}_"))
    }

    /// The call timeout in effect under a step timeout of `step_timeout_ms`.
    pub fn call_timeout_ms(&self, step_timeout_ms: u64) -> u64 {
        self.call_timeout_ms
            .unwrap_or_else(|| DEFAULT_TIMEOUT_MS.min(step_timeout_ms))
    }
}

/// Every problem with the servers, each naming its key; empty when they are fine. A call may
/// take up to `step_timeout_ms`.
pub fn problems(servers: &BTreeMap<String, McpServerConfig>, step_timeout_ms: u64) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, server) in servers {
        let key = format!("executor.mcp.{name}");
        server_problems(&key, name, server, step_timeout_ms, &mut problems);
    }
    problems
}

fn server_problems(
    key: &str,
    name: &str,
    server: &McpServerConfig,
    step_timeout_ms: u64,
    problems: &mut Vec<String>,
) {
    if server.command.trim().is_empty() {
        problems.push(format!(
            "{key}.command is empty; give the program to start (a path, or a name on PATH)"
        ));
    }
    if server.command.contains('\0') || server.args.iter().any(|a| a.contains('\0')) {
        problems.push(format!(
            "{key}: the command and its args cannot hold a NUL character"
        ));
    }
    for (var, value) in &server.env {
        if var.is_empty() || var.contains(['=', '\0']) {
            problems.push(format!(
                "{key}.env: `{var}` is not an environment variable's name (not empty, no `=` or NUL)"
            ));
        }
        if value.contains('\0') {
            problems.push(format!("{key}.env.{var} cannot hold a NUL character"));
        }
        if let Err(why) = SecretText::parse(value) {
            problems.push(format!("{key}.env.{var} {why}"));
        }
    }
    let prefix = server.prefix(name);
    if let Err(why) = check_prefix(&prefix) {
        let which = if server.prefix.is_some() {
            format!("{key}.prefix")
        } else {
            format!("{key}: the default prefix")
        };
        problems.push(format!(
            "{which} `{prefix}` {why}; set `prefix` to letters, digits and `_`"
        ));
    }
    let include = server.include_tools.as_deref().unwrap_or_default();
    for (list, names) in [
        ("include_tools", include),
        ("exclude_tools", server.exclude_tools.as_slice()),
    ] {
        if names.iter().any(|n| n.trim().is_empty()) {
            problems.push(format!("{key}.{list} has an empty name"));
        }
    }
    if server.include_tools.as_ref().is_some_and(Vec::is_empty) {
        problems.push(format!(
            "{key}.include_tools is empty, so no tool would be offered; leave the server out instead"
        ));
    }
    for both in server.exclude_tools.iter().filter(|n| include.contains(n)) {
        problems.push(format!(
            "{key}.exclude_tools names `{both}`, which include_tools names too; keep it in one of them"
        ));
    }
    if !(10..=MAX_START_TIMEOUT_MS).contains(&server.start_timeout_ms) {
        problems.push(format!(
            "{key}.start_timeout_ms must be between 10 and {MAX_START_TIMEOUT_MS}, got {}",
            server.start_timeout_ms
        ));
    }
    if let Some(ms) = server.call_timeout_ms
        && !(10..=step_timeout_ms).contains(&ms)
    {
        problems.push(format!(
            "{key}.call_timeout_ms must be between 10 and executor.step_timeout_ms ({step_timeout_ms}), got {ms}: a call holds the step's script until it ends"
        ));
    }
    if !(MIN_RESPONSE_BYTES..=MAX_RESPONSE_CEILING).contains(&server.max_response_bytes) {
        problems.push(format!(
            "{key}.max_response_bytes must be between {MIN_RESPONSE_BYTES} and {MAX_RESPONSE_CEILING}, got {}",
            server.max_response_bytes
        ));
    }
    if server.max_calls_per_run == 0 {
        problems.push(format!(
            "{key}.max_calls_per_run must be at least 1, got 0 (leave the tools out instead)"
        ));
    }
    if server.max_restarts > MAX_RESTARTS {
        problems.push(format!(
            "{key}.max_restarts must be at most {MAX_RESTARTS}, got {}",
            server.max_restarts
        ));
    }
}

/// Why `prefix` cannot begin JavaScript identifiers, if it cannot (empty is fine).
fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("starts with a digit, which a JavaScript identifier cannot".into());
    }
    if !prefix
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    {
        return Err("holds characters a JavaScript identifier cannot".into());
    }
    Ok(())
}
