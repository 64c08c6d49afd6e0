//! One Manipulate call is one trace: the caller's span, the text manipulator's
//! `invoke_agent text_manipulator` span, and under it the device service's GetState and
//! TypeText. Its own test binary: it installs a global subscriber.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::time::Duration;

use droidmesh_device::{DeviceConfig, device_service};
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_llm::{LlmClient, LlmConfig, WireFormat};
use droidmesh_proto::service_names;
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::text_manipulator_service_client::TextManipulatorServiceClient;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, DeviceBinding, LeaseRef, ManipulateRequest, StartAppRequest,
    TypeTextRequest, start_app_request,
};
use droidmesh_runtime::{ClientOptions, ServeOptions, connect, serve};
use droidmesh_sim::SimOptions;
use droidmesh_text_manipulator::{TextManipulatorConfig, text_manipulator_service};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tonic::service::Routes;
use tracing_subscriber::layer::SubscriberExt;

async fn serve_on_loopback(name: &str, service: &str, routes: Routes) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(
        listener,
        routes,
        ServeOptions::new(name, &[service]),
        std::future::pending(),
    ));
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_device_calls_of_an_edit_join_the_caller_s_trace() {
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

    let fleet = droidmesh_sim::start(SimOptions {
        base_port: 0,
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let serial = fleet.addrs()[0].to_string();
    let device = device_service(DeviceConfig {
        adb_server: String::new(),
        direct_devices: vec![serial.clone()],
        ..DeviceConfig::default()
    })
    .unwrap();
    let device_ep = serve_on_loopback("device", service_names::DEVICE, Routes::new(device)).await;
    let llm = MockLlmServer::start(vec![MockResponse::success(
        WireFormat::Openai,
        "```js\ninput_text(ORIGINAL.toUpperCase())\n```",
        "scripted-model",
        10,
        5,
    )])
    .await
    .unwrap();
    let toml = format!(
        "[providers.mock]\nwire = \"openai\"\nbase_url = \"{}/v1\"\n[profiles.text_manipulator]\nprovider = \"mock\"\nmodel = \"scripted-model\"\n",
        llm.url()
    );
    let llm_client = LlmClient::from_config(&LlmConfig::from_toml_str(&toml).unwrap()).unwrap();
    let svc = text_manipulator_service(
        TextManipulatorConfig::default(),
        llm_client,
        device_ep.clone(),
    )
    .unwrap();
    let ep = serve_on_loopback(
        "text-manipulator",
        service_names::TEXT_MANIPULATOR,
        Routes::new(svc),
    )
    .await;

    // Notes open, its field focused and holding a text.
    let mut device = DeviceServiceClient::connect(device_ep.clone())
        .await
        .unwrap();
    let lease = device
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.clone(),
            holder: "trace-test".into(),
            ttl_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let lease = LeaseRef {
        serial: serial.clone(),
        lease_id: lease.lease_id,
    };
    device
        .start_app(StartAppRequest {
            lease: Some(lease.clone()),
            app: Some(start_app_request::App::Package(
                "com.droidmesh.notes".into(),
            )),
            activity: String::new(),
        })
        .await
        .unwrap();
    let field = device
        .get_state(droidmesh_proto::v1::GetStateRequest {
            serial: serial.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .elements
        .into_iter()
        .find(|e| e.resource_id.ends_with("note_input"))
        .unwrap();
    device
        .type_text(TypeTextRequest {
            lease: Some(lease.clone()),
            text: "quiet".into(),
            index: Some(field.index),
            clear: false,
            sensitive: false,
        })
        .await
        .unwrap();

    let mut client =
        TextManipulatorServiceClient::new(connect(&ep, &ClientOptions::default()).unwrap());
    let caller = tracing::info_span!("caller");
    let trace_id = {
        let _enter = caller.enter();
        droidmesh_runtime::trace_context::current_traceparent().unwrap()
    }
    .split('-')
    .nth(1)
    .unwrap()
    .to_owned();
    let call = client.manipulate(ManipulateRequest {
        task_id: "task-trace".into(),
        subgoal: "Make it loud".into(),
        device: Some(DeviceBinding {
            endpoint: String::new(),
            lease: Some(lease),
        }),
        apply: true,
        ..ManipulateRequest::default()
    });
    let response = tracing::Instrument::instrument(call, caller.clone())
        .await
        .unwrap()
        .into_inner();
    drop(caller);
    assert!(response.result.as_ref().unwrap().success, "{response:?}");
    assert_eq!(response.text_to_type, "QUIET");

    // Server spans close after their response is written: wait for them, bounded.
    let in_trace = |spans: &[SpanData], name: &str| -> Vec<SpanData> {
        spans
            .iter()
            .filter(|s| s.name.contains(name) && s.span_context.trace_id().to_string() == trace_id)
            .cloned()
            .collect()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let spans = loop {
        provider.force_flush().unwrap();
        let spans = exporter.get_finished_spans().unwrap();
        let done = !in_trace(&spans, "invoke_agent text_manipulator").is_empty()
            && !in_trace(&spans, "DeviceService/TypeText").is_empty();
        if done || tokio::time::Instant::now() >= deadline {
            break spans;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    let agent = in_trace(&spans, "invoke_agent text_manipulator");
    let agent = agent
        .first()
        .unwrap_or_else(|| panic!("no agent span in {names:?}"));
    // Reading the field, typing, and reading it back: each a child of the agent's span.
    let reads = in_trace(&spans, "DeviceService/GetState");
    let typed = in_trace(&spans, "DeviceService/TypeText");
    assert_eq!((reads.len(), typed.len()), (2, 1), "{names:?}");
    for span in reads.iter().chain(&typed) {
        assert_eq!(
            span.parent_span_id,
            agent.span_context.span_id(),
            "{} is not under the agent's span",
            span.name
        );
    }
    fleet.shutdown().await;
}
