//! Tools the operator defines in config (`[executor.tools.<name>]`, [`config`]), which CodeAct
//! scripts call as JavaScript functions next to the device tools: a webhook ([`webhook`]), a
//! JavaScript function ([`js`]), or a tool of an MCP server the executor starts over stdio
//! (`[executor.mcp.<server>]`, [`mcp`]). Each takes one object of named arguments, checked
//! against the tool's JSON Schema before anything is done; an argument that does not fit, a
//! refused address, a failed call or a spent call budget is thrown to the script as the
//! function's error. The prompt shows each tool's signature, read from its schema
//! ([`droidmesh_agent::tools::custom`]); [`crate::sandbox_tools`] reports each call as a
//! ToolCall and a ToolResult event around an `execute_tool {name}` span.
//!
//! Built once per executor ([`CustomTools::start`]: the MCP servers are started then); a
//! task's tool list (`CodeActStart.tools`) may name these tools beside the device tools
//! ([`CustomTools::select`]).
pub mod config;
mod headers;
pub mod js;
pub mod mcp;
mod secret_text;
pub mod webhook;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use droidmesh_agent::parse::OutputSchema;
use droidmesh_agent::tools::{self as agent_tools, CustomToolSpec, ToolError, ToolSpec};
use droidmesh_proto::text::shorten;
use serde_json::Value;

pub use config::ToolConfig;
pub use mcp::McpServerConfig;

use crate::secrets::Secrets;
use mcp::{McpHub, McpTool};
use webhook::Webhook;

/// Most schema violations one error lists.
const VIOLATIONS_SHOWN: usize = 5;
/// Most characters of an answer a call's summary shows.
const ANSWER_SHOWN: usize = 200;

/// What a tool does when called.
enum Kind {
    Webhook(Webhook),
    Js(String),
    Mcp(McpTool),
}

/// One operator-defined tool, ready to call.
pub struct CustomTool {
    spec: CustomToolSpec,
    schema: OutputSchema,
    kind: Kind,
    timeout: Duration,
    max_calls: u32,
    /// The executor's secrets, for a webhook's headers.
    secrets: Secrets,
}

impl std::fmt::Debug for CustomTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomTool")
            .field("name", &self.spec.name)
            .field("type", &self.tool_type())
            .finish_non_exhaustive()
    }
}

impl CustomTool {
    /// The sandbox function's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// How the prompt shows it.
    pub fn spec(&self) -> &CustomToolSpec {
        &self.spec
    }

    /// The GenAI `gen_ai.tool.type`: a webhook or an MCP server's tool is an `extension` (an
    /// agent-side call to something outside), a JavaScript function a `function`.
    pub fn tool_type(&self) -> &'static str {
        match self.kind {
            Kind::Webhook(_) | Kind::Mcp(_) => "extension",
            Kind::Js(_) => "function",
        }
    }

    /// Calls one task may make.
    pub fn max_calls(&self) -> u32 {
        self.max_calls
    }

    /// Checks `args` against the tool's schema: what is wrong, for the model.
    pub fn check(&self, args: &Value) -> Result<(), String> {
        let violations = self.schema.violations(args);
        if violations.is_empty() {
            return Ok(());
        }
        let mut shown: Vec<String> = violations
            .iter()
            .take(VIOLATIONS_SHOWN)
            .map(|v| {
                if v.path.is_empty() {
                    v.message.clone()
                } else {
                    format!("at {}: {}", v.path, v.message)
                }
            })
            .collect();
        if violations.len() > VIOLATIONS_SHOWN {
            shown.push(format!("and {} more", violations.len() - VIOLATIONS_SHOWN));
        }
        Err(format!(
            "the arguments do not fit the tool's schema: {}; call it as {}",
            shown.join("; "),
            self.spec.signature()
        ))
    }

    /// Runs one call with checked `args`: its value and a one-line summary for the user.
    pub async fn run(&self, args: &Value) -> Result<(Value, String), String> {
        match &self.kind {
            Kind::Webhook(hook) => {
                let answer = hook.call(args, self.timeout, &self.secrets).await?;
                let summary = format!(
                    "{}: {}",
                    answer.summary,
                    shorten(&answer.value.to_string(), ANSWER_SHOWN)
                );
                Ok((answer.value, summary))
            }
            Kind::Js(source) => {
                let value = js::call(source, args, self.timeout).await?;
                let summary = format!("returned {}", shorten(&value.to_string(), ANSWER_SHOWN));
                Ok((value, summary))
            }
            Kind::Mcp(tool) => {
                let answer = tool.call(args, self.timeout).await?;
                Ok((answer.value, answer.summary))
            }
        }
    }
}

/// The operator's tools of one executor, and the MCP servers some of them call; clones share
/// them, and the servers are stopped when the last clone goes.
#[derive(Debug, Clone, Default)]
pub struct CustomTools(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    tools: Vec<Arc<CustomTool>>,
    /// Held for its drop, after the tools' (field order), which stops the servers.
    _servers: Option<McpHub>,
}

impl CustomTools {
    /// Builds the tools of a checked config (`ExecutorConfig::problems` found nothing) and
    /// starts its MCP servers, waiting until each has listed its tools. Every problem (a
    /// server that did not start, a name that clashes) is in the error, each naming its key.
    pub fn start(
        tools: &BTreeMap<String, ToolConfig>,
        servers: &BTreeMap<String, McpServerConfig>,
        step_timeout_ms: u64,
        secrets: &Secrets,
    ) -> Result<Self, String> {
        let own = Self::new(tools, step_timeout_ms, secrets)?;
        if servers.is_empty() {
            return Ok(own);
        }
        let (hub, listed) = McpHub::start(servers, secrets)?;
        let mut taken: BTreeMap<String, String> = own
            .all()
            .iter()
            .map(|t| (t.name().to_owned(), format!("executor.tools.{}", t.name())))
            .collect();
        let mut all = own.all().to_vec();
        let served = hub
            .tools(servers, listed, &mut taken, step_timeout_ms, secrets)
            .map_err(|problems| problems.join("; "))?;
        all.extend(served);
        Ok(Self(Arc::new(Inner {
            tools: all,
            _servers: Some(hub),
        })))
    }

    /// Builds the config's own tools (`[executor.tools]`, no MCP server) of a checked config
    /// (`ExecutorConfig::problems` found nothing), for steps of `step_timeout_ms`. A secret a webhook's header names must be held by
    /// `secrets` now: an executor does not start without the secrets its tools need.
    pub fn new(
        tools: &BTreeMap<String, ToolConfig>,
        step_timeout_ms: u64,
        secrets: &Secrets,
    ) -> Result<Self, String> {
        let mut built = Vec::with_capacity(tools.len());
        for (name, cfg) in tools {
            let key = format!("executor.tools.{name}");
            let (parameters, schema) = config::parameters(cfg.parameters.as_ref())
                .map_err(|e| format!("{key}.parameters {e}"))?;
            let kind = match (&cfg.webhook, &cfg.js) {
                (Some(hook), None) => {
                    let hook = Webhook::new(hook).map_err(|e| format!("{key}.webhook.{e}"))?;
                    for id in hook.secret_ids() {
                        if secrets.for_request(&[id.to_owned()]).is_err() {
                            return Err(format!(
                                "{key}.webhook.headers names the secret `{id}`, which this executor does not hold: set the environment variable {}{} or put a file named `{id}` in the `[secrets] dir`",
                                crate::secrets::ENV_PREFIX,
                                id.to_ascii_uppercase()
                            ));
                        }
                    }
                    Kind::Webhook(hook)
                }
                (None, Some(js)) => Kind::Js(js.clone()),
                _ => return Err(format!("{key} needs exactly one of `webhook` and `js`")),
            };
            built.push(Arc::new(CustomTool {
                spec: CustomToolSpec {
                    name: name.clone(),
                    description: cfg.description.trim().to_owned(),
                    parameters,
                },
                schema,
                kind,
                timeout: Duration::from_millis(cfg.timeout_ms(step_timeout_ms)),
                max_calls: cfg.max_calls_per_run,
                secrets: secrets.clone(),
            }));
        }
        Ok(Self(Arc::new(Inner {
            tools: built,
            _servers: None,
        })))
    }

    /// Every tool: the config's own, then the MCP servers' (each server's in its order).
    pub fn all(&self) -> &[Arc<CustomTool>] {
        &self.0.tools
    }

    /// The tool named `name` (exactly: names are JavaScript identifiers).
    pub fn find(&self, name: &str) -> Option<&Arc<CustomTool>> {
        self.0.tools.iter().find(|t| t.name() == name.trim())
    }

    /// The tools a task's allow list grants: an empty list grants every device tool and every
    /// operator tool; otherwise exactly the tools it names, of either kind (a list naming only
    /// operator tools grants no device tool). An unknown name is an error.
    pub fn select<S: AsRef<str>>(
        &self,
        allow: &[S],
    ) -> Result<(Vec<ToolSpec>, Vec<Arc<CustomTool>>), ToolError> {
        if allow.is_empty() {
            return Ok((agent_tools::select::<&str>(&[])?, self.0.tools.to_vec()));
        }
        let mut device = Vec::new();
        let mut custom = Vec::new();
        for name in allow {
            match self.find(name.as_ref()) {
                Some(tool)
                    if !custom
                        .iter()
                        .any(|t: &Arc<CustomTool>| Arc::ptr_eq(t, tool)) =>
                {
                    custom.push(tool.clone());
                }
                Some(_) => {}
                None => device.push(name.as_ref()),
            }
        }
        let device = if device.is_empty() {
            Vec::new()
        } else {
            agent_tools::select(&device)?
        };
        Ok((device, custom))
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
