//! Refusals over HTTP, each a JSON error with its HTTP status: malformed JSON (naming the field
//! or the position), oversized bodies (413, before reading a declared size), wrong content
//! types (415), credentials in URLs, unknown tasks, routes and methods; and the OpenAPI
//! document.
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::harness::*;

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
