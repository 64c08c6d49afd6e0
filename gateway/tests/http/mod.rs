//! The gateway's HTTP face with a plain HTTP client (reqwest) on the stack's real gateway:
//! tasks created and followed as Server-Sent Events (`flows`), and the refusals and the
//! OpenAPI document (`refusals`). These are the helpers: a client, an SSE reader, task calls.
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

mod flows;
mod refusals;

pub fn client() -> reqwest::Client {
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

pub async fn submit(http: &str, body: Value) -> String {
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

pub async fn get_json(url: &str) -> (StatusCode, Value) {
    let resp = client().get(url).send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap())
}

pub async fn wait_for_state(http: &str, id: &str, want: &str) -> Value {
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
pub fn seqs(events: &[Sse]) -> Vec<u64> {
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
