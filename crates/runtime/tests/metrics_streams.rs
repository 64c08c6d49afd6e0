//! How a bidirectional stream's end is counted in `rpc_server_requests_total`, with a real
//! tonic client over loopback against an ExecutorService double served by `serve`: a stream
//! whose client closes its side right after the last message, before the server's status
//! (as the gateway does with a finished RunCodeAct), ends with the server's status; one the
//! client leaves while the server still sends, or while it says nothing, is CANCELLED.
//! A process of its own, so no other test's calls land in its counters.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "support/scrape.rs"]
mod support;

use droidmesh_proto::v1::executor_service_client::ExecutorServiceClient;
use droidmesh_proto::v1::executor_service_server::{ExecutorService, ExecutorServiceServer};
use droidmesh_proto::v1::{
    AgentEvent, AgentFinished, CodeActInput, CodeActStart, ExecuteSubgoalRequest,
    ExecuteSubgoalResponse, agent_event, code_act_input,
};
use droidmesh_runtime::{ServeOptions, serve};
use std::sync::Arc;
use std::time::Duration;
use support::{active, call, get, scrape_until, start_admin};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

const EXECUTOR: &str = "droidmesh.v1.ExecutorService";

/// RunCodeAct by the start message's goal: `finish` sends a finished event and ends its stream
/// once released (ExecuteSubgoal `release`); `chatter` sends events until the client leaves;
/// `silent` sends one event and then nothing until the client leaves.
struct Streams {
    release: Arc<Notify>,
}

fn finished() -> AgentEvent {
    AgentEvent {
        kind: Some(agent_event::Kind::Finished(AgentFinished {
            agent: "codeact".into(),
            success: true,
            answer: "done".into(),
            ..AgentFinished::default()
        })),
    }
}

#[tonic::async_trait]
impl ExecutorService for Streams {
    type RunCodeActStream = ReceiverStream<Result<AgentEvent, Status>>;

    async fn run_code_act(
        &self,
        request: Request<Streaming<CodeActInput>>,
    ) -> Result<Response<Self::RunCodeActStream>, Status> {
        let mut inputs = request.into_inner();
        let goal = match inputs.next().await {
            Some(Ok(CodeActInput {
                kind: Some(code_act_input::Kind::Start(s)),
            })) => s.goal,
            other => {
                return Err(Status::invalid_argument(format!(
                    "expected start, found {other:?}"
                )));
            }
        };
        let (tx, rx) = mpsc::channel(4);
        let release = Arc::clone(&self.release);
        tokio::spawn(async move {
            match goal.as_str() {
                "finish" => {
                    let _ = tx.send(Ok(finished())).await;
                    release.notified().await;
                }
                "chatter" => {
                    for _ in 0..100_000 {
                        if tx.send(Ok(AgentEvent::default())).await.is_err() {
                            break;
                        }
                    }
                }
                _ => {
                    let _ = tx.send(Ok(AgentEvent::default())).await;
                    tx.closed().await;
                }
            }
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
        if request.get_ref().subgoal == "release" {
            self.release.notify_one();
        }
        Ok(Response::new(ExecuteSubgoalResponse::default()))
    }
}

/// Serves the double with `opts` on a loopback port; a client on one connection to it.
async fn start(opts: ServeOptions) -> ExecutorServiceClient<Channel> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let svc = ExecutorServiceServer::new(Streams {
        release: Arc::default(),
    });
    tokio::spawn(serve(
        listener,
        tonic::service::Routes::new(svc),
        opts,
        std::future::pending(),
    ));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    ExecutorServiceClient::new(channel)
}

/// Opens RunCodeAct with `goal`, reads its first event and leaves: the response stream
/// dropped, the input closed.
async fn open_read_one_and_leave(client: &mut ExecutorServiceClient<Channel>, goal: &str) {
    let (input_tx, input_rx) = mpsc::channel(4);
    let start = code_act_input::Kind::Start(CodeActStart {
        goal: goal.to_owned(),
        ..CodeActStart::default()
    });
    input_tx
        .send(CodeActInput { kind: Some(start) })
        .await
        .unwrap();
    let mut events = client
        .run_code_act(ReceiverStream::new(input_rx))
        .await
        .unwrap()
        .into_inner();
    events.message().await.unwrap().expect("one event");
    drop(events);
    drop(input_tx);
}

// One thread: the client's reset of a stream goes out before any later call on its
// connection, so the server has seen the reset when that later call arrives.
#[tokio::test(flavor = "current_thread")]
async fn a_stream_closed_after_its_last_message_ends_ok_and_an_abandoned_one_cancelled() {
    let admin = start_admin().await;
    // A grace far beyond any wait here: the outcome cannot hang on the machine's speed.
    let mut opts = ServeOptions::new("executor", &[EXECUTOR]);
    opts.metrics_end_grace = Duration::from_secs(60);
    let load = Arc::clone(&opts.load);
    let mut client = start(opts).await;
    let ok = call(EXECUTOR, "RunCodeAct", "0");
    let cancelled = call(EXECUTOR, "RunCodeAct", "1");
    let within = Duration::from_secs(30);

    // The gateway's way with a finished task: it reads the finished event and drops the
    // stream; the server's stream ends (OK) only after that reset has reached it.
    open_read_one_and_leave(&mut client, "finish").await;
    client
        .execute_subgoal(ExecuteSubgoalRequest {
            subgoal: "release".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let s = scrape_until(admin, within, |s| {
        active(s, EXECUTOR, "RunCodeAct") == 0.0
            && get(s, "rpc_server_requests_total", &ok)
                + get(s, "rpc_server_requests_total", &cancelled)
                == 1.0
    })
    .await;
    assert_eq!(
        (
            get(&s, "rpc_server_requests_total", &ok),
            get(&s, "rpc_server_requests_total", &cancelled)
        ),
        (1.0, 0.0),
        "a finished stream the client closed first counts as OK"
    );

    // A client that leaves while the server still has events to send abandoned it.
    open_read_one_and_leave(&mut client, "chatter").await;
    let s = scrape_until(admin, within, |s| {
        get(s, "rpc_server_requests_total", &cancelled) == 1.0
    })
    .await;
    assert_eq!(get(&s, "rpc_server_requests_total", &ok), 1.0);
    assert_eq!(active(&s, EXECUTOR, "RunCodeAct"), 0.0);

    // So did one that leaves while the server says nothing (counted once the grace is over:
    // a server of its own with a short one).
    let mut opts = ServeOptions::new("executor", &[EXECUTOR]);
    opts.metrics_end_grace = Duration::from_millis(100);
    let mut short = start(opts).await;
    open_read_one_and_leave(&mut short, "silent").await;
    let s = scrape_until(admin, within, |s| {
        get(s, "rpc_server_requests_total", &cancelled) == 2.0
    })
    .await;
    assert_eq!(get(&s, "rpc_server_requests_total", &ok), 1.0);
    assert_eq!(active(&s, EXECUTOR, "RunCodeAct"), 0.0);

    // While a left stream is watched for its status, the server's load (what balancing
    // clients and the capacity check read) has let it go already.
    open_read_one_and_leave(&mut client, "silent").await;
    let deadline = std::time::Instant::now() + within;
    while load.in_flight() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the load never let go"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let s = support::scrape(admin).await;
    assert_eq!(active(&s, EXECUTOR, "RunCodeAct"), 1.0, "still watched");
    assert_eq!(get(&s, "rpc_server_requests_total", &cancelled), 2.0);
}
