//! Metrics over OTLP: with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a metrics collector on
//! loopback (and no admin port), `droidmesh up` exports the same instruments `/metrics` shows;
//! one task's count, steps and token usage arrive with the values the model double reported.
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric};

use super::*;

/// An OTLP/gRPC metrics collector that keeps the latest export of each metric by name.
#[derive(Clone, Default)]
struct Collector {
    latest: Arc<Mutex<std::collections::HashMap<String, Metric>>>,
}

#[tonic::async_trait]
impl MetricsService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let mut latest = self.latest.lock().unwrap();
        for rm in request.into_inner().resource_metrics {
            for sm in rm.scope_metrics {
                for m in sm.metrics {
                    latest.insert(m.name.clone(), m);
                }
            }
        }
        Ok(tonic::Response::new(ExportMetricsServiceResponse {
            partial_success: None,
        }))
    }
}

fn string_attr(attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue], key: &str) -> String {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| match &v.value {
            Some(any_value::Value::StringValue(s)) => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The counter's value over points whose `key` attribute is `value`.
fn sum_where(m: &Metric, key: &str, value: &str) -> f64 {
    let Some(metric::Data::Sum(sum)) = &m.data else {
        panic!("{} is not a sum: {:?}", m.name, m.data);
    };
    sum.data_points
        .iter()
        .filter(|p| string_attr(&p.attributes, key) == value)
        .map(|p| match p.value {
            Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(i)) => {
                i as f64
            }
            Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsDouble(
                d,
            )) => d,
            None => 0.0,
        })
        .sum()
}

/// The histogram's sum of observations over points whose `key` attribute is `value`.
fn histogram_sum_where(m: &Metric, key: &str, value: &str) -> f64 {
    let Some(metric::Data::Histogram(h)) = &m.data else {
        panic!("{} is not a histogram: {:?}", m.name, m.data);
    };
    h.data_points
        .iter()
        .filter(|p| string_attr(&p.attributes, key) == value)
        .map(|p| p.sum.unwrap_or(0.0))
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn one_task_reaches_an_otlp_metrics_collector() {
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(MetricsServiceServer::new(collector.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let llm = MockLlmServer::start(vec![MockResponse::success(
        WireFormat::Openai,
        "```javascript\ncomplete(true, 'nothing to do')\n```",
        "scripted-model",
        321,
        12,
    )])
    .await
    .unwrap();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200"),
    ];
    let (_up, mut gateway, serial) = super::metrics::start_up(&llm.url(), &[], &env).await;
    let mut stream = gateway
        .run_task(TaskRequest {
            goal: "Nothing".into(),
            device: serial,
            ..TaskRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut events = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
        events.push(ev.unwrap());
    }
    assert!(completed(&events).success, "{events:?}");

    // Exports come every 200 ms; wait for one that has seen the task end.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let latest = loop {
        let latest = collector.latest.lock().unwrap().clone();
        let counted = latest
            .get("droidmesh.tasks")
            .is_some_and(|m| sum_where(m, "outcome", "succeeded") >= 1.0);
        if counted {
            break latest;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no export counted the task in 20 s; metrics seen: {:?}",
            latest.keys().collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        sum_where(&latest["droidmesh.tasks"], "outcome", "succeeded"),
        1.0
    );
    let tokens = &latest["gen_ai.client.token.usage"];
    assert_eq!(
        histogram_sum_where(tokens, "gen_ai.token.type", "input"),
        321.0
    );
    assert_eq!(
        histogram_sum_where(tokens, "gen_ai.token.type", "output"),
        12.0
    );
    assert!(
        latest.contains_key("rpc.server.duration"),
        "{:?}",
        latest.keys()
    );
}
