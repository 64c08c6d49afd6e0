//! Metrics over real parts: a tonic service served by `serve` (so with the RPC metrics layer),
//! called by a real gRPC client (unary calls, an error, a bidirectional stream kept open and
//! then ended), and `/metrics` scraped over HTTP on loopback and read with a Prometheus text
//! parser. A process of its own, so no other test's calls land in its counters.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "support/scrape.rs"]
mod support;

use droidmesh_proto::v1::executor_service_client::ExecutorServiceClient;
use droidmesh_proto::v1::executor_service_server::{ExecutorService, ExecutorServiceServer};
use droidmesh_proto::v1::{
    AgentEvent, CodeActInput, ExecuteSubgoalRequest, ExecuteSubgoalResponse,
};
use droidmesh_runtime::metrics::{AdminOptions, serve_admin};
use droidmesh_runtime::{ClientOptions, ServeOptions, connect, serve};
use prometheus_parse::{Scrape, Value};
use std::time::{Duration, Instant};
use support::{get, http_get};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::service::Routes;
use tonic::{Request, Response, Status, Streaming};

const EXECUTOR: &str = "droidmesh.v1.ExecutorService";

/// ExecuteSubgoal succeeds unless the subgoal is "fail"; RunCodeAct answers the first input
/// with one event and ends when the client closes its side.
struct Exec;

#[tonic::async_trait]
impl ExecutorService for Exec {
    type RunCodeActStream = ReceiverStream<Result<AgentEvent, Status>>;

    async fn run_code_act(
        &self,
        request: Request<Streaming<CodeActInput>>,
    ) -> Result<Response<Self::RunCodeActStream>, Status> {
        let mut inputs = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            if let Some(Ok(_)) = inputs.next().await {
                let _ = tx.send(Ok(AgentEvent::default())).await;
            }
            while let Some(Ok(_)) = inputs.next().await {}
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn check_secrets(
        &self,
        _r: Request<droidmesh_proto::v1::CheckSecretsRequest>,
    ) -> Result<Response<droidmesh_proto::v1::CheckSecretsResponse>, Status> {
        Err(Status::unimplemented("not asked of this double"))
    }

    async fn execute_subgoal(
        &self,
        request: Request<ExecuteSubgoalRequest>,
    ) -> Result<Response<ExecuteSubgoalResponse>, Status> {
        if request.get_ref().subgoal == "fail" {
            return Err(Status::invalid_argument("expected a subgoal, found `fail`"));
        }
        Ok(Response::new(ExecuteSubgoalResponse::default()))
    }
}

fn call(method: &str, code: &str) -> Vec<(&'static str, String)> {
    support::call(EXECUTOR, method, code)
}

fn active(scrape: &Scrape, method: &str) -> f64 {
    support::active(scrape, EXECUTOR, method)
}

async fn scrape_until(addr: std::net::SocketAddr, ok: impl Fn(&Scrape) -> bool) -> Scrape {
    support::scrape_until(addr, Duration::from_secs(10), ok).await
}

#[tokio::test]
async fn rpc_metrics_move_with_calls_and_streams_and_parse_as_prometheus_text() {
    let metrics = droidmesh_runtime::metrics::install("metrics-test", None).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc = listener.local_addr().unwrap().to_string();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut rx = stop_rx.clone();
    tokio::spawn(serve(
        listener,
        Routes::new(ExecutorServiceServer::new(Exec)),
        ServeOptions::new("executor", &[EXECUTOR]),
        async move {
            let _ = rx.wait_for(|s| *s).await;
        },
    ));
    let admin_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = admin_listener.local_addr().unwrap();
    let mut rx = stop_rx.clone();
    let admin_task = tokio::spawn(serve_admin(
        admin_listener,
        metrics,
        AdminOptions::default(),
        async move {
            let _ = rx.wait_for(|s| *s).await;
        },
    ));

    let mut client = ExecutorServiceClient::new(connect(&grpc, &ClientOptions::default()).unwrap());
    for subgoal in ["open settings", "tap wifi", "fail"] {
        let _ = client
            .execute_subgoal(ExecuteSubgoalRequest {
                subgoal: subgoal.to_owned(),
                ..Default::default()
            })
            .await;
    }

    // A stream in progress counts as active until it ends.
    let (input_tx, input_rx) = tokio::sync::mpsc::channel(4);
    input_tx.send(CodeActInput::default()).await.unwrap();
    let mut events = client
        .run_code_act(ReceiverStream::new(input_rx))
        .await
        .unwrap()
        .into_inner();
    events.message().await.unwrap().expect("one event");
    let during = scrape_until(admin, |s| {
        get(s, "rpc_server_requests_total", &call("ExecuteSubgoal", "3")) == 1.0
    })
    .await;
    assert_eq!(active(&during, "RunCodeAct"), 1.0);
    assert_eq!(active(&during, "ExecuteSubgoal"), 0.0);
    // The query an autoscaler runs: droidmesh services only, health and reflection excluded.
    let busy: f64 = during
        .samples
        .iter()
        .filter(|s| s.metric == "rpc_server_active_requests")
        .filter(|s| {
            s.labels
                .get("rpc_service")
                .unwrap()
                .starts_with("droidmesh.v1.")
        })
        .map(|s| match s.value {
            Value::Gauge(v) => v,
            ref other => panic!("active requests read as {other:?}"),
        })
        .sum();
    assert_eq!(busy, 1.0);
    assert_eq!(
        get(
            &during,
            "rpc_server_requests_total",
            &call("ExecuteSubgoal", "0")
        ),
        2.0
    );
    assert_eq!(
        get(
            &during,
            "rpc_server_duration_seconds_count",
            &call("ExecuteSubgoal", "0")
        ),
        2.0
    );
    assert_eq!(
        get(
            &during,
            "rpc_server_duration_seconds",
            &call("ExecuteSubgoal", "3")
        ),
        1.0,
        "the +Inf bucket of the failed call"
    );
    // Seconds, as the OpenTelemetry conventions and Prometheus ask: from 1 ms to 5 minutes.
    let bounds: Vec<f64> = during
        .samples
        .iter()
        .find(|s| s.metric == "rpc_server_duration_seconds")
        .map(|s| match &s.value {
            Value::Histogram(b) => b.iter().map(|b| b.less_than).collect(),
            other => panic!("the duration reads as {other:?}"),
        })
        .unwrap();
    assert_eq!(bounds.first(), Some(&0.001), "{bounds:?}");
    assert_eq!(bounds[bounds.len() - 2], 300.0, "{bounds:?}");
    assert!(
        get(
            &during,
            "rpc_server_duration_seconds_sum",
            &call("ExecuteSubgoal", "0")
        ) > 0.0
    );

    drop(input_tx);
    assert!(events.message().await.unwrap().is_none(), "the stream ends");
    let after = scrape_until(admin, |s| active(s, "RunCodeAct") == 0.0).await;
    assert_eq!(
        get(
            &after,
            "rpc_server_requests_total",
            &call("RunCodeAct", "0")
        ),
        1.0
    );

    // How a stream the client leaves is counted: tests/metrics_streams.rs.

    // The process itself: what it is, and what it uses.
    let info = after
        .samples
        .iter()
        .find(|s| s.metric == "target_info")
        .expect("target_info");
    assert!(
        matches!(info.value, Value::Gauge(v) if v == 1.0),
        "{info:?}"
    );
    assert_eq!(info.labels.get("service_name"), Some("metrics-test"));
    assert_eq!(
        info.labels.get("service_version"),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert!(
        info.labels
            .get("service_instance_id")
            .is_some_and(|id| id.len() >= 16),
        "{info:?}"
    );
    let process =
        |name: &str| support::value(&after, name, &[]).unwrap_or_else(|| panic!("no {name}"));
    assert!(process("process_cpu_seconds_total") > 0.0);
    let rss = process("process_resident_memory_bytes");
    assert!((1e6..64e9).contains(&rss), "{rss}");
    // At least stdin, stdout, stderr, the two listeners and a connection.
    assert!(process("process_open_fds") >= 6.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = process("process_start_time_seconds");
    assert!(
        now - 3600.0 < started && started <= now + 1.0,
        "{started} vs {now}"
    );

    // Prometheus's own linter finds nothing to say about any of it.
    let text = support::scrape_text(admin).await;
    let lint = promtool_check_metrics(&text);
    assert!(
        lint.is_empty(),
        "promtool check metrics:\n{lint}\n---\n{text}"
    );

    // Anything but GET /metrics is 404.
    let (status, _, _) = http_get(admin, "/").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    // The admin server stops with the process's shutdown.
    stop_tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), admin_task)
        .await
        .expect("the admin server stops within 5 s")
        .unwrap()
        .unwrap();
}

/// What `promtool check metrics` says of `text` (nothing when it finds no problem). Its
/// tool comes with Debian's `prometheus` package, which scripts/setup.sh installs.
fn promtool_check_metrics(text: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian's prometheus package has it: bash scripts/setup.sh)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.success(), said.trim().is_empty(), "{said}");
    said.trim().to_owned()
}

#[tokio::test]
async fn the_admin_server_refuses_oversized_heads_and_extra_connections() {
    let metrics = droidmesh_runtime::metrics::install("metrics-test", None).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let opts = AdminOptions {
        max_connections: 2,
        ..AdminOptions::default()
    };
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(serve_admin(listener, metrics, opts, async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));

    // A head over the cap gets 431 or a closed connection, never a scrape.
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let big = format!(
        "GET /metrics HTTP/1.1\r\nHost: test\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    let _ = stream.write_all(big.as_bytes()).await;
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .expect("the connection is answered or closed within 10 s");
    let text = String::from_utf8_lossy(&raw);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 431"),
        "{text}"
    );

    // Two idle connections hold both slots; a third is closed at once.
    let _idle1 = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _idle2 = tokio::net::TcpStream::connect(addr).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut third = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _ = third
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .await;
        let mut raw = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), third.read_to_end(&mut raw))
            .await
            .expect("the third connection is closed within 10 s");
        if raw.is_empty() {
            break;
        }
        // The idle ones may not have been accepted yet when this one was.
        assert!(
            Instant::now() < deadline,
            "a third connection kept being served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop_tx.send(true);
}
