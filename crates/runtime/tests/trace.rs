//! Trace-context propagation across one real gRPC hop.
//!
//! Its own test binary with one test: a scoped `set_default` subscriber races with
//! other test threads registering the same callsites (tracing caches a callsite's
//! interest globally), which made the server span go missing now and then.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use droidmesh_runtime::{ClientOptions, ServeOptions, connect, serve};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tracing_subscriber::layer::SubscriberExt;

#[tokio::test]
async fn trace_context_crosses_the_hop() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    tracing::subscriber::set_global_default(subscriber).unwrap();
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(
        listener,
        Routes::default(),
        ServeOptions::new("test", &[]),
        async {
            let _ = stopped.await;
        },
    ));
    let channel = connect(&addr, &ClientOptions::default()).unwrap();
    let mut health = HealthClient::new(channel);
    let client_span = tracing::info_span!("client_call");
    let traceparent = {
        let _enter = client_span.enter();
        droidmesh_runtime::trace_context::current_traceparent()
    };
    let traceparent = traceparent.expect("client span has a trace context");
    let call = health.check(HealthCheckRequest {
        service: String::new(),
    });
    tracing::Instrument::instrument(call, client_span.clone())
        .await
        .unwrap();
    drop(client_span);

    // The server span closes once the response body has been written, which
    // can be after the client already holds the response: wait for it (bounded).
    let trace_id = traceparent.split('-').nth(1).unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let spans = loop {
        provider.force_flush().unwrap();
        let spans = exporter.get_finished_spans().unwrap();
        let found = spans
            .iter()
            .any(|s| s.name.contains("grpc.health.v1.Health/Check"));
        if found || tokio::time::Instant::now() >= deadline {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let _ = stop.send(());
    let server = spans
        .iter()
        .find(|s| s.name.contains("grpc.health.v1.Health/Check"))
        .unwrap_or_else(|| {
            panic!(
                "no server span among {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        });
    assert_eq!(server.span_context.trace_id().to_string(), trace_id);
}
