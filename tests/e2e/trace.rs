//! One task is one distributed trace: with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a
//! collector on loopback, the spans the gateway, executor and device processes export for a
//! task share one trace id, and each hop's server span is the child of the caller's span. The
//! spans follow the OpenTelemetry GenAI conventions (`invoke_agent {agent}`, `chat {model}`,
//! `execute_tool {tool}`), and with `telemetry.capture_content` on they carry prompts and
//! completions with every configured secret redacted.
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;

use super::*;

#[path = "trace_genai.rs"]
mod genai;
use genai::{USAGE, attr, counted, genai_spans};

/// A span as the collector received it, with the service that sent it.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    span: Span,
}

/// An OTLP/gRPC trace collector on loopback that keeps every span.
#[derive(Clone)]
struct Collector {
    spans: Arc<Mutex<Vec<Got>>>,
    /// Counts exports, so a test waits for the next one instead of sleeping.
    exports: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Default for Collector {
    fn default() -> Self {
        Self {
            spans: Arc::default(),
            exports: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }
}

impl Collector {
    /// Waits, up to `within`, until the spans received so far satisfy `ready`; returns them.
    async fn spans_when(&self, within: Duration, ready: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        let mut exports = self.exports.subscribe();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let spans = self.spans.lock().unwrap().clone();
            if ready(&spans) {
                return spans;
            }
            match tokio::time::timeout_at(deadline, exports.changed()).await {
                Ok(Ok(())) => {}
                _ => return spans,
            }
        }
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap();
        for rs in request.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref())
                .and_then(|v| match &v.value {
                    Some(any_value::Value::StringValue(s)) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    spans.push(Got {
                        service: service.clone(),
                        span,
                    });
                }
            }
        }
        drop(spans);
        self.exports.send_modify(|n| *n += 1);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_is_one_trace_across_the_processes() {
    if !require_adb("cross-process tests") {
        return;
    }
    let (collector, otlp, server) = collector().await;
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str()),
        // Export batches quickly rather than every 5 s.
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("RUST_LOG", "info"),
        ("DROIDMESH_SECRET_PIN", SECRET),
        ("DROIDMESH_TELEMETRY__CAPTURE_CONTENT", "true"),
    ];
    let mesh = start_env(
        vec![
            counted("```javascript\nopen_app('Settings')\n```", USAGE[0]),
            counted("```javascript\nconst w = ui_state.find(e => e.text === 'Wi-Fi');\ntap(w.index);\ncomplete(true, 'Wi-Fi is on')\n```", USAGE[1]),
            reply("```javascript\nopen_app('Notes')\n```"),
            reply("```javascript\nconst f = ui_state.find(e => e.editable);\ntype_secret('PIN', f.index);\n```"),
            // A later step: the model sees the screen with the secret typed into it.
            reply("```javascript\nconst g = ui_state.find(e => e.editable);\nconsole.log('field shows', g.text);\n```"),
            reply("```javascript\ncomplete(true, 'typed')\n```"),
            // A goal that holds the secret's value: the model is sent it, no span shows it.
            reply("```javascript\ncomplete(true, 'noted')\n```"),
        ],
        &env,
    )
    .await;
    let events = run(
        &mesh,
        TaskRequest {
            goal: "Open Settings and turn on Wi-Fi".into(),
            device: mesh.serials[0].clone(),
            ..TaskRequest::default()
        },
    )
    .await;
    assert!(completed(&events).success);

    // The trace of the task: the one holding the gateway's RunTask span.
    let services = [
        "droidmesh-gateway",
        "droidmesh-executor",
        "droidmesh-device",
    ];
    // Each process's spans hang under a span of the process that called it: the trace is one
    // tree, not three trees that happen to share an id.
    let called_by = |t: &[Got], service: &str, caller: &str| {
        let by_id: HashMap<&[u8], &Got> =
            t.iter().map(|g| (g.span.span_id.as_slice(), g)).collect();
        t.iter()
            .filter(|g| g.service == service)
            .filter_map(|g| by_id.get(g.span.parent_span_id.as_slice()))
            .any(|p| p.service == caller)
    };
    // Complete once the Tap is in and the parents are (a parent span is exported when it
    // ends, possibly in a later batch).
    let complete = |t: &[Got]| {
        t.iter()
            .any(|g| g.service == "droidmesh-device" && g.span.name.contains("Tap"))
            && called_by(t, "droidmesh-executor", "droidmesh-gateway")
            && called_by(t, "droidmesh-device", "droidmesh-executor")
    };
    let trace = task_trace(&collector, &services, complete).await;
    let names = span_names(&trace);
    assert!(
        called_by(&trace, "droidmesh-executor", "droidmesh-gateway"),
        "no executor span is a child of a gateway span: {names:#?}"
    );
    assert!(
        called_by(&trace, "droidmesh-device", "droidmesh-executor"),
        "no device span is a child of an executor span: {names:#?}"
    );
    // The device's spans of this task carry no secrets or prompts; they name the device RPCs.
    assert!(
        trace
            .iter()
            .any(|g| g.service == "droidmesh-device" && g.span.name.contains("Tap")),
        "the tap is not in the trace: {names:#?}"
    );
    genai_spans(&trace, &events[0].task_id, &mesh.serials[0]);

    // A task that types a secret: its value reaches the phone but no span of any process.
    let events = run(
        &mesh,
        TaskRequest {
            goal: "Type the PIN into the note".into(),
            device: mesh.serials[1].clone(),
            secret_ids: vec!["PIN".into()],
            ..TaskRequest::default()
        },
    )
    .await;
    assert!(completed(&events).success, "{events:#?}");
    // After the secret was typed, two more steps ran: no model request, event or span holds it
    // (the device service reports the field masked for the rest of the lease).
    let requests = mesh.llm.requests();
    let after: Vec<String> = requests[requests.len() - 2..]
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    for body in &after {
        assert!(
            !body.contains(SECRET),
            "a later model request holds the secret: {body}"
        );
    }
    assert!(
        after[0].contains("\\u2022") || after[0].contains('\u{2022}'),
        "the next step's screen does not show the field masked: {}",
        after[0]
    );
    let shown = format!("{events:?}");
    assert!(!shown.contains(SECRET), "an event holds the secret");
    assert!(shown.contains("field shows"), "the later step did not run");
    let noted = run(
        &mesh,
        TaskRequest {
            goal: format!("Note that the door code is {SECRET}"),
            device: mesh.serials[1].clone(),
            ..TaskRequest::default()
        },
    )
    .await;
    assert!(completed(&noted).success, "{noted:#?}");
    let typed_secret = |spans: &[Got]| {
        spans
            .iter()
            .any(|g| g.service == "droidmesh-executor" && g.span.name == "execute_tool type_secret")
            && spans
                .iter()
                .any(|g| g.service == "droidmesh-device" && g.span.name.contains("TypeText"))
    };
    // The content is captured: the goal's words reach the chat span, the secret in it does not.
    let captured = |spans: &[Got]| {
        spans.iter().any(|g| {
            attr(&g.span, "gen_ai.input.messages")
                .is_some_and(|m| m.contains("Note that the door code is"))
        })
    };
    let spans = collector
        .spans_when(Duration::from_secs(10), |s| typed_secret(s) && captured(s))
        .await;
    assert!(
        typed_secret(&spans),
        "the type_secret call and its TypeText are not in the trace"
    );
    assert!(
        captured(&spans),
        "no chat span captured the goal: {:#?}",
        spans
            .iter()
            .filter_map(|g| attr(&g.span, "gen_ai.input.messages"))
            .collect::<Vec<_>>()
    );
    assert!(
        spans
            .iter()
            .any(|g| attr(&g.span, "gen_ai.output.messages").is_some_and(|m| m.contains("noted"))),
        "no chat span captured a completion"
    );
    for g in &spans {
        let text = format!("{:?}", g.span);
        assert!(
            !text.contains(SECRET),
            "the secret's value is in a {} span: {}",
            g.service,
            g.span.name
        );
    }
    assert!(
        spans.iter().any(|g| attr(&g.span, "gen_ai.input.messages")
            .is_some_and(|m| m.contains("door code is [REDACTED]"))),
        "the secret in the goal is not shown redacted"
    );
    let ui = mesh
        .adb
        .shell(&mesh.serials[1], "uiautomator dump /dev/tty")
        .unwrap();
    assert!(ui.contains(SECRET), "the secret was not typed on the phone");
    drop(mesh);
    server.abort();
}

const SECRET: &str = "4711-2342-zz";

/// The spans of the first task's trace (the one holding the gateway's RunTask span), once every
/// service in `services` has exported a span of it and `done` holds (or after 10 s); asserts
/// that each service is there.
async fn task_trace(
    collector: &Collector,
    services: &[&str],
    done: impl Fn(&[Got]) -> bool,
) -> Vec<Got> {
    let of_first_task = |spans: &[Got]| -> Vec<Got> {
        spans
            .iter()
            .find(|g| g.service == "droidmesh-gateway" && g.span.name.contains("RunTask"))
            .map(|root| {
                spans
                    .iter()
                    .filter(|g| g.span.trace_id == root.span.trace_id)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    let spans = collector
        .spans_when(Duration::from_secs(10), |spans| {
            let trace = of_first_task(spans);
            let seen: HashSet<&str> = trace.iter().map(|g| g.service.as_str()).collect();
            services.iter().all(|s| seen.contains(s)) && done(&trace)
        })
        .await;
    let trace = of_first_task(&spans);
    let names = span_names(&trace);
    for s in services {
        assert!(
            trace.iter().any(|g| g.service == *s),
            "no {s} span in the task's trace: {names:#?}"
        );
    }
    trace
}

fn span_names(trace: &[Got]) -> Vec<String> {
    trace
        .iter()
        .map(|g| format!("{}: {}", g.service, g.span.name))
        .collect()
}

/// Starts an OTLP collector on loopback; returns it, its endpoint and its server task.
async fn collector() -> (Collector, String, tokio::task::JoinHandle<()>) {
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp = format!("http://{}", listener.local_addr().unwrap());
    let svc = TraceServiceServer::new(collector.clone());
    let server = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await;
    });
    (collector, otlp, server)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reasoning_task_is_one_trace_across_every_agent_and_the_device() {
    if !require_adb("cross-process tests") {
        return;
    }
    let (collector, otlp, server) = collector().await;
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("RUST_LOG", "info"),
    ];
    let act = |a: &str| {
        reply(&format!(
            "### Thought\nok\n### Action\n{a}\n### Description\nok"
        ))
    };
    let plan = |p: &str| {
        reply(&format!(
            "<thought>\nnext\n</thought>\n<plan>\n{p}\n</plan>"
        ))
    };
    let mesh = start_with(
        vec![
            plan("1. Open the Notes app"),
            act(r#"{"action": "open_app", "name_or_package": "Notes"}"#),
            plan("1. Type \"b, a\" into the note field"),
            act(r#"{"action": "type_text", "text": "b, a", "index": 1}"#),
            plan("<script>\nSort the letters b and a.\n</script>"),
            reply("```js\nconsole.log(['b', 'a'].sort().join(', '))\n```"),
            reply("a, b"),
            plan("TEXT_TASK: Replace the text with \"a, b\""),
            reply("```js\ninput_text(\"a, b\")\n```"),
            reply("<thought>\ndone\n</thought>\n<request_accomplished success=\"true\">\nsorted\n</request_accomplished>"),
        ],
        Extra {
            env: &env,
            ..Extra::default()
        },
    )
    .await;
    let events = run(
        &mesh,
        TaskRequest {
            goal: "Sort my note".into(),
            device: mesh.serials[0].clone(),
            mode: droidmesh_proto::v1::Mode::Reasoning as i32,
            ..TaskRequest::default()
        },
    )
    .await;
    assert!(completed(&events).success, "{events:#?}");

    let services = [
        "droidmesh-gateway",
        "droidmesh-manager",
        "droidmesh-executor",
        "droidmesh-scripter",
        "droidmesh-text-manipulator",
        "droidmesh-device",
    ];
    let agents = [
        ("droidmesh-manager", "manager"),
        ("droidmesh-executor", "executor"),
        ("droidmesh-scripter", "scripter"),
        ("droidmesh-text-manipulator", "text_manipulator"),
    ];
    // Whether one of `service`'s spans hangs under the gateway's `invoke_agent {agent}`.
    let parented = |t: &[Got], service: &str, agent: &str| {
        let by_id: HashMap<&[u8], &Got> =
            t.iter().map(|g| (g.span.span_id.as_slice(), g)).collect();
        t.iter().filter(|g| g.service == service).any(|g| {
            by_id
                .get(g.span.parent_span_id.as_slice())
                .is_some_and(|p| {
                    p.service == "droidmesh-gateway"
                        && p.span.name == format!("invoke_agent {agent}")
                })
        })
    };
    // Complete once the executor's TypeText and the text manipulator's (the task's last
    // device call) are in, and each agent's span with its gateway parent (exported when the
    // call ends, so possibly in a later batch).
    let complete = |t: &[Got]| {
        t.iter()
            .filter(|g| g.service == "droidmesh-device" && g.span.name.ends_with("/TypeText"))
            .count()
            >= 2
            && agents.iter().all(|(s, a)| parented(t, s, a))
    };
    let trace = task_trace(&collector, &services, complete).await;
    let names = span_names(&trace);
    let by_id: HashMap<&[u8], &Got> = trace
        .iter()
        .map(|g| (g.span.span_id.as_slice(), g))
        .collect();
    // Each agent's RPC hangs under the gateway's `invoke_agent {agent}` span for it.
    for (service, agent) in agents {
        assert!(
            parented(&trace, service, agent),
            "no {service} span is a child of the gateway's invoke_agent {agent}: {names:#?}"
        );
    }
    // The device calls hang under the agents that made them.
    let device_parents: HashSet<String> = trace
        .iter()
        .filter(|g| g.service == "droidmesh-device")
        .filter_map(|g| by_id.get(g.span.parent_span_id.as_slice()))
        .map(|p| p.service.clone())
        .collect();
    for caller in [
        "droidmesh-manager",
        "droidmesh-executor",
        "droidmesh-text-manipulator",
    ] {
        assert!(
            device_parents.contains(caller),
            "no device span is a child of a {caller} span: {names:#?}"
        );
    }
    // The executor's subgoal, its RPC and its tool call carry the subgoal's step.
    let subgoal_spans: Vec<&Got> = trace
        .iter()
        .filter(|g| g.service == "droidmesh-executor")
        .filter(|g| {
            g.span.name == "invoke_agent executor"
                || g.span.name.ends_with("/ExecuteSubgoal")
                || g.span.name.starts_with("execute_tool ")
        })
        .collect();
    assert!(subgoal_spans.len() >= 6, "{names:#?}");
    for g in subgoal_spans {
        assert!(
            attr(&g.span, "droidmesh.step").is_some_and(|s| s == "1" || s == "2"),
            "{} has no step: {:?}",
            g.span.name,
            attr(&g.span, "droidmesh.step")
        );
    }
    // Every RPC served for the task, by every agent and the device, names the task.
    let task_id = &events[0].task_id;
    for g in trace
        .iter()
        .filter(|g| g.span.name.starts_with("droidmesh.v1."))
    {
        assert_eq!(
            attr(&g.span, "droidmesh.task.id").as_deref(),
            Some(task_id.as_str()),
            "{}: {}",
            g.service,
            g.span.name
        );
    }
    drop(mesh);
    server.abort();
}
