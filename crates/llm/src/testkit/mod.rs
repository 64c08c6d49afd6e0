//! Model doubles for tests, each a real HTTP server on 127.0.0.1 that records every request it
//! received: [`MockLlmServer`] answers from a queue of scripted responses (status, headers,
//! body, delay), with builders for the success bodies of each wire format; [`LlamaServer`]
//! behaves like llama.cpp's server running a small model (one slot, a context size, replies cut
//! at `max_tokens`, images refused without a projector).
mod alarm;
mod llama;
mod serve;

pub use llama::{
    IMAGE_REFUSAL, IMAGE_TOKENS, LOG_LIMIT, LlamaOptions, LlamaReply, LlamaServer, MESSAGE_TOKENS,
    Served, count_tokens, prompt_tokens,
};

use crate::config::WireFormat;
use bytes::Bytes;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct MockResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// Answer this long after the request's body was read.
    pub delay: Duration,
}

impl MockResponse {
    /// A response with this status and body.
    pub fn raw(status: u16, body: impl Into<Bytes>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// A JSON response.
    pub fn json(status: u16, body: &Value) -> Self {
        Self::raw(status, body.to_string()).header("content-type", "application/json")
    }

    /// An error in the `{"error": {"message": ...}}` shape all three providers use.
    pub fn error(status: u16, message: &str) -> Self {
        Self::json(
            status,
            &json!({"error": {"message": message, "type": "mock_error"}}),
        )
    }

    /// A successful chat completion in the given wire format.
    pub fn success(wire: WireFormat, text: &str, model: &str, input: u64, output: u64) -> Self {
        let body = match wire {
            WireFormat::Anthropic => json!({
                "id": "msg_mock", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": input, "output_tokens": output}
            }),
            WireFormat::Gemini => json!({
                "candidates": [{
                    "content": {"role": "model", "parts": [{"text": text}]},
                    "finishReason": "STOP", "index": 0
                }],
                "usageMetadata": {
                    "promptTokenCount": input, "candidatesTokenCount": output,
                    "totalTokenCount": input + output
                },
                "modelVersion": model
            }),
            WireFormat::Openai | WireFormat::Replay => json!({
                "id": "chatcmpl-mock", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{
                    "index": 0, "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop"
                }],
                "usage": {
                    "prompt_tokens": input, "completion_tokens": output,
                    "total_tokens": input + output
                }
            }),
        };
        Self::json(200, &body)
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    pub method: String,
    /// Path and query, e.g. `/v1/chat/completions`.
    pub path: String,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    /// When the request arrived (after its body was read).
    pub at: Instant,
}

impl ReceivedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<MockResponse>,
    fallback: Option<MockResponse>,
    log: Vec<ReceivedRequest>,
    /// Off for long benchmarks, where the log would grow without bound.
    no_log: bool,
    /// When each request arrived, kept even with the log off (at most [`MAX_ARRIVALS`]).
    arrivals: Vec<Instant>,
    /// How long after its delay each delayed reply was ready (at most [`MAX_ARRIVALS`]).
    late: Vec<Duration>,
}

/// The most arrival times a server keeps; later ones are not recorded.
pub const MAX_ARRIVALS: usize = 100_000;

/// The server; it stops when dropped.
pub struct MockLlmServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl MockLlmServer {
    /// Starts on 127.0.0.1 with a free port, answering `script` in order. When the script is
    /// used up it answers the fallback (see [`MockLlmServer::set_fallback`]) or a 500.
    pub async fn start(script: impl IntoIterator<Item = MockResponse>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            script: script.into_iter().collect(),
            ..State::default()
        }));
        let shared = state.clone();
        let task = serve::spawn(
            listener,
            Arc::new(move |req| Box::pin(handle(shared.clone(), req))),
        );
        Ok(Self { addr, state, task })
    }

    /// `http://127.0.0.1:PORT`, to use as (or prefix of) a provider's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Appends a scripted response.
    pub fn push(&self, response: MockResponse) {
        self.lock().script.push_back(response);
    }

    /// The answer once the script is used up (e.g. for benchmarks).
    pub fn set_fallback(&self, response: MockResponse) {
        self.lock().fallback = Some(response);
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        self.lock().log.clone()
    }

    /// When each request arrived, in order: the first [`MAX_ARRIVALS`], also while the request
    /// log is off.
    pub fn arrivals(&self) -> Vec<Instant> {
        self.lock().arrivals.clone()
    }

    /// For each reply with a delay, how long after the delay it was ready to send, in order:
    /// the double's own lateness, which a benchmark charges to the client.
    pub fn reply_lateness(&self) -> Vec<Duration> {
        self.lock().late.clone()
    }

    pub fn request_count(&self) -> usize {
        self.lock().log.len()
    }

    /// Whether to keep received requests (on by default; turn off for long benchmarks).
    pub fn set_log_requests(&self, on: bool) {
        let mut s = self.lock();
        s.no_log = !on;
        if !on {
            s.log.clear();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for MockLlmServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(state: Arc<Mutex<State>>, request: ReceivedRequest) -> serve::Reply {
    let at = request.at;
    let scripted = {
        let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.arrivals.len() < MAX_ARRIVALS {
            s.arrivals.push(request.at);
        }
        if !s.no_log {
            s.log.push(request);
        }
        let next = s.script.pop_front().or_else(|| s.fallback.clone());
        next.unwrap_or_else(|| {
            MockResponse::error(500, "mock llm server: no scripted response left")
        })
    };
    if !scripted.delay.is_zero() {
        alarm::until(at + scripted.delay).await;
        let late = at.elapsed().saturating_sub(scripted.delay);
        let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.late.len() < MAX_ARRIVALS {
            s.late.push(late);
        }
    }
    serve::reply(scripted.status, &scripted.headers, scripted.body)
}
