#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::collections::HashMap;
use std::sync::Mutex;

use droidmesh_proto::v1::{AgentEvent, LeaseRef, agent_event};
use droidmesh_runtime::ClientOptions;
use serde_json::json;
use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt as _};

use super::*;
use crate::config::ExecutorConfig;
use crate::device_tools::ToolCtx;
use crate::sandbox_tools::SandboxTools;

const TOKEN: &str = "tok-51d84b067f3a9c2e";

fn tools(toml_text: &str) -> BTreeMap<String, ToolConfig> {
    let cfg: ExecutorConfig = toml::from_str(toml_text).unwrap();
    cfg.tools
}

#[test]
fn every_problem_of_every_tool_is_reported_each_naming_its_key() {
    let cfg = ExecutorConfig {
        tools: tools(
            r#"
[tools.tap]
description = "clashes with a device tool"
js = "(a) => 1"

[tools."2fast"]
description = "not an identifier"
js = "(a) => 1"

[tools.typeof]
description = "a reserved word"
js = "(a) => 1"

[tools.weather]
description = " "
parameters = { type = "object", properties = { city = { type = 5 } } }
timeout_ms = 0
max_calls_per_run = 0
webhook = { url = "ftp://weather.example/now", method = "TRACE", headers = { "Bad Name" = "x", Authorization = "Bearer {secret:tok" }, allow_hosts = ["http://x"], max_response_bytes = 0 }

[tools.both]
description = "both kinds"
parameters = '{"type": "array"}'
js = "(a) => 1"
webhook = { url = "not a url" }

[tools.neither]
description = "no kind"
parameters = "{not json"

[tools.notafunction]
description = "a number"
js = "42"

[tools.slow]
description = "longer than a step"
js = "(a) => 1"
timeout_ms = 70000
"#,
        ),
        ..ExecutorConfig::default()
    };
    let problems = cfg.problems();
    let expected = [
        "executor.tools.2fast: the name `2fast` is not a JavaScript identifier",
        "executor.tools.both.parameters must be the JSON Schema of an object",
        "executor.tools.both has both `webhook` and `js`",
        "executor.tools.neither.parameters is not JSON text",
        "executor.tools.neither needs `webhook = { url = \"...\" }` or `js = ",
        "executor.tools.notafunction.js must be a JavaScript function expression",
        "executor.tools.tap: the name `tap` is taken by the device tool `tap`",
        "executor.tools.typeof: the name `typeof` is reserved",
        "executor.tools.weather.description is empty",
        "executor.tools.weather.parameters does not compile",
        "executor.tools.weather.timeout_ms must be between 10 and executor.step_timeout_ms (60000), got 0",
        "executor.tools.weather.max_calls_per_run must be at least 1, got 0",
        "executor.tools.weather.webhook.url: the ftp: scheme is not allowed",
        "executor.tools.weather.webhook.method must be one of GET, POST, PUT, PATCH, DELETE, got `TRACE`",
        "executor.tools.weather.webhook.headers.Authorization has a `{secret:` without its closing `}`",
        "executor.tools.weather.webhook.headers.Bad Name is not a valid header name",
        "executor.tools.weather.webhook.allow_hosts entry `http://x`",
        "executor.tools.weather.webhook.max_response_bytes must be between 1 and 16777216, got 0",
        "executor.tools.slow.timeout_ms must be between 10 and executor.step_timeout_ms (60000), got 70000",
    ];
    for want in expected {
        assert!(
            problems.iter().any(|p| p.starts_with(want)),
            "no problem starts with {want:?}: {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    // A bad URL in the second tool is named although the first tool has problems too.
    let both = ExecutorConfig {
        tools: tools("[tools.x]\ndescription = \"d\"\nwebhook = { url = \"not a url\" }\n"),
        ..ExecutorConfig::default()
    };
    assert_eq!(
        both.problems(),
        [
            "executor.tools.x.webhook.url must be an absolute http or https URL, got `not a url`: relative URL without a base"
        ]
    );
}

#[test]
fn a_webhook_naming_a_secret_the_executor_lacks_does_not_start() {
    let cfg = tools(
        "[tools.weather]\ndescription = \"d\"\nwebhook = { url = \"https://weather.example/\", headers = { Authorization = \"Bearer {secret:weather_token}\" } }\n",
    );
    let e = CustomTools::new(&cfg, 60_000, &Secrets::from(HashMap::new())).unwrap_err();
    assert_eq!(
        e,
        "executor.tools.weather.webhook.headers names the secret `weather_token`, which this executor does not hold: set the environment variable DROIDMESH_SECRET_WEATHER_TOKEN or put a file named `weather_token` in the `[secrets] dir`"
    );
    let held = Secrets::from(HashMap::from([("weather_token".into(), TOKEN.into())]));
    assert!(CustomTools::new(&cfg, 60_000, &held).is_ok());
}

#[test]
fn a_task_s_tool_list_grants_tools_of_both_kinds() {
    let custom = CustomTools::new(
        &tools("[tools.add]\ndescription = \"d\"\njs = \"(a) => 1\"\n[tools.sub]\ndescription = \"d\"\njs = \"(a) => 2\"\n"),
        60_000,
        &Secrets::from(HashMap::new()),
    )
    .unwrap();
    let names = |(device, custom): (Vec<ToolSpec>, Vec<Arc<CustomTool>>)| {
        let mut all: Vec<String> = device.iter().map(|t| t.name.to_owned()).collect();
        all.extend(custom.iter().map(|t| t.name().to_owned()));
        all
    };
    let every = names(custom.select::<&str>(&[]).unwrap());
    assert_eq!(every.len(), agent_tools::device_tools().len() + 2);
    assert_eq!(
        names(custom.select(&["tap", "sub", "click"]).unwrap()),
        ["tap", "sub"]
    );
    assert_eq!(names(custom.select(&["add"]).unwrap()), ["add"]);
    let e = custom.select(&["fly"]).unwrap_err().to_string();
    assert!(e.starts_with("unknown tool `fly`"), "{e}");
}

/// A span (its id and name) or an event (id 0, "event") with its fields as text.
type Entry = (u64, String, BTreeMap<String, String>);

/// Every span's and event's fields.
#[derive(Clone, Default)]
struct Recorded(Arc<Mutex<Vec<Entry>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Recorded {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        _: Context<'_, S>,
    ) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name().to_owned();
        self.0.lock().unwrap().push((id.into_u64(), name, fields));
    }
    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _: Context<'_, S>,
    ) {
        let mut all = self.0.lock().unwrap();
        if let Some((_, _, fields)) = all.iter_mut().find(|(i, _, _)| *i == id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push((0, "event".into(), fields));
    }
}

fn bridge(events: mpsc::Sender<Result<AgentEvent, tonic::Status>>) -> SandboxTools {
    // Lazy: nothing connects, no device tool runs.
    let channel =
        droidmesh_runtime::connect("http://127.0.0.1:9", &ClientOptions::default()).unwrap();
    let ctx = ToolCtx::new(
        droidmesh_runtime::device::DeviceLink::new(
            droidmesh_proto::v1::device_service_client::DeviceServiceClient::new(channel),
            "http://127.0.0.1:9",
            Duration::from_secs(30),
        ),
        LeaseRef {
            serial: "emulator-5554".into(),
            lease_id: "l".into(),
        },
        HashMap::new(),
        "codeact",
    );
    SandboxTools::new(ctx, events).for_task("t-9")
}

#[tokio::test]
async fn each_call_is_an_execute_tool_span_and_two_events_without_the_secret() {
    let recorded = Recorded::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(recorded.clone()));
    let app = axum::Router::new().fallback(|headers: axum::http::HeaderMap| async move {
        let auth = headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_owned());
        axum::Json(json!({"temp_c": 21, "echo": auth}))
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let custom = CustomTools::new(
        &tools(&format!(
            "[tools.weather]\ndescription = \"d\"\nparameters = {{ type = \"object\", properties = {{ city = {{ type = \"string\" }} }}, required = [\"city\"] }}\nwebhook = {{ url = \"http://127.0.0.1:{port}/now\", headers = {{ Authorization = \"Bearer {{secret:weather_token}}\" }}, allow_hosts = [\"127.0.0.1\"] }}\n"
        )),
        60_000,
        &Secrets::from(HashMap::from([("weather_token".into(), TOKEN.into())])),
    )
    .unwrap();
    let weather = custom.find("weather").unwrap().clone();
    let (tx, mut rx) = mpsc::channel(16);
    let tools = bridge(tx);
    tools.set_step(3);
    let answer = tools
        .call_custom(&weather, json!({"city": "Oslo"}))
        .await
        .unwrap();
    assert_eq!(answer, json!({"temp_c": 21, "echo": "Bearer [REDACTED]"}));
    let e = tools
        .call_custom(&weather, json!({"town": "Oslo"}))
        .await
        .unwrap_err();
    assert!(
        e.starts_with("the arguments do not fit the tool's schema: "),
        "{e}"
    );

    let spans: Vec<BTreeMap<String, String>> = recorded
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, name, _)| name == "execute_tool")
        .map(|(_, _, fields)| fields.clone())
        .collect();
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let want = [
        ("otel.name", "execute_tool weather"),
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "weather"),
        ("gen_ai.tool.type", "extension"),
        ("gen_ai.tool.call.id", "1"),
        ("droidmesh.task.id", "t-9"),
        ("droidmesh.device.serial", "emulator-5554"),
        ("droidmesh.step", "3"),
        ("http.request.method", "POST"),
        ("server.address", "127.0.0.1"),
        ("http.response.status_code", "200"),
    ];
    for (key, value) in want {
        assert_eq!(
            spans[0].get(key).map(String::as_str),
            Some(value),
            "{key}: {spans:#?}"
        );
    }
    assert!(!spans[0].contains_key("error.type"), "{spans:#?}");
    assert_eq!(spans[1]["gen_ai.tool.call.id"], "2");
    assert_eq!(spans[1]["error.type"], "invalid_arguments");

    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e.unwrap());
    }
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match &e.kind {
            Some(agent_event::Kind::ToolCall(c)) => {
                format!("call {} {}", c.call_id, c.arguments_json)
            }
            Some(agent_event::Kind::ToolResult(r)) => {
                let r = r.result.as_ref().unwrap();
                format!("result {} {}", r.success, r.action_taken)
            }
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(kinds.len(), 4, "{kinds:#?}");
    assert_eq!(kinds[0], r#"call 1 {"city":"Oslo"}"#);
    assert!(
        kinds[1].starts_with(&format!(
            "result true weather: POST http://127.0.0.1:{port}/now answered 200 OK ("
        )),
        "{kinds:#?}"
    );
    assert_eq!(kinds[2], r#"call 2 {"town":"Oslo"}"#);
    assert_eq!(kinds[3], "result false weather failed");
    // The secret went to the server only: no span, log line or event holds it.
    let everything = format!("{:?} {events:?}", recorded.0.lock().unwrap());
    assert!(!everything.contains(TOKEN), "{everything}");
}
