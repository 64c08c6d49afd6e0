//! Tools of MCP servers the executor starts over stdio (`[executor.mcp.<server>]`,
//! [`config`]): each tool a server lists (after `include_tools` and `exclude_tools`) becomes
//! an operator tool named `<prefix><tool>`, with the server's description and input schema,
//! called like the others (schema check, call budget, span, events).
//!
//! Lifecycle. The servers run on a thread of their own ([`McpHub`]: a single-threaded tokio
//! runtime, so their pipes and sessions do not depend on the runtime that calls them, and
//! stopping them does not need one). Each starts once, when the executor is built; a server
//! that does not start, or does not list its tools within its `start_timeout_ms`, stops the
//! executor from starting with an error naming its key: an executor that came up without
//! the tools its config names would refuse tasks that list them, or quietly offer the model
//! less than the operator set up, and a missing tool is found at deploy time rather than in
//! a task. A server that exits (or is stopped for an overlong message) is started again by
//! the next call of one of its tools, at most `max_restarts` times in a row without an
//! answered call. When the executor is dropped, every server's process group is killed and
//! the child waited for before the drop returns.
pub mod config;
mod io;
mod server;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use droidmesh_agent::tools::CustomToolSpec;
use serde_json::Value;
use tokio::runtime::Handle;
use tracing::Instrument as _;

pub use config::McpServerConfig;
pub use server::{Answer, INHERITED_ENV};

use super::{ANSWER_SHOWN, CustomTool, Kind};
use crate::secrets::Secrets;
use server::Server;

/// Longest wait for the servers' thread to come up, or to stop them when the executor goes.
const THREAD_WAIT: Duration = Duration::from_secs(10);
/// Longest description of a server's tool shown to the model.
const DESCRIPTION_SHOWN: usize = 1_000;

/// The executor's MCP servers, running on their own thread; dropping it stops them.
pub struct McpHub {
    servers: Vec<Arc<Server>>,
    rt: Handle,
    stop: Option<tokio::sync::oneshot::Sender<Vec<Arc<Server>>>>,
    /// Told when every process is stopped (in a mutex: the hub is shared between threads).
    stopped: Option<std::sync::Mutex<std::sync::mpsc::Receiver<()>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.servers.iter().map(|s| s.name.as_str()).collect();
        f.debug_struct("McpHub").field("servers", &names).finish()
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(self.servers.clone());
        }
        // Waits (boundedly) for every process to be killed and reaped.
        if let Some(stopped) = self.stopped.take() {
            let stopped = stopped.into_inner().unwrap_or_else(|p| p.into_inner());
            let _ = stopped.recv_timeout(THREAD_WAIT);
        }
        if let Some(thread) = self.thread.take()
            && thread.is_finished()
        {
            let _ = thread.join();
        }
    }
}

/// What a server's start gave: its tools, or why it did not start.
pub type Listed = Result<Vec<rmcp::model::Tool>, String>;

/// A tool of one server, as a CustomTool's kind.
pub struct McpTool {
    server: Arc<Server>,
    /// The server's name for it.
    tool: String,
    rt: Handle,
}

impl McpTool {
    /// One call on the servers' thread, within `limit`; the caller's span is the call's.
    pub async fn call(&self, args: &Value, limit: Duration) -> Result<Answer, String> {
        let (server, tool, args) = (self.server.clone(), self.tool.clone(), args.clone());
        let call = async move { server.call(&tool, args, limit).await };
        self.rt
            .spawn(call.instrument(tracing::Span::current()))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "the server `{}` was stopped: the executor is shutting down",
                    self.server.name
                ))
            })
    }
}

impl McpHub {
    /// Starts every server at once: for each (in `cfgs`' order) its tools, or why it did not
    /// start (naming its key). The error is for what stops any server from starting (a
    /// secret its environment names that the executor lacks, the servers' thread).
    pub fn start(
        cfgs: &BTreeMap<String, McpServerConfig>,
        secrets: &Secrets,
    ) -> Result<(Self, Vec<Listed>), String> {
        let mut servers = Vec::with_capacity(cfgs.len());
        let mut problems = Vec::new();
        for (name, cfg) in cfgs {
            match Server::new(name, cfg, secrets) {
                Ok(server) => servers.push(Arc::new(server)),
                Err(e) => problems.push(e),
            }
        }
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        let hub = Self::spawn(servers)?;
        let (tx, rx) = std::sync::mpsc::channel();
        let starting = hub.servers.clone();
        hub.rt.spawn(async move {
            let mut set = tokio::task::JoinSet::new();
            for (i, server) in starting.into_iter().enumerate() {
                set.spawn(async move { (i, server.start().await) });
            }
            let mut done = Vec::new();
            while let Some(joined) = set.join_next().await {
                // A start that panicked has no answer below, and says so.
                if let Ok(one) = joined {
                    done.push(one);
                }
            }
            let _ = tx.send(done);
        });
        let longest = hub
            .servers
            .iter()
            .map(|s| s.start_timeout)
            .max()
            .unwrap_or_default();
        let done = rx
            .recv_timeout(longest + THREAD_WAIT)
            .map_err(|_| "executor.mcp: the servers did not finish starting".to_owned())?;
        let mut listed: Vec<Listed> = hub
            .servers
            .iter()
            .map(|s| Err(format!("{}: its start ended without an answer", s.key)))
            .collect();
        for (i, result) in done {
            if let Some(slot) = listed.get_mut(i) {
                *slot = result;
            }
        }
        Ok((hub, listed))
    }

    /// The servers' thread and its runtime, which stops them when told to.
    fn spawn(servers: Vec<Arc<Server>>) -> Result<Self, String> {
        let (rt_tx, rt_rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<Vec<Arc<Server>>>();
        let (stopped_tx, stopped) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("mcp-servers".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = rt_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = rt_tx.send(Ok(rt.handle().clone()));
                rt.block_on(async move {
                    let servers = stop_rx.await.unwrap_or_default();
                    let mut set = tokio::task::JoinSet::new();
                    for server in servers {
                        set.spawn(async move { server.shutdown().await });
                    }
                    while set.join_next().await.is_some() {}
                });
                drop(rt);
                let _ = stopped_tx.send(());
            })
            .map_err(|e| format!("executor.mcp: the servers' thread could not start: {e}"))?;
        let rt = match rt_rx.recv_timeout(THREAD_WAIT) {
            Ok(Ok(rt)) => rt,
            Ok(Err(e)) => return Err(format!("executor.mcp: the servers' runtime: {e}")),
            Err(_) => return Err("executor.mcp: the servers' thread did not start".into()),
        };
        Ok(Self {
            servers,
            rt,
            stop: Some(stop),
            stopped: Some(std::sync::Mutex::new(stopped)),
            thread: Some(thread),
        })
    }

    /// The tools of the started servers as operator tools. `taken` holds the function names
    /// already in use, each with the key that took it. A server that did not start, a name
    /// that clashes or is not a JavaScript identifier, or a schema that does not compile is a
    /// problem naming the key; every problem is returned.
    pub(super) fn tools(
        &self,
        cfgs: &BTreeMap<String, McpServerConfig>,
        listed: Vec<Listed>,
        taken: &mut BTreeMap<String, String>,
        step_timeout_ms: u64,
        secrets: &Secrets,
    ) -> Result<Vec<Arc<CustomTool>>, Vec<String>> {
        let mut built = Vec::new();
        let mut problems = Vec::new();
        for ((server, cfg), offered) in self.servers.iter().zip(cfgs.values()).zip(listed) {
            let key = &server.key;
            let offered = match offered {
                Ok(tools) => tools,
                Err(e) => {
                    problems.push(e);
                    continue;
                }
            };
            let names: Vec<&str> = offered.iter().map(|t| t.name.as_ref()).collect();
            for (list, wanted) in [
                (
                    "include_tools",
                    cfg.include_tools.as_deref().unwrap_or_default(),
                ),
                ("exclude_tools", cfg.exclude_tools.as_slice()),
            ] {
                for name in wanted.iter().filter(|n| !names.contains(&n.as_str())) {
                    problems.push(format!(
                        "{key}.{list} names `{name}`, which the server does not offer (it offers: {})",
                        names.join(", ")
                    ));
                }
            }
            let prefix = cfg.prefix(&server.name);
            for tool in offered {
                let own = tool.name.to_string();
                let included = cfg.include_tools.as_ref().is_none_or(|l| l.contains(&own));
                if !included || cfg.exclude_tools.contains(&own) {
                    continue;
                }
                let name = format!("{prefix}{own}");
                let fix = "leave it out with exclude_tools or set another prefix";
                if let Err(why) = super::config::check_name(&name) {
                    problems.push(format!(
                        "{key}: the tool `{own}` cannot be offered: its function's name {why}; {fix}"
                    ));
                    continue;
                }
                if let Some(other) = taken.get(&name) {
                    problems.push(format!(
                        "{key}: the tool `{own}` cannot be offered: its function's name `{name}` is taken by {other}; {fix}"
                    ));
                    continue;
                }
                let schema = Value::Object(tool.input_schema.as_ref().clone());
                let (parameters, compiled) = match super::config::parameters(Some(&schema)) {
                    Ok(p) => p,
                    Err(e) => {
                        problems.push(format!(
                            "{key}: the input schema of the tool `{own}` {e}; leave it out with exclude_tools"
                        ));
                        continue;
                    }
                };
                let description = tool
                    .description
                    .as_deref()
                    .or(tool.title.as_deref())
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .map_or_else(
                        || format!("The tool `{own}` of the MCP server `{}`.", server.name),
                        |d| droidmesh_proto::text::shorten(d, DESCRIPTION_SHOWN),
                    );
                taken.insert(name.clone(), format!("{key}'s tool `{own}`"));
                built.push(Arc::new(CustomTool {
                    spec: CustomToolSpec {
                        name,
                        description,
                        parameters,
                    },
                    schema: compiled,
                    kind: Kind::Mcp(McpTool {
                        server: server.clone(),
                        tool: own,
                        rt: self.rt.clone(),
                    }),
                    timeout: Duration::from_millis(cfg.call_timeout_ms(step_timeout_ms)),
                    max_calls: cfg.max_calls_per_run,
                    secrets: secrets.clone(),
                }));
            }
        }
        if problems.is_empty() {
            Ok(built)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests;
