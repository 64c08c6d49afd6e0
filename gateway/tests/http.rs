//! The gateway's HTTP face with a plain HTTP client (reqwest) on the stack's real gateway:
//! tasks created and followed as Server-Sent Events, a follower that disconnects and resumes
//! with `Last-Event-ID`, `wait=true`, steering and cancelling, keep-alives, and the refusals
//! (malformed JSON, oversized bodies, wrong content types, credentials in URLs, unknown tasks
//! and routes), each a JSON error with its HTTP status.
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::harness::*;

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// One Server-Sent Event, or a comment line.
#[derive(Debug, Clone)]
pub struct Sse {
    pub id: Option<u64>,
    pub event: String,
    pub data: Value,
    pub comment: bool,
}

/// Reads Server-Sent Events from a response as they arrive.
pub struct SseReader {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

impl SseReader {
    pub fn new(resp: reqwest::Response) -> Self {
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(
            resp.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Self {
            resp,
            buf: Vec::new(),
        }
    }

    /// The next event or comment; `None` at the end of the stream. Fails after 20 s without one.
    pub async fn next(&mut self) -> Option<Sse> {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..at + 2).collect();
                let text = String::from_utf8(block).unwrap();
                let mut ev = Sse {
                    id: None,
                    event: String::new(),
                    data: Value::Null,
                    comment: false,
                };
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        ev.id = Some(v.parse().unwrap());
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        ev.event = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        ev.data = serde_json::from_str(v).unwrap();
                    } else if line.starts_with(':') {
                        ev.comment = true;
                    } else if !line.is_empty() {
                        panic!("not an SSE line: {line:?}");
                    }
                }
                return Some(ev);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.resp.chunk())
                .await
                .expect("no event within 20 s")
                .unwrap();
            match chunk {
                Some(c) => self.buf.extend_from_slice(&c),
                None => {
                    assert!(
                        self.buf.is_empty(),
                        "a partial event at the end: {:?}",
                        self.buf
                    );
                    return None;
                }
            }
        }
    }

    /// The next event, skipping keep-alive comments.
    pub async fn next_event(&mut self) -> Option<Sse> {
        loop {
            let ev = self.next().await?;
            if !ev.comment {
                return Some(ev);
            }
        }
    }

    /// Every event to the end of the stream.
    pub async fn rest(&mut self) -> Vec<Sse> {
        let mut out = Vec::new();
        while let Some(ev) = self.next_event().await {
            out.push(ev);
        }
        out
    }
}

async fn submit(http: &str, body: Value) -> String {
    let resp = client()
        .post(format!("{http}/v1/tasks"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let location = resp.headers()["location"].to_str().unwrap().to_owned();
    let id = resp.json::<Value>().await.unwrap()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(location, format!("/v1/tasks/{id}"));
    id
}

async fn get_json(url: &str) -> (StatusCode, Value) {
    let resp = client().get(url).send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap())
}

async fn wait_for_state(http: &str, id: &str, want: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, task) = get_json(&format!("{http}/v1/tasks/{id}")).await;
        assert_eq!(status, StatusCode::OK, "{task}");
        if task["state"] == want {
            return task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {id} never reached {want}: {task}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The seqs of events, checked against their `id:` lines and kinds against their names.
fn seqs(events: &[Sse]) -> Vec<u64> {
    events
        .iter()
        .map(|e| {
            let seq: u64 = e.data["seq"].as_str().unwrap().parse().unwrap();
            assert_eq!(e.id, Some(seq), "{e:?}");
            assert!(
                e.data.get(&e.event).is_some(),
                "event {e:?} is not named by its kind"
            );
            seq
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follower_that_reconnects_with_last_event_id_gets_every_event_once() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let http = &stack.http;
    // 40 steps of 20 ms: still running when the first follower goes away.
    let id = submit(
        http,
        json!({"goal": "count:40", "device": shared.serials[0]}),
    )
    .await;
    let url = format!("{http}/v1/tasks/{id}/events");
    let mut first = SseReader::new(client().get(&url).send().await.unwrap());
    let mut seen = Vec::new();
    while seen.len() < 6 {
        seen.push(first.next_event().await.unwrap());
    }
    drop(first);
    wait_for_state(http, &id, "TASK_STATE_RUNNING").await;
    let last = seen.last().unwrap().id.unwrap();
    // An EventSource reconnects to the same URL with Last-Event-ID; it wins over fromSeq.
    let resumed = client()
        .get(format!("{url}?fromSeq=1"))
        .header("Last-Event-ID", last.to_string())
        .send()
        .await
        .unwrap();
    seen.extend(SseReader::new(resumed).rest().await);
    let got = seqs(&seen);
    assert_eq!(
        got,
        (1..=seen.len() as u64).collect::<Vec<_>>(),
        "gaps or repeats"
    );
    let done = seen.last().unwrap();
    assert_eq!(done.event, "completed");
    assert_eq!(done.data["completed"]["success"], true);
    assert_eq!(done.data["completed"]["answer"], "counted to 40");
    assert_eq!(done.data["taskId"], id.as_str());

    // The whole log again with from_seq, and nothing more (204) after the last event.
    let all = SseReader::new(
        client()
            .get(format!("{url}?from_seq=1"))
            .send()
            .await
            .unwrap(),
    )
    .rest()
    .await;
    assert_eq!(seqs(&all), got);
    let end = client()
        .get(&url)
        .header("Last-Event-ID", got.len().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(end.status(), StatusCode::NO_CONTENT);

    let task = wait_for_state(http, &id, "TASK_STATE_SUCCEEDED").await;
    assert_eq!(task["lastSeq"], got.len().to_string());
    assert_eq!(task["request"]["goal"], "count:40");
    let (status, page) = get_json(&format!(
        "{http}/v1/tasks?states=TASK_STATE_SUCCEEDED&states=TASK_STATE_FAILED&pageSize=10"
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["summaries"][0]["id"], id.as_str());
    assert_eq!(page["summaries"][0]["success"], true);
    let (_, running) = get_json(&format!("{http}/v1/tasks?states=TASK_STATE_RUNNING")).await;
    assert_eq!(
        running,
        json!({}),
        "no running task: the fields at their defaults are left out"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_true_streams_the_run_and_a_client_that_leaves_cancels_it() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let http = &stack.http;
    let resp = client()
        .post(format!("{http}/v1/tasks?wait=true"))
        .json(&json!({"goal": "answer: 42", "device": shared.serials[1]}))
        .send()
        .await
        .unwrap();
    let events = SseReader::new(resp).rest().await;
    assert_eq!(seqs(&events), (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(events[0].event, "status");
    assert_eq!(events.last().unwrap().data["completed"]["answer"], "42");

    let resp = client()
        .post(format!("{http}/v1/tasks?wait=true"))
        .json(&json!({"goal": "slow", "device": shared.serials[1]}))
        .send()
        .await
        .unwrap();
    let mut reader = SseReader::new(resp);
    let first = reader.next_event().await.unwrap();
    let id = first.data["taskId"].as_str().unwrap().to_owned();
    while reader.next_event().await.unwrap().event != "stepStarted" {}
    drop(reader);
    let task = wait_for_state(http, &id, "TASK_STATE_CANCELLED").await;
    assert!(
        task["error"].as_str().unwrap().contains("disconnected"),
        "{task}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_is_steered_and_cancelled_and_idle_streams_keep_alive() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let http = &stack.http;
    let c = client();
    // The task asks for a human and waits: its stream is idle but for keep-alive comments.
    let id = submit(http, json!({"goal": "help", "device": shared.serials[2]})).await;
    let mut reader = SseReader::new(
        c.get(format!("{http}/v1/tasks/{id}/events"))
            .send()
            .await
            .unwrap(),
    );
    while reader.next_event().await.unwrap().event != "humanHelp" {}
    let comment = reader.next().await.unwrap();
    assert!(comment.comment, "expected a keep-alive, got {comment:?}");
    let msg = |body: Value| {
        c.post(format!("{http}/v1/tasks/{id}/messages"))
            .json(&body)
            .send()
    };
    let resp = msg(json!({"taskId": "task-other", "humanReply": "x"}))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let resp = msg(json!({"humanReply": "acct-7"})).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let reply: Value = resp.json().await.unwrap();
    assert_eq!(reply["accepted"], true, "{reply}");
    let rest = reader.rest().await;
    assert_eq!(
        rest.last().unwrap().data["completed"]["answer"],
        "used acct-7"
    );

    let id = submit(http, json!({"goal": "slow", "device": shared.serials[2]})).await;
    wait_for_state(http, &id, "TASK_STATE_RUNNING").await;
    let resp = c
        .post(format!("{http}/v1/tasks/{id}:cancel"))
        .json(&json!({"reason": "enough"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let task: Value = resp.json().await.unwrap();
    assert_eq!(task["state"], "TASK_STATE_CANCELLED", "{task}");
    // Cancelling again, without a body, answers the ended task.
    let resp = c
        .post(format!("{http}/v1/tasks/{id}:cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = msg(json!({"note": "too late"})).await.unwrap();
    let reply: Value = resp.json().await.unwrap();
    assert_eq!(reply["accepted"], Value::Null, "false is left out: {reply}");
}

/// Sends `head` and then nothing, and reads what the server answers within 5 s.
async fn raw(http: &str, head: &str) -> String {
    let addr = http.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .expect("no answer within 5 s")
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

async fn refused(resp: reqwest::Response, status: StatusCode, code: &str) -> String {
    assert_eq!(resp.status(), status);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
    body["message"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_json_errors_with_their_http_status() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let http = &stack.http;
    let c = client();
    let tasks = format!("{http}/v1/tasks");
    let post = |body: &'static str, ct: &'static str| {
        c.post(&tasks).header("content-type", ct).body(body).send()
    };
    let m = refused(
        post(r#"{"goal": 5}"#, "application/json").await.unwrap(),
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(
        m.starts_with("TaskRequest.goal: invalid type: integer"),
        "{m}"
    );
    let m = refused(
        post("{\"goal\": \"x\",\n\"maxSteps\": }", "application/json")
            .await
            .unwrap(),
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(m.contains("line 2 column 13"), "{m}");
    let m = refused(
        post(r#"{"goal": "x", "secretIds": [1]}"#, "application/json")
            .await
            .unwrap(),
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(m.starts_with("TaskRequest.secretIds: "), "{m}");
    let m = refused(
        post(
            r#"{"goal": "x", "priority": 1}"#,
            "application/json; charset=utf-8",
        )
        .await
        .unwrap(),
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(m.starts_with("TaskRequest.priority: no such field"), "{m}");
    let m = refused(
        post(r#"{"goal": "x"}"#, "text/plain").await.unwrap(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "INVALID_ARGUMENT",
    )
    .await;
    assert_eq!(
        m,
        "expected Content-Type: application/json, found text/plain"
    );
    // The gateway's own checks, as over gRPC.
    let m = refused(
        post(r#"{"goal": "  "}"#, "application/json").await.unwrap(),
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(m.contains("goal is empty"), "{m}");
    let resp = c
        .post(&tasks)
        .json(&json!({"goal": "x", "device": "no-such-phone-7"}))
        .send()
        .await
        .unwrap();
    assert!(
        refused(resp, StatusCode::NOT_FOUND, "NOT_FOUND")
            .await
            .contains("no-such-phone-7")
    );

    // Too large: refused by its Content-Length before the body is sent, or while streamed.
    let big = format!(r#"{{"goal": "{}"}}"#, "g".repeat(1024 * 1024));
    let resp = c
        .post(&tasks)
        .header("content-type", "application/json")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    let m = refused(resp, StatusCode::PAYLOAD_TOO_LARGE, "INVALID_ARGUMENT").await;
    assert!(m.contains("at most 1048576"), "{m}");
    let head = raw(http, "POST /v1/tasks HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: 1000000000\r\n\r\n{").await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    let chunks = big
        .into_bytes()
        .chunks(64 * 1024)
        .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
        .collect::<Vec<_>>();
    let resp = c
        .post(&tasks)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(tokio_stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    refused(resp, StatusCode::PAYLOAD_TOO_LARGE, "INVALID_ARGUMENT").await;

    // Credentials in the URL, on any route.
    for url in [
        format!("{tasks}?api_key=k-1"),
        format!("{http}/v1/devices?access_token=k-1"),
        format!("{http}/nowhere?key=k-1"),
    ] {
        let m = refused(
            c.get(&url).send().await.unwrap(),
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
        )
        .await;
        assert!(
            m.contains("Authorization: Bearer") && !m.contains("k-1"),
            "{m}"
        );
    }
    let m = refused(
        c.get(format!("{tasks}?colour=red")).send().await.unwrap(),
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(m.contains("unknown query parameter colour"), "{m}");
    let m = refused(
        c.get(format!("{tasks}?states=TASK_STATE_NAPPING"))
            .send()
            .await
            .unwrap(),
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
    )
    .await;
    assert!(
        m.contains("ListTasksRequest.states") && m.contains("TASK_STATE_NAPPING"),
        "{m}"
    );

    // Unknown tasks, routes and methods.
    let m = refused(
        c.get(format!("{tasks}/task-nope")).send().await.unwrap(),
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
    )
    .await;
    assert!(m.starts_with("no task with id 'task-nope'"), "{m}");
    refused(
        c.get(format!("{tasks}/task-nope/events"))
            .send()
            .await
            .unwrap(),
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
    )
    .await;
    refused(
        c.post(format!("{tasks}/task-nope:cancel"))
            .send()
            .await
            .unwrap(),
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
    )
    .await;
    let m = refused(
        c.get(format!("{http}/v1/things")).send().await.unwrap(),
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
    )
    .await;
    assert!(m.contains("/openapi.json"), "{m}");
    let resp = c.delete(&tasks).send().await.unwrap();
    assert_eq!(resp.headers()["allow"], "GET, POST");
    refused(resp, StatusCode::METHOD_NOT_ALLOWED, "UNIMPLEMENTED").await;

    // Past the end of a log, and a Last-Event-ID that is not a seq.
    let id = submit(
        http,
        json!({"goal": "answer: 1", "device": shared.serials[3]}),
    )
    .await;
    wait_for_state(http, &id, "TASK_STATE_SUCCEEDED").await;
    let events = format!("{tasks}/{id}/events");
    let m = refused(
        c.get(format!("{events}?fromSeq=999")).send().await.unwrap(),
        StatusCode::BAD_REQUEST,
        "OUT_OF_RANGE",
    )
    .await;
    assert!(m.contains("past the end"), "{m}");
    let resp = c
        .get(&events)
        .header("last-event-id", "soon")
        .send()
        .await
        .unwrap();
    refused(resp, StatusCode::BAD_REQUEST, "INVALID_ARGUMENT").await;
    // A busy device is a conflict (FAILED_PRECONDITION).
    let busy = submit(http, json!({"goal": "slow", "device": shared.serials[3]})).await;
    let resp = c
        .post(&tasks)
        .json(&json!({"goal": "me too", "device": shared.serials[3]}))
        .send()
        .await
        .unwrap();
    assert!(
        refused(resp, StatusCode::CONFLICT, "FAILED_PRECONDITION")
            .await
            .contains(&busy)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openapi_document_describes_every_route_from_the_protos() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let (status, doc) = get_json(&format!("{}/openapi.json", stack.http)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.0.3");
    let paths: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for p in [
        "/v1/tasks",
        "/v1/tasks/{id}",
        "/v1/tasks/{id}:cancel",
        "/v1/tasks/{id}/messages",
        "/v1/tasks/{id}/events",
        "/v1/devices",
        "/openapi.json",
    ] {
        assert!(paths.contains(&p), "{p} is not documented: {paths:?}");
    }
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for s in [
        "droidmesh.v1.TaskRequest",
        "droidmesh.v1.Task",
        "droidmesh.v1.TaskEvent",
        "droidmesh.v1.ListDevicesResponse",
        "Error",
    ] {
        assert!(schemas.contains_key(s), "no schema {s}");
    }
    // The devices answer matches its schema's field names.
    let (status, devices) = get_json(&format!("{}/v1/devices", stack.http)).await;
    assert_eq!(status, StatusCode::OK);
    let device_props = schemas["droidmesh.v1.DeviceInfo"]["properties"]
        .as_object()
        .unwrap();
    let devices = devices["devices"].as_array().unwrap();
    assert!(devices.len() >= FLEET, "{devices:?}");
    for d in devices {
        for key in d.as_object().unwrap().keys() {
            assert!(
                device_props.contains_key(key),
                "{key} is not in the DeviceInfo schema"
            );
        }
    }
}
