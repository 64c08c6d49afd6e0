//! One MCP server process: started (in a process group of its own, with only the environment
//! configured; `initialize` answered and its tools listed within the start timeout), called
//! (`tools/call` within the call's timeout), started again on the next call when it has
//! exited or been stopped (at most `max_restarts` times in a row without an answered call),
//! and stopped (its process group killed and the child waited for, so nothing is left
//! behind, not even a zombie).
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation, ResourceContents, Tool,
};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout, timeout_at};

use super::config::McpServerConfig;
use super::io::{LineCap, Tail, log_stderr};
use crate::custom_tools::secret_text::{SecretText, redact};
use crate::secrets::Secrets;

/// The executor's environment variables a server gets (when set); nothing else is passed.
pub const INHERITED_ENV: &[&str] = &["PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR"];
/// Longest wait for a killed process to be reaped, or for a failing one's exit status.
const EXIT_WAIT: Duration = Duration::from_secs(2);
/// Longest wait for the rest of a failed start's stderr.
const STDERR_WAIT: Duration = Duration::from_millis(500);
/// Most characters of an error answer shown.
const ERROR_SHOWN: usize = 1_000;

/// One configured server.
pub struct Server {
    pub name: String,
    /// `executor.mcp.<name>`.
    pub key: String,
    command: String,
    args: Vec<String>,
    env: Vec<(String, SecretText)>,
    pub start_timeout: Duration,
    max_line: usize,
    max_restarts: u32,
    secrets: Secrets,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    conn: Option<Conn>,
    generation: u64,
    /// Starts since the last answered call (the first start not counted).
    restarts: u32,
    /// Why the last connection ended (`it exited during a call (exit status: 3)`).
    down: Option<String>,
    /// The executor is shutting down: nothing is started any more.
    closed: bool,
}

/// A running server process and the MCP session over its pipes.
struct Conn {
    client: RunningService<RoleClient, ClientConfig>,
    child: Child,
    pid: Option<u32>,
    generation: u64,
    overflowed: Arc<AtomicBool>,
    stderr: JoinHandle<()>,
    /// The secrets its environment holds, to be cut out of its answers.
    secrets: Vec<String>,
}

/// A call's answer: the value the script gets, and a line for the user.
#[derive(Debug)]
pub struct Answer {
    pub value: Value,
    pub summary: String,
}

impl Server {
    /// A server of a checked config; a secret its environment names must be held now.
    pub fn new(name: &str, cfg: &McpServerConfig, secrets: &Secrets) -> Result<Self, String> {
        let key = format!("executor.mcp.{name}");
        let mut env = Vec::with_capacity(cfg.env.len());
        for (var, value) in &cfg.env {
            let text = SecretText::parse(value).map_err(|e| format!("{key}.env.{var} {e}"))?;
            for id in text.secret_ids() {
                if secrets.for_request(&[id.to_owned()]).is_err() {
                    return Err(format!(
                        "{key}.env.{var} names the secret `{id}`, which this executor does not hold: set the environment variable {}{} or put a file named `{id}` in the `[secrets] dir`",
                        crate::secrets::ENV_PREFIX,
                        id.to_ascii_uppercase()
                    ));
                }
            }
            env.push((var.clone(), text));
        }
        Ok(Self {
            name: name.to_owned(),
            key,
            command: cfg.command.trim().to_owned(),
            args: cfg.args.clone(),
            env,
            start_timeout: Duration::from_millis(cfg.start_timeout_ms),
            max_line: usize::try_from(cfg.max_response_bytes).unwrap_or(usize::MAX),
            max_restarts: cfg.max_restarts,
            secrets: secrets.clone(),
            state: Mutex::default(),
        })
    }

    /// Starts the server for the first time: its tools, or why it did not start (naming the
    /// key).
    pub async fn start(&self) -> Result<Vec<Tool>, String> {
        let limit = format!("start_timeout_ms ({} ms)", self.start_timeout.as_millis());
        let (mut conn, tools) = self.connect(self.start_timeout, &limit).await?;
        let mut state = self.state.lock().await;
        state.generation += 1;
        conn.generation = state.generation;
        state.conn = Some(conn);
        Ok(tools)
    }

    /// Starts the process and the MCP session within `limit` (named `limit_name` in the
    /// error). A failed start leaves nothing running.
    async fn connect(
        &self,
        limit: Duration,
        limit_name: &str,
    ) -> Result<(Conn, Vec<Tool>), String> {
        let key = &self.key;
        let mut used = Vec::new();
        let mut cmd = Command::new(&self.command);
        cmd.args(&self.args).env_clear();
        for var in INHERITED_ENV {
            if let Some(value) = std::env::var_os(var) {
                cmd.env(var, value);
            }
        }
        for (var, value) in &self.env {
            let filled = value
                .fill(&self.secrets, &mut used)
                .map_err(|e| format!("{key}.env.{var} cannot be filled: {e}"))?;
            cmd.env(var, filled);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("{key}.command `{}` could not be started: {e}", self.command))?;
        let pid = child.id();
        let tail = Arc::new(Tail::default());
        let stderr = match child.stderr.take() {
            Some(err) => tokio::spawn(log_stderr(
                self.name.clone(),
                err,
                tail.clone(),
                used.clone(),
            )),
            None => tokio::spawn(async {}),
        };
        let overflowed = Arc::new(AtomicBool::new(false));
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            kill(pid, &mut child).await;
            return Err(format!(
                "{key}: the server's stdin and stdout could not be opened"
            ));
        };
        let transport = AsyncRwTransport::new_client(
            LineCap::new(stdout, self.max_line, overflowed.clone()),
            stdin,
        )
        .with_max_line_length(self.max_line.saturating_add(2));
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("droidmesh-executor", env!("CARGO_PKG_VERSION")),
        );
        let session = async {
            let client = info.serve(transport).await.map_err(|e| e.to_string())?;
            match client.peer().list_all_tools().await {
                Ok(tools) => Ok((client, tools)),
                Err(e) => Err(format!("tools/list failed: {e}")),
            }
        };
        let why = match timeout(limit, session).await {
            Ok(Ok((client, tools))) => {
                let conn = Conn {
                    client,
                    child,
                    pid,
                    generation: 0,
                    overflowed,
                    stderr,
                    secrets: used,
                };
                return Ok((conn, tools));
            }
            Err(_) => format!(
                "did not finish its start (initialize, then tools/list) within {limit_name}"
            ),
            Ok(Err(e)) => match timeout(EXIT_WAIT, child.wait()).await {
                Ok(Ok(status)) => format!("exited during its start ({status})"),
                _ => format!("failed its start: {}", redact(&e, &used)),
            },
        };
        kill(pid, &mut child).await;
        let _ = timeout(STDERR_WAIT, stderr).await;
        Err(format!("{key} {why}; {}", tail.describe()))
    }

    /// Calls `tool` with `args` (an object) within `limit`, starting the server again first
    /// if it is down.
    pub async fn call(&self, tool: &str, args: Value, limit: Duration) -> Result<Answer, String> {
        let deadline = Instant::now() + limit;
        let timed_out = || {
            format!(
                "the server `{}` did not answer within {} ms ({}.call_timeout_ms); the call was cancelled",
                self.name,
                limit.as_millis(),
                self.key
            )
        };
        let (peer, generation, used) = {
            let mut state = timeout_at(deadline, self.state.lock())
                .await
                .map_err(|_| timed_out())?;
            self.ensure(&mut state, deadline, tool).await?;
            let Some(conn) = state.conn.as_ref() else {
                return Err(format!("the server `{}` is not running", self.name));
            };
            (
                conn.client.peer().clone(),
                conn.generation,
                conn.secrets.clone(),
            )
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = args.as_object().cloned();
        // Dropped at the deadline, the request is cancelled (notifications/cancelled).
        match timeout_at(deadline, peer.call_tool(params)).await {
            Err(_) => Err(timed_out()),
            Ok(Ok(result)) => {
                self.answered(generation).await;
                answer_of(result, &used, &self.name, tool)
            }
            Ok(Err(ServiceError::McpError(e))) => {
                self.answered(generation).await;
                Err(format!(
                    "the server `{}` refused the call: {} (error {})",
                    self.name,
                    redact(&e.message, &used),
                    e.code.0
                ))
            }
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                Err(self.lost(generation).await)
            }
            Ok(Err(e)) => Err(format!(
                "the call to the server `{}` failed: {}",
                self.name,
                redact(&e.to_string(), &used)
            )),
        }
    }

    /// Makes sure a process runs: one that exited (or closed its pipes) since the last call
    /// is stopped and started again, within the restart budget and the call's deadline.
    async fn ensure(&self, state: &mut State, deadline: Instant, tool: &str) -> Result<(), String> {
        if state.closed {
            return Err(format!(
                "the server `{}` was stopped: the executor is shutting down",
                self.name
            ));
        }
        if let Some(conn) = state.conn.as_mut() {
            let exited = conn.child.try_wait().ok().flatten();
            if exited.is_none() && !conn.client.is_transport_closed() {
                return Ok(());
            }
            state.down = Some(match exited {
                Some(status) => format!("it exited ({status})"),
                None => "it closed its connection".into(),
            });
            if let Some(conn) = state.conn.take() {
                stop(conn).await;
            }
        }
        let down = state
            .down
            .clone()
            .unwrap_or_else(|| "it was stopped".into());
        if state.restarts >= self.max_restarts {
            return Err(format!(
                "the server `{}` is down ({down}) and is not started again: the {} restarts in a row that {}.max_restarts allows are spent; restart the executor to use it again",
                self.name, self.max_restarts, self.key
            ));
        }
        state.restarts += 1;
        let limit = deadline
            .saturating_duration_since(Instant::now())
            .min(self.start_timeout);
        let limit_name = format!("{} ms, the call's time left", limit.as_millis());
        let (mut conn, tools) = self.connect(limit, &limit_name).await.map_err(|e| {
            format!(
                "the server `{}` is down ({down}) and could not be started again: {e}",
                self.name
            )
        })?;
        state.generation += 1;
        conn.generation = state.generation;
        state.conn = Some(conn);
        tracing::warn!(
            mcp.server = %self.name,
            "started the MCP server again ({down}); {} restart(s) in a row of at most {}",
            state.restarts,
            self.max_restarts
        );
        if tools.iter().any(|t| t.name == tool) {
            Ok(())
        } else {
            Err(format!(
                "the server `{}` no longer offers the tool `{tool}` since it was started again",
                self.name
            ))
        }
    }

    /// A call of connection `generation` was answered: the server works.
    async fn answered(&self, generation: u64) {
        let mut state = self.state.lock().await;
        if state.generation == generation {
            state.restarts = 0;
            state.down = None;
        }
    }

    /// The connection `generation` broke during a call: stops what is left of it and says why,
    /// and whether the next call starts the server again.
    async fn lost(&self, generation: u64) -> String {
        let mut state = self.state.lock().await;
        let current = state
            .conn
            .as_ref()
            .is_some_and(|c| c.generation == generation);
        let Some(mut conn) = state.conn.take_if(|_| current) else {
            return format!(
                "the server `{}` went away during the call; the next call starts it again",
                self.name
            );
        };
        let (what, down) = if conn.overflowed.load(Ordering::Relaxed) {
            (
                format!(
                    "sent a message longer than {} bytes ({}.max_response_bytes); it was stopped and",
                    self.max_line, self.key
                ),
                format!("it sent a message longer than {} bytes", self.max_line),
            )
        } else {
            match timeout(EXIT_WAIT, conn.child.wait()).await {
                Ok(Ok(status)) => (
                    format!("exited during the call ({status}); it"),
                    format!("it exited during a call ({status})"),
                ),
                _ => (
                    "closed its connection during the call; it was stopped and".into(),
                    "it closed its connection during a call".into(),
                ),
            }
        };
        stop(conn).await;
        state.down = Some(down);
        let next = if state.restarts < self.max_restarts {
            "is started again on the next call".to_owned()
        } else if self.max_restarts == 0 {
            format!("is not started again ({}.max_restarts = 0)", self.key)
        } else {
            format!(
                "is not started again (the {} restarts in a row that {}.max_restarts allows are spent)",
                self.max_restarts, self.key
            )
        };
        format!("the server `{}` {what} {next}", self.name)
    }

    /// Stops the process for good (the executor is shutting down).
    pub async fn shutdown(&self) {
        let Ok(mut state) = timeout(EXIT_WAIT, self.state.lock()).await else {
            return;
        };
        state.closed = true;
        if let Some(conn) = state.conn.take() {
            stop(conn).await;
        }
    }
}

/// Kills the process group of `pid` (the child and whatever it started) and waits for the
/// child, so it leaves no zombie.
async fn kill(pid: Option<u32>, child: &mut Child) {
    if let Some(group) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        // Gone already is fine: nothing is left to kill.
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let _ = child.start_kill();
    let _ = timeout(EXIT_WAIT, child.wait()).await;
}

/// Stops a connection: its process group killed and waited for, its session and stderr
/// reader ended.
async fn stop(mut conn: Conn) {
    kill(conn.pid, &mut conn.child).await;
    conn.client.cancellation_token().cancel();
    let _ = timeout(STDERR_WAIT, &mut conn.stderr).await;
    conn.stderr.abort();
}

/// The script's value of a result: its structured content when it has one, else its text;
/// an `isError` result is the call's error. Every secret of the server's environment is cut
/// out first.
pub(super) fn answer_of(
    result: CallToolResult,
    used: &[String],
    server: &str,
    tool: &str,
) -> Result<Answer, String> {
    let text = redact(&content_text(&result.content), used);
    if result.is_error == Some(true) {
        let shown = droidmesh_proto::text::shorten_noting(text.trim(), ERROR_SHOWN);
        return Err(if shown.is_empty() {
            format!("the server `{server}` answered with an error")
        } else {
            format!("the server `{server}` answered with an error: {shown}")
        });
    }
    let value = match result.structured_content {
        Some(value) if !used.is_empty() => {
            let written = value.to_string();
            let cut = redact(&written, used);
            if cut == written {
                value
            } else {
                serde_json::from_str(&cut).unwrap_or(Value::String(cut))
            }
        }
        Some(value) => value,
        None => Value::String(text),
    };
    let shown = match &value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Ok(Answer {
        summary: format!(
            "the server `{server}` answered {tool}: {}",
            droidmesh_proto::text::shorten(&shown, super::ANSWER_SHOWN)
        ),
        value,
    })
}

/// The text of a result's content blocks, one per line; what is not text is named, not
/// included.
fn content_text(content: &[ContentBlock]) -> String {
    let parts: Vec<String> = content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => format!("[an image ({}) left out]", i.mime_type),
            ContentBlock::Audio(a) => format!("[audio ({}) left out]", a.mime_type),
            ContentBlock::Resource(r) => match &r.resource {
                ResourceContents::TextResourceContents { text, .. } => text.clone(),
                ResourceContents::BlobResourceContents { uri, .. } => {
                    format!("[binary resource {uri} left out]")
                }
                _ => "[a resource left out]".into(),
            },
            ContentBlock::ResourceLink(link) => format!("[resource link {}]", link.uri),
            _ => "[content left out]".into(),
        })
        .collect();
    parts.join("\n")
}
