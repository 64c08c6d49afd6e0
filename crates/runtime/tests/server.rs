//! Health, reflection and drain, with real gRPC clients.
use droidmesh_runtime::{ClientOptions, ServeOptions, connect, serve};
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

async fn start(
    services: &[&str],
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<droidmesh_runtime::Result<()>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut opts = ServeOptions::new("test", services);
    opts.drain_timeout = Duration::from_secs(2);
    let handle = tokio::spawn(serve(listener, Routes::default(), opts, async {
        let _ = rx.await;
    }));
    (addr, tx, handle)
}

#[tokio::test]
async fn health_reports_each_service_and_drains_on_shutdown() {
    let (addr, stop, handle) = start(&[droidmesh_proto::service_names::DEVICE]).await;
    let channel = connect(&addr, &ClientOptions::default()).unwrap();
    let mut health = HealthClient::new(channel);
    for service in ["", droidmesh_proto::service_names::DEVICE] {
        let status = health
            .check(HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "service {service:?}");
    }
    let unknown = health
        .check(HealthCheckRequest {
            service: "droidmesh.v1.Nope".to_owned(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);

    stop.send(()).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("server stops within the drain timeout")
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
}

async fn list_services(addr: &str) -> Vec<String> {
    let channel = connect(addr, &ClientOptions::default()).unwrap();
    let mut client = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = client
        .server_reflection_info(tokio_stream::iter(vec![request]))
        .await
        .unwrap()
        .into_inner();
    let response = stream.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection response: {response:?}");
    };
    let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    names.sort();
    names
}

#[tokio::test]
async fn reflection_advertises_exactly_the_services_of_this_port() {
    use droidmesh_proto::service_names::{DEVICE, GATEWAY};
    let (addr, stop, _handle) = start(&[DEVICE]).await;
    assert_eq!(
        list_services(&addr).await,
        [
            DEVICE,
            droidmesh_proto::service_names::REPLICA,
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection"
        ],
        "a generic client must not be offered services this port does not serve"
    );
    let _ = stop.send(());

    let (addr, stop, _handle) = start(&[GATEWAY]).await;
    let names = list_services(&addr).await;
    assert!(names.iter().any(|n| n == GATEWAY), "{names:?}");
    assert!(!names.iter().any(|n| n == DEVICE), "{names:?}");
    let _ = stop.send(());
}

#[tokio::test]
async fn reflection_describes_the_types_a_served_method_uses() {
    // Types stay resolvable even when defined in files shared with unserved services.
    let (addr, stop, _handle) = start(&[droidmesh_proto::service_names::GATEWAY]).await;
    let channel = connect(&addr, &ClientOptions::default()).unwrap();
    let mut client = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol(
            "droidmesh.v1.ActionResult".to_owned(),
        )),
    };
    let mut stream = client
        .server_reflection_info(tokio_stream::iter(vec![request]))
        .await
        .unwrap()
        .into_inner();
    let response = stream.message().await.unwrap().unwrap();
    assert!(
        matches!(
            response.message_response,
            Some(MessageResponse::FileDescriptorResponse(ref f)) if !f.file_descriptor_proto.is_empty()
        ),
        "{response:?}"
    );
    let _ = stop.send(());
}

#[tokio::test]
async fn a_channel_over_two_endpoints_sends_calls_to_both() {
    // Each server reports a different service SERVING, so the answer shows which one took it.
    let (a, stop_a, _ha) = start(&["droidmesh.test.A"]).await;
    let (b, stop_b, _hb) = start(&["droidmesh.test.B"]).await;
    let channel = connect(&format!("{a}, http://{b}"), &ClientOptions::default()).unwrap();
    let mut health = HealthClient::new(channel);
    let (mut on_a, mut on_b) = (0, 0);
    for _ in 0..40 {
        let answer = health
            .check(HealthCheckRequest {
                service: "droidmesh.test.A".to_owned(),
            })
            .await;
        match answer {
            Ok(_) => on_a += 1,
            Err(status) if status.code() == tonic::Code::NotFound => on_b += 1,
            Err(other) => panic!("unexpected answer: {other:?}"),
        }
    }
    assert!(on_a > 0 && on_b > 0, "calls on a: {on_a}, on b: {on_b}");
    let _ = stop_a.send(());
    let _ = stop_b.send(());
}
