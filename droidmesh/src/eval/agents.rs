//! The suite's own scripted agents, served as an OpenAI-compatible model on loopback so that
//! they drive the real mesh (gateway, executor, device service) exactly as a model does: the
//! oracle answers each task with its scripted solution, one CodeAct block per step; the
//! near-miss agent with the task's wrong solution; the do-nothing agent finishes at once.
//! A request is matched to its task by the goal its prompt carries, and to its step by the
//! step number the CodeAct prompt states (so the scripted agents drive direct mode).
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use bytes::Bytes;
use droidmesh_eval::Instance;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// Largest request read (a prompt with a screenshot).
const MAX_REQUEST_BYTES: usize = 16 << 20;

/// Which scripted agent answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scripted {
    /// Each task's scripted solution.
    Oracle,
    /// Each task's wrong solution (the check must fail).
    NearMiss,
    /// Finishes at once, claiming success (the check must not believe it).
    Noop,
}

impl Scripted {
    pub fn name(self) -> &'static str {
        match self {
            Scripted::Oracle => "oracle",
            Scripted::NearMiss => "near-miss",
            Scripted::Noop => "noop",
        }
    }
}

/// The scripted agent's server; stops when dropped.
pub struct ScriptedModel {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The goals the server knows and each one's steps, longest goal first (so a goal that
/// contains another is matched before it).
struct Scripts {
    kind: Scripted,
    by_goal: Vec<(String, Vec<String>)>,
}

impl ScriptedModel {
    pub async fn start(kind: Scripted, instances: &[Instance]) -> Result<Self> {
        let mut by_goal: Vec<(String, Vec<String>)> = Vec::new();
        for i in instances {
            let steps = match kind {
                Scripted::Oracle => i.oracle.clone(),
                Scripted::NearMiss => i.near_miss.clone(),
                Scripted::Noop => Vec::new(),
            };
            if !by_goal.iter().any(|(g, _)| g == &i.goal) {
                by_goal.push((i.goal.clone(), steps));
            }
        }
        by_goal.sort_by_key(|(g, _)| std::cmp::Reverse(g.len()));
        let scripts = Arc::new(Scripts { kind, by_goal });
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .context("the scripted agent cannot listen on loopback")?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(serve(listener, scripts));
        Ok(Self { addr, task })
    }

    /// The base URL an OpenAI-compatible provider is pointed at.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

async fn serve(listener: TcpListener, scripts: Arc<Scripts>) {
    let mut conns = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, say: back off a little rather than spin.
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            continue;
        };
        let scripts = scripts.clone();
        conns.spawn(async move {
            let svc = service_fn(move |req| {
                let scripts = scripts.clone();
                async move { Ok::<_, Infallible>(answer(&scripts, req).await) }
            });
            let _closed = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
        while conns.try_join_next().is_some() {}
    }
}

async fn answer(scripts: &Scripts, req: hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>> {
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => return reply(413, &json!({"error": {"message": e.to_string()}})),
    };
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return reply(400, &json!({"error": {"message": "the body is not JSON"}}));
    };
    let text = scripts.reply(&request);
    let tokens = |s: &str| s.split_whitespace().count();
    let prompt_tokens: usize = messages(&request).map(|m| tokens(&text_of(m))).sum();
    reply(
        200,
        &json!({
            "id": "droidmesh-scripted",
            "object": "chat.completion",
            "model": request.get("model").cloned().unwrap_or(Value::Null),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": tokens(&text), "total_tokens": prompt_tokens + tokens(&text)},
        }),
    )
}

impl Scripts {
    /// The answer to one model call: the next step of the task whose goal the prompt names.
    fn reply(&self, request: &Value) -> String {
        let prompt: String = messages(request)
            .filter(|m| m.get("role").and_then(Value::as_str) != Some("assistant"))
            .map(text_of)
            .collect::<Vec<_>>()
            .join("\n");
        // The CodeAct prompt says which step it is ("This is step 3 of at most 8").
        let step = step_of(&prompt).unwrap_or(1).saturating_sub(1);
        if self.kind == Scripted::Noop {
            return block("I will do nothing.", "complete(true, 'nothing was done');");
        }
        let Some((_, steps)) = self
            .by_goal
            .iter()
            .find(|(g, _)| prompt.contains(g.as_str()))
        else {
            return block(
                "No task of the suite has this goal.",
                "complete(false, 'the scripted agent knows no task with this goal');",
            );
        };
        match steps.get(step) {
            Some(code) => block(
                &format!("Step {} of the {} script.", step + 1, self.kind.name()),
                code,
            ),
            None => block(
                "The script has no more steps.",
                &format!(
                    "complete(false, 'the {} script ended after {} steps');",
                    self.kind.name(),
                    steps.len()
                ),
            ),
        }
    }
}

/// The step a CodeAct prompt is for: the number after its last "This is step ".
fn step_of(prompt: &str) -> Option<usize> {
    let at = prompt.rfind("This is step ")? + "This is step ".len();
    let digits: String = prompt[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn block(prose: &str, code: &str) -> String {
    format!("{prose}\n\n```javascript\n{code}\n```")
}

fn messages(request: &Value) -> impl Iterator<Item = &Value> {
    request
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// A message's text, whether its content is a string or a list of parts.
fn text_of(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn reply(status: u16, body: &Value) -> hyper::Response<Full<Bytes>> {
    let mut resp = hyper::Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}
