//! Which methods get labels of their own in the RPC metrics: a server made by `serve` names
//! the methods it registers (its services, health, reflection, the load report) and nothing
//! else, whatever paths callers make up. A real tonic client over loopback calls 300 methods
//! nobody registered, then a real one. A process of its own, so no other test's calls land in
//! its counters.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "support/scrape.rs"]
mod support;

use droidmesh_proto::v1::executor_service_server::{ExecutorService, ExecutorServiceServer};
use droidmesh_proto::v1::{
    AgentEvent, CheckSecretsRequest, CheckSecretsResponse, CodeActInput, ExecuteSubgoalRequest,
    ExecuteSubgoalResponse,
};
use droidmesh_runtime::{ServeOptions, serve};
use std::collections::BTreeSet;
use std::time::Duration;
use support::{call, get, scrape_until, start_admin};
use tokio::net::TcpListener;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

const EXECUTOR: &str = "droidmesh.v1.ExecutorService";

struct Exec;

#[tonic::async_trait]
impl ExecutorService for Exec {
    type RunCodeActStream = ReceiverStream<Result<AgentEvent, Status>>;

    async fn run_code_act(
        &self,
        _r: Request<Streaming<CodeActInput>>,
    ) -> Result<Response<Self::RunCodeActStream>, Status> {
        Err(Status::unimplemented("not asked of this double"))
    }

    async fn check_secrets(
        &self,
        _r: Request<CheckSecretsRequest>,
    ) -> Result<Response<CheckSecretsResponse>, Status> {
        Err(Status::unimplemented("not asked of this double"))
    }

    async fn execute_subgoal(
        &self,
        _r: Request<ExecuteSubgoalRequest>,
    ) -> Result<Response<ExecuteSubgoalResponse>, Status> {
        Ok(Response::new(ExecuteSubgoalResponse::default()))
    }
}

/// A unary call to `path` with an ExecuteSubgoal request, whatever the server serves there.
async fn call_path(channel: &Channel, path: &str) -> Result<ExecuteSubgoalResponse, Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let codec = tonic_prost::ProstCodec::<ExecuteSubgoalRequest, ExecuteSubgoalResponse>::default();
    let path = http::uri::PathAndQuery::try_from(path.to_owned()).unwrap();
    grpc.unary(Request::new(ExecuteSubgoalRequest::default()), path, codec)
        .await
        .map(Response::into_inner)
}

#[tokio::test]
async fn methods_nobody_registered_share_one_label_and_take_no_place_from_real_ones() {
    let admin = start_admin().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(
        listener,
        tonic::service::Routes::new(ExecutorServiceServer::new(Exec)),
        ServeOptions::new("executor", &[EXECUTOR]),
        std::future::pending(),
    ));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();

    // 300 made-up methods: 150 of a service this server serves, 150 of services it does not.
    for i in 0..300 {
        let path = if i % 2 == 0 {
            format!("/{EXECUTOR}/Bogus{i}")
        } else {
            format!("/bogus{i}.v1.Service/Method")
        };
        let err = call_path(&channel, &path).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unimplemented, "{path}: {err:?}");
    }
    // Then real ones: a droidmesh method, and one of health's.
    call_path(&channel, &format!("/{EXECUTOR}/ExecuteSubgoal"))
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    health
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .unwrap();

    let real = call(EXECUTOR, "ExecuteSubgoal", "0");
    let s = scrape_until(admin, Duration::from_secs(10), |s| {
        get(s, "rpc_server_requests_total", &real) == 1.0
    })
    .await;
    let health_check = call("grpc.health.v1.Health", "Check", "0");
    assert_eq!(get(&s, "rpc_server_requests_total", &health_check), 1.0);
    // UNIMPLEMENTED (12) under the placeholders OpenTelemetry names.
    let known_service = call(EXECUTOR, "_OTHER", "12");
    let unknown_service = call("_OTHER", "_OTHER", "12");
    assert_eq!(get(&s, "rpc_server_requests_total", &known_service), 150.0);
    assert_eq!(
        get(&s, "rpc_server_requests_total", &unknown_service),
        150.0
    );

    // Every label value is a registered name or the placeholder.
    let mut services = BTreeSet::new();
    let mut methods = BTreeSet::new();
    for sample in s
        .samples
        .iter()
        .filter(|x| x.metric.starts_with("rpc_server_"))
    {
        services.insert(sample.labels.get("rpc_service").unwrap().to_owned());
        methods.insert(sample.labels.get("rpc_method").unwrap().to_owned());
    }
    assert_eq!(
        services.into_iter().collect::<Vec<_>>(),
        ["_OTHER", EXECUTOR, "grpc.health.v1.Health"],
    );
    assert_eq!(
        methods.into_iter().collect::<Vec<_>>(),
        ["Check", "ExecuteSubgoal", "_OTHER"],
    );
}
