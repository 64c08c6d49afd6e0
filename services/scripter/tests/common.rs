//! The test rig: the scripter service on a loopback gRPC port, a scripted model
//! (MockLlmServer), and HTTP servers on loopback for scripts to call.
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_llm::{LlmClient, LlmConfig, WireFormat};
use droidmesh_proto::v1::scripter_service_client::ScripterServiceClient;
use droidmesh_proto::v1::{AgentEvent, AgentFinished, RunScriptRequest, agent_event};
use droidmesh_scripter::{ScripterConfig, scripter_service};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio_stream::StreamExt as _;
use tonic::transport::Channel;
use tonic::transport::server::TcpIncoming;

pub struct Rig {
    pub llm: MockLlmServer,
    pub client: ScripterServiceClient<Channel>,
    pub workspace: tempfile::TempDir,
}

/// A model reply (OpenAI wire format).
pub fn reply(text: &str) -> MockResponse {
    MockResponse::success(WireFormat::Openai, text, "scripted-model", 300, 30)
}

/// A reply holding one JavaScript step.
pub fn step(code: &str) -> MockResponse {
    reply(&format!("Next step.\n```js\n{code}\n```"))
}

/// The settings tests start from (the rig gives each service its own workspace folder).
pub fn config() -> ScripterConfig {
    ScripterConfig {
        step_timeout_ms: 5_000,
        ..ScripterConfig::default()
    }
}

/// Starts the service with `cfg` (its workspace folder replaced by the rig's) and `replies`.
pub async fn rig_with(mut cfg: ScripterConfig, replies: Vec<MockResponse>) -> Rig {
    let workspace = tempfile::tempdir().unwrap();
    cfg.workspace_dir = Some(workspace.path().to_path_buf());
    let llm = MockLlmServer::start(replies).await.unwrap();
    let service = scripter_service(cfg, llm_client(&llm)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = tonic::transport::Server::builder().add_service(service);
    tokio::spawn(router.serve_with_incoming(TcpIncoming::from(listener)));
    let client = ScripterServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    Rig {
        llm,
        client,
        workspace,
    }
}

/// A model client whose scripter profile asks `llm`, with no retries.
pub fn llm_client(llm: &MockLlmServer) -> LlmClient {
    let toml = format!(
        "[providers.mock]\nwire = \"openai\"\nbase_url = \"{}/v1\"\nretry = {{ max_attempts = 1, initial_backoff = \"10ms\", max_backoff = \"10ms\" }}\n[profiles.scripter]\nprovider = \"mock\"\nmodel = \"scripted-model\"\n",
        llm.url()
    );
    LlmClient::from_config(&LlmConfig::from_toml_str(&toml).unwrap()).unwrap()
}

pub async fn rig(replies: Vec<MockResponse>) -> Rig {
    rig_with(config(), replies).await
}

pub fn request(task: &str) -> RunScriptRequest {
    RunScriptRequest {
        task_id: "task-1".into(),
        task: task.into(),
        ..RunScriptRequest::default()
    }
}

/// Runs a script task to its end; every event, `AgentFinished` last.
pub async fn run(rig: &Rig, req: RunScriptRequest) -> Vec<AgentEvent> {
    let mut client = rig.client.clone();
    let mut stream = client.run_script(req).await.unwrap().into_inner();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, stream.next()).await {
        let ev = ev.unwrap();
        let done = matches!(ev.kind, Some(agent_event::Kind::Finished(_)));
        events.push(ev);
        if done {
            break;
        }
    }
    events
}

pub fn finished(events: &[AgentEvent]) -> &AgentFinished {
    match events.last().and_then(|e| e.kind.as_ref()) {
        Some(agent_event::Kind::Finished(f)) => f,
        other => panic!("no AgentFinished at the end: {other:?}"),
    }
}

/// Output and error of each Observation, in order.
pub fn observations(events: &[AgentEvent]) -> Vec<(String, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(agent_event::Kind::Observation(o)) => Some((o.output.clone(), o.error.clone())),
            _ => None,
        })
        .collect()
}

/// The system and user prompts of the model's `i`-th request.
pub fn prompts(rig: &Rig, i: usize) -> (String, String) {
    let body = rig.llm.requests()[i].json();
    let text = |m: &serde_json::Value| match m {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    (
        text(&body["messages"][0]["content"]),
        text(&body["messages"][1]["content"]),
    )
}

/// An HTTP target for scripts: the scripted server from the llm testkit (it answers in order
/// and records every request it received).
pub async fn target(responses: Vec<MockResponse>) -> MockLlmServer {
    MockLlmServer::start(responses).await.unwrap()
}

/// A TCP server that accepts connections and never answers; it counts the connections it
/// accepted and the ones the other side closed.
pub struct Silent {
    pub addr: SocketAddr,
    pub accepted: Arc<AtomicUsize>,
    pub closed: Arc<AtomicUsize>,
}

pub async fn silent() -> Silent {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (a, c) = (accepted.clone(), closed.clone());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            a.fetch_add(1, Ordering::SeqCst);
            let c = c.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                // Read the request and whatever follows until the client hangs up.
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
                c.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    Silent {
        addr,
        accepted,
        closed,
    }
}

/// A server whose every response is an endless chunked body; counts the bytes it wrote and
/// the connections the client closed.
pub async fn endless() -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (w, c) = (written.clone(), closed.clone());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let (w, c) = (w.clone(), c.clone());
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n";
                if conn.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = format!("400\r\n{}\r\n", "y".repeat(1024));
                while conn.write_all(chunk.as_bytes()).await.is_ok() {
                    w.fetch_add(1024, Ordering::SeqCst);
                }
                c.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    (addr, written, closed)
}

/// Waits until `check` holds, at most `within`.
pub async fn until(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}
