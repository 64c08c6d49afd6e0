//! `droidmesh.v1.ScripterService`: `RunScript` checks the request, prepares the task's
//! workspace and a sandbox session, and streams the run's events until `AgentFinished`.
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use droidmesh_agent::prompts::{PromptSet, ScripterFile, ScripterSystem};
use droidmesh_llm::LlmClient;
use droidmesh_proto::struct_to_json;
use droidmesh_proto::v1::scripter_service_server::ScripterService;
use droidmesh_proto::v1::{AgentEvent, RunScriptRequest};
use droidmesh_sandbox::{Capabilities, SandboxLimits, Session};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;

use crate::config::{MAX_STEPS_CEILING, ScripterConfig};
use crate::error::ScripterError;
use crate::functions::{self, PRELUDE, RunCtx, host_functions};
use crate::http::{Budget, Http};
use crate::run::{AGENT, Run, excerpt};
use crate::workspace::Workspace;

pub type EventStream = Pin<Box<dyn Stream<Item = Result<AgentEvent, Status>> + Send>>;

/// Largest task text accepted, in bytes.
pub const MAX_TASK_BYTES: usize = 32 * 1024;
/// Largest handoff context accepted, as JSON text.
pub const MAX_HANDOFF_BYTES: usize = 64 * 1024;
/// Longest task id accepted, in bytes (it names the task's workspace, spans and logs).
pub const MAX_TASK_ID_BYTES: usize = 256;
/// The user's request is context only; longer ones are cut to this many bytes.
const INSTRUCTION_SHOWN: usize = 8 * 1024;
/// Console output kept per step.
const CONSOLE_BYTES: usize = 16 * 1024;
/// Longest account of where a moved task's files were, as the balancer sent it, in bytes.
const MOVED_SHOWN: usize = 300;

pub struct Scripter {
    /// This replica's name, in file locations and in what it says of files it lacks.
    pub(crate) replica: Arc<str>,
    pub(crate) cfg: Arc<ScripterConfig>,
    pub(crate) llm: LlmClient,
    pub(crate) prompts: Arc<PromptSet>,
    pub(crate) http: Http,
    pub(crate) slots: Arc<Semaphore>,
}

#[tonic::async_trait]
impl ScripterService for Scripter {
    type RunScriptStream = EventStream;

    async fn run_script(
        &self,
        r: Request<RunScriptRequest>,
    ) -> Result<Response<EventStream>, Status> {
        // Set by the caller's balancer when this task's last call went to another replica.
        let moved = r
            .metadata()
            .get(droidmesh_runtime::balance::MOVED_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(|v| excerpt(v.trim(), MOVED_SHOWN))
            .filter(|v| !v.is_empty());
        let req = r.into_inner();
        droidmesh_runtime::trace_context::tag_call(&req.task_id, "", None);
        let stream = self.start(req, moved).await.map_err(Status::from)?;
        Ok(Response::new(stream))
    }
}

impl Scripter {
    async fn start(
        &self,
        req: RunScriptRequest,
        moved: Option<String>,
    ) -> Result<EventStream, ScripterError> {
        let bad = |m: String| Err(ScripterError::InvalidRequest(m));
        if req.task.trim().is_empty() {
            return bad("task is empty: put the script task, in words, in `task`".into());
        }
        if req.task.len() > MAX_TASK_BYTES {
            return bad(format!(
                "task is {} bytes long; at most {MAX_TASK_BYTES} are accepted",
                req.task.len()
            ));
        }
        if req.task_id.trim().is_empty() {
            return bad("task_id is empty: the task's files are kept under its id".into());
        }
        if req.task_id.len() > MAX_TASK_ID_BYTES {
            return bad(format!(
                "task_id is {} bytes; at most {MAX_TASK_ID_BYTES} are accepted",
                req.task_id.len()
            ));
        }
        if req.max_steps > MAX_STEPS_CEILING {
            return bad(format!(
                "max_steps must be at most {MAX_STEPS_CEILING} (0 uses the configured {}), got {}",
                self.cfg.default_max_steps, req.max_steps
            ));
        }
        let handoff_value = req
            .handoff_context
            .as_ref()
            .filter(|s| !s.fields.is_empty())
            .map(struct_to_json);
        let handoff = match &handoff_value {
            Some(value) => {
                let text = serde_json::to_string_pretty(value).unwrap_or_default();
                if text.len() > MAX_HANDOFF_BYTES {
                    return bad(format!(
                        "handoff_context is {} bytes as JSON; at most {MAX_HANDOFF_BYTES} are accepted",
                        text.len()
                    ));
                }
                Some(text)
            }
            None => None,
        };
        let target = self
            .llm
            .target_for_request(AGENT, req.llm.as_ref())
            .map_err(|e| ScripterError::InvalidRequest(format!("llm override: {e}")))?;
        let permit =
            Arc::clone(&self.slots)
                .try_acquire_owned()
                .map_err(|_| ScripterError::Busy {
                    running: self.cfg.max_concurrent_runs,
                })?;
        let max_steps = match req.max_steps {
            0 => self.cfg.default_max_steps,
            n => n,
        };
        let cfg = Arc::clone(&self.cfg);
        let task_id = req.task_id.clone();
        let workspace = tokio::task::spawn_blocking(move || {
            let ws = Workspace::open(
                &cfg.workspace_root(),
                &task_id,
                cfg.workspace_max_bytes,
                cfg.keep_workspaces,
            )?;
            let files = ws.list()?;
            Ok::<_, String>((ws, files))
        })
        .await
        .map_err(|e| ScripterError::Workspace(e.to_string()))?;
        let (workspace, existing) = workspace.map_err(ScripterError::Workspace)?;
        let lost = moved.map(|from| files_lost(&self.replica, &from, existing.len()));
        if let Some(lost) = &lost {
            tracing::warn!(task.id = %req.task_id, "{lost}");
        }

        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = "invoke_agent scripter",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = AGENT,
            droidmesh.task.id = %req.task_id,
        );
        let (cancel, cancelled) = watch::channel(false);
        let ctx = Arc::new(RunCtx {
            rt: tokio::runtime::Handle::current(),
            http: self.http.clone(),
            budget: Budget::new(self.cfg.http.max_requests_per_run),
            workspace,
            step_deadline: Mutex::new(tokio::time::Instant::now()),
            cancel: cancelled,
            span: span.clone(),
            task_id: req.task_id.clone(),
        });
        let functions = host_functions(&ctx);
        let signatures = functions::signatures(&functions);
        let limits = SandboxLimits {
            wall_clock: Duration::from_millis(self.cfg.step_timeout_ms),
            memory_bytes: self.cfg.sandbox_memory_mb * 1024 * 1024,
            console_bytes: CONSOLE_BYTES,
            ..SandboxLimits::default()
        };
        let caps = functions
            .into_iter()
            .fold(Capabilities::new(), Capabilities::function)
            .global("handoff", handoff_value.unwrap_or(serde_json::Value::Null));
        let session = Session::start(limits, caps)
            .await
            .map_err(|e| ScripterError::Sandbox(e.to_string()))?;
        let prelude = session
            .run(PRELUDE)
            .await
            .map_err(|e| ScripterError::Sandbox(e.to_string()))?;
        if let Some(e) = prelude.error {
            return Err(ScripterError::Sandbox(format!(
                "the fetch prelude failed: {e}"
            )));
        }
        let instruction =
            Some(excerpt(req.instruction.trim(), INSTRUCTION_SHOWN)).filter(|s| !s.is_empty());
        let task = match &lost {
            Some(lost) => format!("{}\n\nNote: {lost}.", req.task.trim()),
            None => req.task.trim().to_owned(),
        };
        let system = ScripterSystem {
            task,
            instruction,
            handoff_context: handoff,
            tool_signatures: signatures,
            allowed_hosts: self.http.allow_list().entries().to_vec(),
            request_timeout_ms: self.cfg.http.timeout_ms,
            max_response_bytes: self.cfg.http.max_response_bytes,
            step_timeout_ms: self.cfg.step_timeout_ms,
            files: existing
                .into_iter()
                .map(|f| ScripterFile {
                    name: f.name,
                    size_bytes: f.size,
                })
                .collect(),
            max_steps,
        };
        let system = self
            .prompts
            .render(&system)
            .map_err(|e| ScripterError::Prompt(e.to_string()))?;
        let (tx, rx) = mpsc::channel(64);
        tracing::info!(parent: &span, max_steps, "scripter run started");
        let run = Run {
            cfg: Arc::clone(&self.cfg),
            llm: self.llm.clone(),
            prompts: Arc::clone(&self.prompts),
            req,
            target,
            max_steps,
            system,
            session,
            ctx,
            events: tx,
            cancel,
            _permit: permit,
            started: std::time::Instant::now(),
            replica: Arc::clone(&self.replica),
            lost,
        };
        // The run keeps this RPC's trace: its model calls and HTTP requests are children.
        tokio::spawn(run.run().instrument(span));
        Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
    }
}

/// What a script says when its task's last call went to another replica: the files of the
/// task's earlier scripts are there, not here.
fn files_lost(replica: &str, from: &str, here: usize) -> String {
    let starts = match here {
        0 => "an empty workspace".to_owned(),
        1 => "the 1 file an earlier script left on this replica".to_owned(),
        n => format!("the {n} files earlier scripts left on this replica"),
    };
    format!(
        "the files of this task's earlier scripts are not on this replica ({replica}): the task's last script ran on the replica at {from}, and this script starts with {starts}"
    )
}
