//! The gateway's HTTP face across processes: `droidmesh up` (real gateway, device service and
//! agents; a simulated phone; a scripted model double) called with a plain HTTP client. A task
//! is created, its Server-Sent Events followed, the follower disconnects mid-stream and
//! resumes with `Last-Event-ID`: every event up to `completed` arrives once, in order. Then
//! the task, the list and the refusals (malformed JSON, 413, 415, a key in the URL, an
//! unknown task) as JSON errors.
use super::metrics::start_up;
use super::*;
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    droidmesh_llm::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// Reads SSE events (`id`, `event`, `data` as JSON) as they arrive, skipping comments.
struct Events {
    resp: reqwest::Response,
    buf: String,
}

impl Events {
    async fn open(req: reqwest::RequestBuilder) -> Events {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        Events {
            resp,
            buf: String::new(),
        }
    }

    /// The next event as (id, event, data); `None` at the end. At most 30 s per event.
    async fn next(&mut self) -> Option<(u64, String, Value)> {
        loop {
            while let Some(at) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..at + 2).collect();
                let field = |name: &str| {
                    block
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(str::to_owned)
                };
                let Some(data) = field("data: ") else {
                    assert!(block.starts_with(':'), "not an event: {block:?}");
                    continue;
                };
                let id = field("id: ").unwrap().parse().unwrap();
                return Some((
                    id,
                    field("event: ").unwrap(),
                    serde_json::from_str(&data).unwrap(),
                ));
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.resp.chunk())
                .await
                .expect("no event within 30 s")
                .unwrap()?;
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tasks_over_http_resume_with_last_event_id_and_refusals_are_json() {
    // The second answer comes late: the task is running when the follower disconnects.
    let llm = MockLlmServer::start(vec![
        reply("Settings first.\n```javascript\nopen_app('Settings')\n```"),
        reply("```javascript\nconst w = ui_state.find(e => e.text === 'Wi-Fi');\ntap(w.index);\ncomplete(true, 'Wi-Fi is on')\n```")
            .delay(Duration::from_secs(2)),
    ])
    .await
    .unwrap();
    let port = free_port().to_string();
    let (_up, _grpc, serial) = start_up(
        &llm.url(),
        &[],
        &[("DROIDMESH_LISTEN__GATEWAY_HTTP", &port)],
    )
    .await;
    let http = format!("http://127.0.0.1:{port}");
    let c = client();

    let resp = c
        .post(format!("{http}/v1/tasks"))
        .json(&json!({"goal": "Open Settings and turn on Wi-Fi", "device": serial}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let id = resp.json::<Value>().await.unwrap()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let url = format!("{http}/v1/tasks/{id}/events");
    let mut first = Events::open(c.get(&url)).await;
    let mut seen = Vec::new();
    // Up to the first tool result: the step that waits on the late answer has begun.
    loop {
        let ev = first.next().await.unwrap();
        let done = ev.1 == "toolResult";
        seen.push(ev);
        if done {
            break;
        }
    }
    drop(first);
    let last = seen.last().unwrap().0;
    let mut resumed = Events::open(c.get(&url).header("Last-Event-ID", last.to_string())).await;
    while let Some(ev) = resumed.next().await {
        seen.push(ev);
    }
    let ids: Vec<u64> = seen.iter().map(|e| e.0).collect();
    assert_eq!(
        ids,
        (1..=seen.len() as u64).collect::<Vec<_>>(),
        "gaps or repeats"
    );
    for (id_line, event, data) in &seen {
        assert_eq!(data["seq"], id_line.to_string());
        assert!(data.get(event).is_some(), "{event}: {data}");
    }
    let (_, event, done) = seen.last().unwrap();
    assert_eq!(event, "completed");
    assert_eq!(done["completed"]["success"], true, "{done}");
    assert_eq!(done["completed"]["answer"], "Wi-Fi is on");
    let tools: Vec<&str> = seen
        .iter()
        .filter_map(|(_, _, d)| d["toolResult"]["tool"].as_str())
        .collect();
    assert_eq!(tools, ["open_app", "tap", "complete"]);

    let task: Value = c
        .get(format!("{http}/v1/tasks/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(task["state"], "TASK_STATE_SUCCEEDED");
    assert_eq!(task["lastSeq"], seen.len().to_string());
    assert_eq!(task["device"], serial.as_str());
    let list: Value = c
        .get(format!(
            "{http}/v1/tasks?states=TASK_STATE_SUCCEEDED&page_size=5"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["summaries"][0]["id"], id.as_str(), "{list}");
    assert_eq!(list["summaries"].as_array().unwrap().len(), 1);

    // Refusals, each `{"code", "message"}` with its HTTP status.
    let tasks = format!("{http}/v1/tasks");
    let refused = |resp: reqwest::Response, status: u16, code: &'static str| async move {
        assert_eq!(resp.status(), status);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["code"], code, "{body}");
        body["message"].as_str().unwrap().to_owned()
    };
    let json_body = |body: String| {
        c.post(&tasks)
            .header("content-type", "application/json")
            .body(body)
    };
    let m = refused(
        json_body(r#"{"goal": "x", "maxSteps": "ten"}"#.into())
            .send()
            .await
            .unwrap(),
        400,
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(m.starts_with("TaskRequest.maxSteps: "), "{m}");
    let big = format!(r#"{{"goal": "{}"}}"#, "g".repeat(2 * 1024 * 1024));
    let m = refused(
        json_body(big).send().await.unwrap(),
        413,
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(m.contains("gateway_http.max_body_bytes"), "{m}");
    let resp = c
        .post(&tasks)
        .body("goal=x")
        .header("content-type", "application/x-www-form-urlencoded")
        .send()
        .await
        .unwrap();
    refused(resp, 415, "INVALID_ARGUMENT").await;
    let m = refused(
        c.get(format!("{tasks}?api_key=sk-123"))
            .send()
            .await
            .unwrap(),
        400,
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(
        m.contains("Authorization: Bearer") && !m.contains("sk-123"),
        "{m}"
    );
    let m = refused(
        c.get(format!("{tasks}/task-unknown")).send().await.unwrap(),
        404,
        "NOT_FOUND",
    )
    .await;
    assert!(m.contains("task-unknown"), "{m}");
}
