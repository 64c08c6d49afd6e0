//! The functions a scripter session grants: HTTP (behind the `fetch` prelude) and the task's
//! workspace files. Handlers run on the session's own thread; HTTP blocks it on the runtime
//! handle, bounded by the request's deadline, the step's deadline and the run's cancellation.
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use droidmesh_sandbox::{HostFunction, ParamSpec, ParamType, tool_signatures};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::http::{Budget, Http, HttpRequest};
use crate::workspace::Workspace;

/// The prelude that defines `fetch`, `fetchJson`, `FetchError` and `Headers`.
pub const PRELUDE: &str = include_str!("prelude.js");

/// The HTTP API as the model is told about it (the prelude implements it).
const FETCH_API: &str = "\
await fetch(url: string, options?: { method?: string, headers?: object, body?: string, json?: any, timeout_ms?: number, binary?: boolean }): Response
  HTTP request. method: GET (default), POST, PUT, PATCH, DELETE or HEAD. json: a value sent as a JSON body with content-type application/json. body: a text body. binary: read the body as base64.
  Response: { status, statusText, ok, url, redirected, headers } with headers.get(name), and methods `await text()`, `await json()`, `await base64()` (only with binary: true).
  Throws a FetchError when the request cannot be made (refused address, timeout, too large, too many redirects).
await fetchJson(url: string, options?: object): any
  fetch, then the parsed JSON body; throws a FetchError with the status and the start of the body when the status is not 2xx.
";

/// What the host functions of one run share with the loop.
pub struct RunCtx {
    pub rt: tokio::runtime::Handle,
    pub http: Http,
    pub budget: Budget,
    pub workspace: Workspace,
    /// When the current step's JavaScript must end; requests never outlive it.
    pub step_deadline: Mutex<Instant>,
    /// Turns true (or closes) when the run ends: requests in flight stop at once.
    pub cancel: watch::Receiver<bool>,
    /// The run's span; HTTP spans are its children although they start on the session thread.
    pub span: tracing::Span,
    /// The task the run serves, on every HTTP span.
    pub task_id: String,
}

impl RunCtx {
    pub fn set_step_deadline(&self, at: Instant) {
        *self
            .step_deadline
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = at;
    }

    fn step_deadline(&self) -> Instant {
        *self
            .step_deadline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn http(&self, args: &[Value]) -> Result<Value, String> {
        let req = HttpRequest::from_json(args.first().unwrap_or(&Value::Null))?;
        let mut cancel = self.cancel.clone();
        let limit = self.step_deadline();
        let work = async {
            tokio::select! {
                r = self.http.fetch(req, limit, &self.budget, &self.task_id) => r,
                _ = cancel.wait_for(|stopped| *stopped) => Err("the run was stopped".to_string()),
            }
        };
        self.rt.block_on(work.instrument(self.span.clone()))
    }
}

fn text_arg(args: &[Value], i: usize) -> String {
    args.get(i)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `utf8` (the default) or `base64`.
fn is_base64(args: &[Value], i: usize) -> Result<bool, String> {
    match args.get(i).and_then(Value::as_str) {
        None => Ok(false),
        Some(e) => match e.to_ascii_lowercase().as_str() {
            "utf8" | "utf-8" | "text" => Ok(false),
            "base64" => Ok(true),
            other => Err(format!(
                "encoding must be \"utf8\" or \"base64\", got \"{other}\""
            )),
        },
    }
}

/// The functions of one run, bound to `ctx`.
pub fn host_functions(ctx: &Arc<RunCtx>) -> Vec<HostFunction> {
    let c = Arc::clone(ctx);
    let http = HostFunction::new(
        "__http_request",
        "Low-level HTTP request used by fetch().",
        move |args| c.http(&args),
    )
    .param(ParamSpec::required("request", ParamType::Object, ""));
    vec![
        http,
        write_file(ctx),
        read_file(ctx),
        list_files(ctx),
        delete_file(ctx),
    ]
}

fn write_file(ctx: &Arc<RunCtx>) -> HostFunction {
    let c = Arc::clone(ctx);
    HostFunction::new(
        "write_file",
        "Save a file in the task's workspace (replacing one of the same name); files left there are handed back with the result. Returns { name, size_bytes }.",
        move |args| {
            let name = text_arg(&args, 0);
            let content = text_arg(&args, 1);
            let bytes = if is_base64(&args, 2)? {
                base64::engine::general_purpose::STANDARD
                    .decode(content.trim())
                    .map_err(|e| format!("content is not valid base64: {e}"))?
            } else {
                content.into_bytes()
            };
            let info = c.workspace.write(&name, &bytes)?;
            Ok(json!({"name": info.name, "size_bytes": info.size}))
        },
    )
    .param(ParamSpec::required("name", ParamType::String, "a relative name such as \"report.csv\" or \"data/page1.json\""))
    .param(ParamSpec::required("content", ParamType::String, "the text, or base64 when encoding is \"base64\""))
    .param(ParamSpec::optional("encoding", ParamType::String, "\"utf8\" (default) or \"base64\""))
}

fn read_file(ctx: &Arc<RunCtx>) -> HostFunction {
    let c = Arc::clone(ctx);
    HostFunction::new(
        "read_file",
        "Read a file of the task's workspace.",
        move |args| {
            let name = text_arg(&args, 0);
            let bytes = c.workspace.read(&name)?;
            if is_base64(&args, 1)? {
                return Ok(base64::engine::general_purpose::STANDARD
                    .encode(bytes)
                    .into());
            }
            String::from_utf8(bytes).map(Value::String).map_err(|_| {
                format!("`{name}` is not UTF-8 text; read it with read_file(name, \"base64\")")
            })
        },
    )
    .param(ParamSpec::required("name", ParamType::String, ""))
    .param(ParamSpec::optional(
        "encoding",
        ParamType::String,
        "\"utf8\" (default) or \"base64\"",
    ))
}

fn list_files(ctx: &Arc<RunCtx>) -> HostFunction {
    let c = Arc::clone(ctx);
    HostFunction::new(
        "list_files",
        "The files in the task's workspace: [{ name, size_bytes }].",
        move |_| {
            let files = c.workspace.list()?;
            Ok(Value::Array(
                files
                    .into_iter()
                    .map(|f| json!({"name": f.name, "size_bytes": f.size}))
                    .collect(),
            ))
        },
    )
}

fn delete_file(ctx: &Arc<RunCtx>) -> HostFunction {
    let c = Arc::clone(ctx);
    HostFunction::new(
        "delete_file",
        "Delete a file of the task's workspace; false when there was none.",
        move |args| c.workspace.delete(&text_arg(&args, 0)).map(Value::Bool),
    )
    .param(ParamSpec::required("name", ParamType::String, ""))
}

/// The API text for the prompt: `fetch` and `fetchJson`, then the granted functions the model
/// calls directly (the low-level HTTP function is left out).
pub fn signatures(functions: &[HostFunction]) -> String {
    let direct: Vec<HostFunction> = functions
        .iter()
        .filter(|f| !f.name.starts_with("__"))
        .cloned()
        .collect();
    format!("{FETCH_API}{}", tool_signatures(&direct))
}
