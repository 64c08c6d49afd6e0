//! The encoder against a private provider: names, suffixes, types, cumulative buckets and
//! escaping, and a Prometheus parser's reading of the result.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::{base_name, encode, encode_with};
use crate::metrics::process::Plain;
use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};
use std::sync::Arc;

fn provider() -> (SdkMeterProvider, Arc<ManualReader>) {
    let reader = Arc::new(ManualReader::builder().build());
    let provider = SdkMeterProvider::builder()
        .with_reader(super::super::SharedReader(reader.clone()))
        .build();
    (provider, reader)
}

fn render(reader: &ManualReader) -> String {
    let mut rm = ResourceMetrics::default();
    reader.collect(&mut rm).unwrap();
    encode(&rm)
}

#[test]
fn names_take_the_unit_as_a_suffix() {
    assert_eq!(
        base_name("rpc.server.duration", "s"),
        "rpc_server_duration_seconds"
    );
    assert_eq!(
        base_name("droidmesh.adb.command.duration", "ms"),
        "droidmesh_adb_command_duration_milliseconds"
    );
    assert_eq!(
        base_name("gen_ai.client.operation.duration", "s"),
        "gen_ai_client_operation_duration_seconds"
    );
    assert_eq!(
        base_name("gen_ai.client.token.usage", "{token}"),
        "gen_ai_client_token_usage"
    );
    assert_eq!(base_name("already_seconds", "s"), "already_seconds");
    assert_eq!(base_name("9lives", ""), "_9lives");
}

#[test]
fn counters_gauges_and_histograms_render_as_prometheus_reads_them() {
    let (provider, reader) = provider();
    let meter = provider.meter("test");
    let counter = meter.u64_counter("jobs.done").with_unit("{job}").build();
    counter.add(3, &[KeyValue::new("outcome", "ok")]);
    counter.add(1, &[KeyValue::new("outcome", "say \"no\"\\\n")]);
    let live = meter.i64_up_down_counter("jobs.live").build();
    live.add(2, &[]);
    live.add(-1, &[]);
    let hist = meter
        .f64_histogram("job.duration")
        .with_unit("ms")
        .with_description("How long a job ran")
        .with_boundaries(vec![1.0, 10.0])
        .build();
    for v in [0.5, 5.0, 5.0, 50.0] {
        hist.record(v, &[KeyValue::new("kind", "a")]);
    }
    let text = render(&reader);

    assert!(text.contains("# TYPE jobs_done_total counter\n"), "{text}");
    assert!(
        text.contains("jobs_done_total{outcome=\"ok\"} 3\n"),
        "{text}"
    );
    assert!(
        text.contains("jobs_done_total{outcome=\"say \\\"no\\\"\\\\\\n\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE jobs_live gauge\njobs_live 1\n"),
        "{text}"
    );
    assert!(
        text.contains("# HELP job_duration_milliseconds How long a job ran\n"),
        "{text}"
    );
    for line in [
        "job_duration_milliseconds_bucket{kind=\"a\",le=\"1\"} 1",
        "job_duration_milliseconds_bucket{kind=\"a\",le=\"10\"} 3",
        "job_duration_milliseconds_bucket{kind=\"a\",le=\"+Inf\"} 4",
        "job_duration_milliseconds_sum{kind=\"a\"} 60.5",
        "job_duration_milliseconds_count{kind=\"a\"} 4",
    ] {
        assert!(
            text.contains(&format!("{line}\n")),
            "missing {line}:\n{text}"
        );
    }

    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
    let done: f64 = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "jobs_done_total")
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v) => v,
            ref other => panic!("jobs_done_total read as {other:?}"),
        })
        .sum();
    assert_eq!(done, 4.0);
    // The escaped quote and line feed did not end the label early: both series parse, and
    // (prometheus-parse keeps escapes as written) the odd value reads back as escaped.
    let odd = scrape
        .samples
        .iter()
        .find(|s| s.metric == "jobs_done_total" && s.labels.get("outcome") != Some("ok"))
        .unwrap();
    assert_eq!(odd.labels.get("outcome"), Some(r#"say \"no\"\\\n"#));
}

#[test]
fn the_resource_is_target_info_and_plain_samples_are_families_of_their_own() {
    let reader = Arc::new(ManualReader::builder().build());
    let provider = SdkMeterProvider::builder()
        .with_reader(super::super::SharedReader(reader.clone()))
        .with_resource(crate::metrics::resource("encode-test"))
        .build();
    provider
        .meter("test")
        .u64_counter("jobs.done")
        .build()
        .add(1, &[]);
    let mut rm = ResourceMetrics::default();
    reader.collect(&mut rm).unwrap();
    let plain = [Plain {
        name: "process_open_fds",
        kind: "gauge",
        help: "Open file descriptors",
        value: 7.0,
    }];
    let text = encode_with(&rm, &plain);
    assert!(
        text.contains("# HELP process_open_fds Open file descriptors\n# TYPE process_open_fds gauge\nprocess_open_fds 7\n"),
        "{text}"
    );
    let info = text
        .lines()
        .find(|l| l.starts_with("target_info{"))
        .unwrap_or_else(|| panic!("no target_info in\n{text}"));
    assert!(info.ends_with("} 1"), "{info}");
    // Labels in key order: instance id, name, version, then the SDK's own.
    let id_at = info.find("service_instance_id=\"").unwrap();
    let name_at = info.find("service_name=\"encode-test\"").unwrap();
    let version_at = info
        .find(&format!(
            "service_version=\"{}\"",
            env!("CARGO_PKG_VERSION")
        ))
        .unwrap();
    assert!(id_at < name_at && name_at < version_at, "{info}");
    assert!(text.contains("# TYPE target_info gauge\n"), "{text}");
    // One process, one instance id, for every provider it makes.
    assert_eq!(
        crate::metrics::resource("a").get(&"service.instance.id".into()),
        crate::metrics::resource("b").get(&"service.instance.id".into())
    );
}
