//! What tracing costs a CodeAct step when no exporter is configured (`cargo bench -p
//! droidmesh-executor --bench spans`): the subscriber is the one a service installs without
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (fmt logs at `info`, here written to a sink), against one
//! that enables nothing. Per step the executor makes one `chat {model}` span (inside the LLM
//! client, timed here as whole calls to a zero-latency model double on loopback) and one
//! `execute_tool {tool}` span per tool call (timed directly, three per step).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::time::{Duration, Instant};

use droidmesh_executor::spans::{self, ToolCallTags};
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_llm::{
    CallTags, ChatRequest, LlmClient, LlmConfig, Message, ProfileConfig, ProviderConfig, WireFormat,
};
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

const TOOLS_PER_STEP: u32 = 3;
const CALLS: usize = 400;
const ROUNDS: usize = 5;
const TOOL_SPANS: u32 = 20_000;

fn production() -> impl tracing::Subscriber + Send + Sync {
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_target(false)
        .compact()
        .with_filter(EnvFilter::new("info"));
    tracing_subscriber::registry().with(fmt)
}

fn silent() -> impl tracing::Subscriber + Send + Sync {
    tracing_subscriber::registry().with(
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(EnvFilter::new("off")),
    )
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

async fn chat_calls(client: &LlmClient, n: usize) -> Duration {
    let started = Instant::now();
    for i in 0..n {
        let req = ChatRequest::new(vec![
            Message::system("You write JavaScript for a phone."),
            Message::user(format!("step {i}: the screen shows Settings")),
        ])
        .tagged(CallTags::new("task-bench").device("emulator-5554").step(1));
        client.chat("executor", req).await.unwrap();
    }
    started.elapsed() / n as u32
}

fn tool_spans(n: u32) -> Duration {
    let started = Instant::now();
    for i in 0..n {
        let tags = ToolCallTags {
            task_id: "task-bench",
            serial: "emulator-5554",
            step: Some(1),
            call_id: Some(i),
        };
        let span = spans::execute_tool("tap", &tags);
        let _entered = span.enter();
        std::hint::black_box(&span);
    }
    started.elapsed() / n
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("span benchmarks run under `cargo bench` only");
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(MockLlmServer::start([])).unwrap();
    server.set_fallback(MockResponse::success(
        WireFormat::Openai,
        "```javascript\ntap(3)\n```",
        "bench",
        100,
        10,
    ));
    let mut config = LlmConfig::defaults();
    config.providers.insert(
        "mock".into(),
        ProviderConfig::new("mock", WireFormat::Openai, format!("{}/v1", server.url())),
    );
    config
        .profiles
        .insert("default".into(), ProfileConfig::new("mock", "bench"));
    let client = LlmClient::from_config(&config).unwrap();

    // Alternating rounds, so drift in the machine's load falls on both sides alike.
    let (mut on, mut off) = (Vec::new(), Vec::new());
    let _warm = rt.block_on(chat_calls(&client, 50));
    for _ in 0..ROUNDS {
        let d = tracing::dispatcher::Dispatch::new(production());
        on.push(tracing::dispatcher::with_default(&d, || {
            rt.block_on(chat_calls(&client, CALLS).instrument(tracing::info_span!("run")))
        }));
        let d = tracing::dispatcher::Dispatch::new(silent());
        off.push(tracing::dispatcher::with_default(&d, || {
            rt.block_on(chat_calls(&client, CALLS))
        }));
    }
    let (chat_on, chat_off) = (median(on), median(off));
    let d = tracing::dispatcher::Dispatch::new(production());
    let tool_on = tracing::dispatcher::with_default(&d, || tool_spans(TOOL_SPANS));
    let d = tracing::dispatcher::Dispatch::new(silent());
    let tool_off = tracing::dispatcher::with_default(&d, || tool_spans(TOOL_SPANS));

    let chat_cost = chat_on.saturating_sub(chat_off);
    let tool_cost = tool_on.saturating_sub(tool_off);
    let per_step = chat_cost + tool_cost * TOOLS_PER_STEP;
    println!("tracing without an exporter (fmt logs at info to a sink vs. nothing enabled):");
    println!(
        "  chat call to a zero-latency double on loopback, median of {ROUNDS} rounds of {CALLS}: \
         {chat_on:?} traced, {chat_off:?} untraced: the chat span costs ~{chat_cost:?}"
    );
    println!(
        "  execute_tool span (create, enter, drop; n={TOOL_SPANS}): {tool_on:?} traced, \
         {tool_off:?} untraced: ~{tool_cost:?} each"
    );
    println!(
        "  per step (1 chat + {TOOLS_PER_STEP} tool spans): ~{per_step:?}; divide by the mesh \
         bench's zero-latency CodeAct step time (`cargo bench -p droidmesh-e2e --bench mesh`), \
         not by the model call alone ({chat_off:?} here), which is a small part of a step"
    );
}
