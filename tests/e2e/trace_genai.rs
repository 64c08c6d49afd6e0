//! What the first direct task's trace must say per the OpenTelemetry GenAI conventions:
//! span names, the agent and tool attributes, the task, device and step on each span, and
//! token counts equal to the model double's.
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;

use super::{Got, span_names};
use droidmesh_llm::WireFormat;
use droidmesh_llm::testkit::MockResponse;

/// Token counts the model double reports for the first task's two replies.
pub const USAGE: [(u64, u64); 2] = [(401, 31), (402, 32)];

pub fn counted(text: &str, (input, output): (u64, u64)) -> MockResponse {
    MockResponse::success(WireFormat::Openai, text, "scripted-model", input, output)
}

/// A span's attribute as text (strings as they are, other values as they print).
pub fn attr(span: &Span, key: &str) -> Option<String> {
    let value = span
        .attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?;
    Some(match value.value.as_ref()? {
        any_value::Value::StringValue(s) => s.clone(),
        any_value::Value::IntValue(i) => i.to_string(),
        any_value::Value::BoolValue(b) => b.to_string(),
        any_value::Value::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

/// The first task's trace names its spans per the GenAI conventions, labels each with the
/// task, the device and the step, and its chat spans count the tokens the model reported.
pub fn genai_spans(trace: &[Got], task_id: &str, serial: &str) {
    let names = span_names(trace);
    let named = |service: &str, name: &str| -> Vec<&Span> {
        trace
            .iter()
            .filter(|g| g.service == service && g.span.name == name)
            .map(|g| &g.span)
            .collect()
    };
    let one = |service: &str, name: &str| -> &Span {
        let found = named(service, name);
        assert_eq!(
            found.len(),
            1,
            "one {service} `{name}` span expected: {names:#?}"
        );
        found[0]
    };
    let has = |span: &Span, key: &str, want: &str| {
        assert_eq!(
            attr(span, key).as_deref(),
            Some(want),
            "{key} of `{}`: {:?}",
            span.name,
            span.attributes
        );
    };
    let task = one("droidmesh-gateway", "invoke_agent droidmesh");
    let run = one("droidmesh-executor", "invoke_agent executor");
    for (span, agent) in [(task, "droidmesh"), (run, "executor")] {
        has(span, "gen_ai.operation.name", "invoke_agent");
        has(span, "gen_ai.agent.name", agent);
        has(span, "droidmesh.task.id", task_id);
        has(span, "droidmesh.device.serial", serial);
        assert!(attr(span, "error.type").is_none(), "{:?}", span.attributes);
    }
    has(task, "droidmesh.mode", "direct");
    // Tool calls: the executor's, per step, each with its call id.
    for (tool, step) in [("open_app", "1"), ("tap", "2"), ("complete", "2")] {
        let span = one("droidmesh-executor", &format!("execute_tool {tool}"));
        has(span, "gen_ai.operation.name", "execute_tool");
        has(span, "gen_ai.tool.name", tool);
        has(span, "gen_ai.tool.type", "extension");
        has(span, "droidmesh.task.id", task_id);
        has(span, "droidmesh.device.serial", serial);
        has(span, "droidmesh.step", step);
        assert!(
            attr(span, "gen_ai.tool.call.id").is_some(),
            "{:?}",
            span.attributes
        );
    }
    // Every RPC served for the task (agent calls, device reads and actions, leases) names it.
    let rpcs: Vec<&Got> = trace
        .iter()
        .filter(|g| g.span.name.starts_with("droidmesh.v1."))
        .collect();
    assert!(rpcs.len() >= 5, "RPC spans of the task: {names:#?}");
    for g in rpcs {
        has(&g.span, "droidmesh.task.id", task_id);
    }
    // The device service's own span of the tap knows the task from the lease.
    let tap = one("droidmesh-device", "execute_tool tap");
    has(tap, "droidmesh.task.id", task_id);
    has(tap, "droidmesh.device.serial", serial);
    // ... and how long it waited for the UI to settle after it.
    has(tap, "droidmesh.settle.settled", "true");
    assert!(
        attr(tap, "droidmesh.settle.wait_ms").is_some_and(|v| v.parse::<u64>().is_ok()),
        "{:?}",
        tap.attributes
    );
    // Model calls: `chat {model}`, one per step, counting what the double reported.
    let chats = named("droidmesh-executor", "chat scripted-model");
    let mut counts: Vec<(u64, u64)> = chats
        .iter()
        .map(|span| {
            has(span, "gen_ai.operation.name", "chat");
            has(span, "droidmesh.task.id", task_id);
            has(span, "droidmesh.device.serial", serial);
            let n = |k: &str| attr(span, k).and_then(|v| v.parse().ok()).unwrap_or(0);
            (
                n("gen_ai.usage.input_tokens"),
                n("gen_ai.usage.output_tokens"),
            )
        })
        .collect();
    counts.sort_unstable();
    assert_eq!(counts, USAGE.to_vec(), "chat spans: {names:#?}");
    let mut steps: Vec<String> = chats
        .iter()
        .filter_map(|s| attr(s, "droidmesh.step"))
        .collect();
    steps.sort();
    assert_eq!(steps, ["1", "2"]);
    // Capture is on in this test: the prompt of step 1 holds the goal.
    assert!(
        chats.iter().any(|s| attr(s, "gen_ai.input.messages")
            .is_some_and(|m| m.contains("Open Settings and turn on Wi-Fi"))),
        "no chat span captured the prompt"
    );
}
