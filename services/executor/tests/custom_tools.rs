//! Tools the operator defines in config (`[executor.tools.<name>]`), called from CodeAct: a
//! webhook on a real HTTP server on loopback and a JavaScript function, each checked against
//! its JSON Schema before anything is done, errors thrown back to the model's code.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, Uri};
use droidmesh_executor::ExecutorConfig;
use droidmesh_proto::v1::{AgentEvent, agent_event};
use serde_json::{Value, json};

use crate::codeact::{finished, run};
use crate::rig::{Rig, reply, rig_full};

/// The secret the webhook's Authorization header carries.
const TOKEN: &str = "tok-7f3a9c2e51d84b06";

/// One request the loopback server received.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    path: String,
    query: Option<String>,
    authorization: Option<String>,
    body: String,
}

/// A loopback HTTP server that records what it receives and answers with the weather,
/// echoing the Authorization header it got (as a careless service might).
struct Hook {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Hook {
    async fn start() -> Self {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { port, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn answer(
    State(seen): State<Arc<Mutex<Vec<Seen>>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    request: Request,
) -> axum::Json<Value> {
    let body = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = String::from_utf8_lossy(&body).into_owned();
    let authorization = headers
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_owned());
    let city = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|b| b["city"].as_str().map(str::to_owned))
        .unwrap_or_default();
    seen.lock().unwrap().push(Seen {
        method,
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        authorization: authorization.clone(),
        body,
    });
    axum::Json(json!({"city": city, "temp_c": 21, "auth_seen": authorization}))
}

/// An executor config from `[executor]` TOML (as droidmesh.toml holds it, without the table
/// name), with a short step timeout for tests.
pub(crate) fn config(toml_text: &str) -> ExecutorConfig {
    let mut cfg: ExecutorConfig = toml::from_str(toml_text).unwrap();
    cfg.step_timeout_ms = 5_000;
    cfg
}

fn weather_tool(url: &str, allow: &str) -> String {
    format!(
        r#"
[tools.weather]
description = "The weather now in a city."
parameters = {{ type = "object", properties = {{ city = {{ type = "string", description = "the city's name" }} }}, required = ["city"], additionalProperties = false }}

[tools.weather.webhook]
url = "{url}"
method = "POST"
headers = {{ Authorization = "Bearer {{secret:weather_token}}", X-Client = "droidmesh-tests" }}
{allow}
"#
    )
}

async fn weather_rig(url: &str, allow: &str, script: Vec<&str>) -> Rig {
    let secrets = HashMap::from([("weather_token".to_owned(), TOKEN.to_owned())]);
    rig_full(
        script.into_iter().map(reply).collect(),
        config(&weather_tool(url, allow)),
        secrets,
    )
    .await
}

/// The message of the request `i` the model received: `0` the system prompt, `1` the step's.
pub(crate) fn prompt(rig: &Rig, request: usize, message: usize) -> String {
    rig.llm.requests()[request].json()["messages"][message]["content"].to_string()
}

/// The calls of `tool` as (arguments, success, error) in order.
pub(crate) fn calls(events: &[AgentEvent], tool: &str) -> Vec<(String, bool, Option<String>)> {
    let mut args = HashMap::new();
    let mut out = Vec::new();
    for e in events {
        match &e.kind {
            Some(agent_event::Kind::ToolCall(c)) if c.tool == tool => {
                args.insert(c.call_id, c.arguments_json.clone());
            }
            Some(agent_event::Kind::ToolResult(r)) if r.tool == tool => {
                let result = r.result.clone().unwrap();
                let called = args.remove(&r.call_id).unwrap();
                out.push((called, result.success, result.error));
            }
            _ => {}
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_webhook_tool_called_from_codeact_reaches_a_loopback_server_with_validated_arguments() {
    let hook = Hook::start().await;
    let url = format!("http://127.0.0.1:{}/weather?source=test", hook.port);
    let rig = weather_rig(
        &url,
        r#"allow_hosts = ["127.0.0.1"]"#,
        vec![
            "```js\nconst w = weather({ city: 'Oslo' });\nconsole.log('temp ' + w.temp_c + ' in ' + w.city + ', auth ' + w.auth_seen);\ntry { weather({ city: 5 }) } catch (e) { console.log('refused: ' + e.message) }\ntry { weather({}) } catch (e) { console.log('refused: ' + e.message) }\n```",
            "```js\ncomplete(true, 'It is 21 C in Oslo')\n```",
        ],
    )
    .await;
    let events = run(&rig, "What is the weather in Oslo?", 5).await;
    let done = finished(&events);
    assert!(done.success, "{done:?}");

    // One request reached the server: the valid one, its arguments as the JSON body, the
    // secret in its header.
    let seen = hook.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].method, Method::POST);
    assert_eq!(seen[0].path, "/weather");
    assert_eq!(seen[0].query.as_deref(), Some("source=test"));
    assert_eq!(
        serde_json::from_str::<Value>(&seen[0].body).unwrap(),
        json!({"city": "Oslo"})
    );
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {TOKEN}").as_str())
    );

    // The model was shown the tool's signature, and read the answer and both refusals.
    let system = prompt(&rig, 0, 0);
    assert!(
        system.contains("weather(args: { city: string }): any — The weather now in a city."),
        "{system}"
    );
    let step2 = prompt(&rig, 1, 1);
    assert!(step2.contains("temp 21 in Oslo"), "{step2}");
    assert!(
        step2.contains("refused: weather: the arguments do not fit the tool's schema: at /city: 5 is not of type"),
        "{step2}"
    );
    assert!(
        step2.contains("\\\"city\\\" is a required property"),
        "{step2}"
    );

    // Three calls, each with its event; the invalid ones failed without a request.
    let calls = calls(&events, "weather");
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[0].0, r#"{"city":"Oslo"}"#);
    assert!(calls[0].1, "{calls:?}");
    assert!(!calls[1].1 && !calls[2].1, "{calls:?}");
    assert!(
        calls[1]
            .2
            .as_deref()
            .unwrap()
            .contains("do not fit the tool's schema"),
        "{calls:?}"
    );

    // The secret reached the server and nothing else: not the server's echo of it in the
    // answer, an event, or any prompt.
    assert!(step2.contains("auth Bearer [REDACTED]"), "{step2}");
    for request in rig.llm.requests() {
        assert!(!request.json().to_string().contains(TOKEN));
    }
    for event in &events {
        assert!(!format!("{event:?}").contains(TOKEN), "{event:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_webhook_to_a_loopback_address_without_allowance_is_refused_and_nothing_is_sent() {
    let hook = Hook::start().await;
    for host in ["127.0.0.1", "localhost"] {
        let url = format!("http://{host}:{}/weather", hook.port);
        let rig = weather_rig(
            &url,
            "",
            vec![
                "```js\ntry { weather({ city: 'Oslo' }) } catch (e) { console.log('refused: ' + e.message) }\n```",
                "```js\ncomplete(false, 'the weather service is out of reach')\n```",
            ],
        )
        .await;
        let events = run(&rig, "What is the weather in Oslo?", 5).await;
        assert_eq!(finished(&events).steps, 2);
        let step2 = prompt(&rig, 1, 1);
        let why = if host == "localhost" {
            "localhost resolves to 127.0.0.1, a loopback address"
        } else {
            "127.0.0.1 is a loopback address"
        };
        assert!(
            step2.contains(&format!(
                "refused: weather: request to http://{host}:{}/weather refused: {why}; allowed hosts: none",
                hook.port
            )),
            "{step2}"
        );
        let calls = calls(&events, "weather");
        assert_eq!(calls.len(), 1);
        assert!(!calls[0].1);
    }
    assert!(hook.seen().is_empty(), "{:?}", hook.seen());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_javascript_tool_runs_on_its_own_with_checked_arguments_and_a_call_budget() {
    let cfg = config(
        r#"
[tools.add]
description = "Adds two numbers."
parameters = '{"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}'
js = "(args) => ({ sum: args.a + args.b, sees_screen: typeof ui_state !== 'undefined' })"
max_calls_per_run = 2

[tools.broken]
description = "Always fails."
js = "function (args) { throw new Error('no such city') }"
"#,
    );
    let rig = rig_full(
        vec![
            reply(
                "```js\nconst r = add({ a: 2, b: 3 });\nconsole.log('sum ' + r.sum + ', sees screen ' + r.sees_screen);\ntry { add({ a: 'x', b: 1 }) } catch (e) { console.log('bad: ' + e.message) }\nadd({ a: 1, b: 1 });\ntry { add({ a: 1, b: 1 }) } catch (e) { console.log('third: ' + e.message) }\ntry { broken() } catch (e) { console.log('broken: ' + e.message) }\n```",
            ),
            reply("```js\ncomplete(true, '5')\n```"),
        ],
        cfg,
        HashMap::new(),
    )
    .await;
    let events = run(&rig, "Add 2 and 3", 5).await;
    assert!(finished(&events).success);
    let system = prompt(&rig, 0, 0);
    assert!(
        system.contains("add(args: { a: number, b: number }): any — Adds two numbers.")
            && system.contains("broken(args?: {}): any — Always fails."),
        "{system}"
    );
    let step2 = prompt(&rig, 1, 1);
    // The function runs in a context of its own: the step's globals are not there.
    assert!(step2.contains("sum 5, sees screen false"), "{step2}");
    assert!(
        step2.contains("bad: add: the arguments do not fit the tool's schema: at /a: \\\"x\\\" is not of type \\\"number\\\""),
        "{step2}"
    );
    assert!(
        step2.contains("third: add: called 2 times in this task, its limit"),
        "{step2}"
    );
    assert!(
        step2.contains("broken: broken: the tool's code threw Error: no such city"),
        "{step2}"
    );
    let adds = calls(&events, "add");
    assert_eq!(
        adds.iter().map(|c| c.1).collect::<Vec<_>>(),
        [true, false, true, false]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_outside_the_task_s_list_throws_a_clear_error_and_nothing_is_done() {
    let hook = Hook::start().await;
    let url = format!("http://127.0.0.1:{}/weather", hook.port);
    let mut text = weather_tool(&url, r#"allow_hosts = ["127.0.0.1"]"#);
    text.push_str(
        "\n[tools.add]\ndescription = \"Adds two numbers.\"\njs = \"(args) => ({ sum: args.a + args.b })\"\n",
    );
    let secrets = HashMap::from([("weather_token".to_owned(), TOKEN.to_owned())]);
    let rig = rig_full(
        vec![
            reply(
                "```js\ntry { tap(0) } catch (e) { console.log('tap: ' + e.message) }\ntry { weather({ city: 'Oslo' }) } catch (e) { console.log('weather: ' + e.message) }\nconsole.log('add ' + add({ a: 1, b: 2 }).sum)\n```",
            ),
            reply("```js\ncomplete(true, '3')\n```"),
        ],
        config(&text),
        secrets,
    )
    .await;
    let events = crate::codeact::run_with(&rig, "Add 1 and 2", 5, None, |start| {
        start.tools = vec!["complete".into(), "add".into()];
    })
    .await;
    assert!(finished(&events).success);
    // The tools the prompt lists (its example, further down, taps).
    let system = prompt(&rig, 0, 0);
    let listed = system.split("## Finishing").next().unwrap();
    assert!(
        listed.contains("add(args?: {}): any")
            && !listed.contains("weather(")
            && !listed.contains("tap("),
        "{listed}"
    );
    let step2 = prompt(&rig, 1, 1);
    for tool in ["tap", "weather"] {
        assert!(
            step2.contains(&format!(
                "{tool}: {tool}: not one of this task's tools (they are: complete, add); nothing was done"
            )),
            "{step2}"
        );
        assert!(calls(&events, tool).is_empty());
    }
    assert!(step2.contains("add 3"), "{step2}");
    // Nothing reached the service, and the phone still shows the launcher tap(0) would have left.
    assert!(hook.seen().is_empty());
    assert!(step2.contains("app: com.android.launcher3"), "{step2}");
}
