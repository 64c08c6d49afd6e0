//! Server-Sent Events of a task: each `TaskEvent` as one event with `id: <seq>`, `event:` its
//! kind's JSON name and `data:` its JSON on one line, a comment line as keep-alive when no
//! event came for a while, and an `error` event if the stream fails. The stream ends after
//! the completed event (as the gRPC stream does), when the client goes away, or when the face
//! shuts down (a client then resumes elsewhere with `Last-Event-ID`).
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, header};
use http_body::Frame;
use tokio::sync::{mpsc, watch};
use tokio_stream::StreamExt as _;

use super::Body;
use super::error::ApiError;
use super::json;
use crate::watch::EventStream;

/// Frames written ahead of a slow client (each an event or a keep-alive); the gateway's
/// watcher holds its own bounded buffer behind this.
const FRAMES_AHEAD: usize = 16;

/// The SSE lines of one event (`id`, `event`, `data`) and an empty line.
pub fn event_frame(ev: &droidmesh_proto::v1::TaskEvent) -> Result<Bytes, ApiError> {
    let dynamic = json::dynamic(ev)?;
    let kind = json::oneof_case(&dynamic, "kind").unwrap_or_else(|| "event".into());
    let data = json::write_json(&dynamic)?;
    let mut out = Vec::with_capacity(data.len() + 48);
    out.extend_from_slice(format!("id: {}\nevent: {kind}\ndata: ", ev.seq).as_bytes());
    out.extend_from_slice(&data);
    out.extend_from_slice(b"\n\n");
    Ok(Bytes::from(out))
}

fn error_frame(e: &ApiError) -> Bytes {
    Bytes::from(format!("event: error\ndata: {}\n\n", e.body()))
}

const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// A `text/event-stream` response relaying `events`. `stop` turning true ends it.
pub fn response(
    events: EventStream,
    keep_alive: Duration,
    stop: watch::Receiver<bool>,
) -> http::Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(FRAMES_AHEAD);
    tokio::spawn(pump(events, tx, keep_alive, stop));
    let frames = tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(|b| Ok::<_, std::convert::Infallible>(Frame::data(b)));
    let mut resp = http::Response::new(Body::new(http_body_util::StreamBody::new(frames)));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies that buffer responses (nginx) would hold events back.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// Moves events into the response until the stream ends, the client goes away (the watcher is
/// dropped with it; for a `wait=true` task that cancels it, as for RunTask) or `stop`.
async fn pump(
    mut events: EventStream,
    tx: mpsc::Sender<Bytes>,
    keep_alive: Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let frame = tokio::select! {
            biased;
            () = super::stopped(&mut stop) => return,
            () = tx.closed() => return,
            next = tokio::time::timeout(keep_alive, events.next()) => match next {
                Err(_) => Bytes::from_static(KEEP_ALIVE),
                Ok(None) => return,
                Ok(Some(Ok(ev))) => match event_frame(&ev) {
                    Ok(f) => f,
                    Err(e) => {
                        let _ = tx.send(error_frame(&e)).await;
                        return;
                    }
                },
                Ok(Some(Err(status))) => {
                    let _ = tx.send(error_frame(&ApiError::from_status(&status))).await;
                    return;
                }
            },
        };
        tokio::select! {
            biased;
            () = super::stopped(&mut stop) => return,
            sent = tx.send(frame) => if sent.is_err() { return },
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use droidmesh_proto::v1::{TaskCompleted, TaskEvent, task_event};

    #[test]
    fn an_event_is_one_sse_event_named_by_its_kind() {
        let ev = TaskEvent {
            task_id: "task-1".into(),
            seq: 7,
            kind: Some(task_event::Kind::Completed(TaskCompleted {
                success: true,
                answer: "two\nlines".into(),
                ..TaskCompleted::default()
            })),
            ..TaskEvent::default()
        };
        let text = String::from_utf8(event_frame(&ev).unwrap().to_vec()).unwrap();
        assert_eq!(
            text,
            "id: 7\nevent: completed\ndata: {\"taskId\":\"task-1\",\"seq\":\"7\",\"completed\":{\"success\":true,\"answer\":\"two\\nlines\"}}\n\n"
        );
    }
}
