//! What a client sees of the routing itself, over a real loopback connection: which path is
//! which route (a trailing slash is another path; task ids are percent-decoded and only a
//! literal `:cancel` cancels), HEAD refused as any other method the path does not serve, the
//! order of the refusals, and the head of an answer without a body.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;

/// One answer: its status line, its headers (names lower case, `date` left out) and body.
#[derive(Debug)]
struct Reply {
    status: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON error's code and message, checking it is one.
    fn error(&self) -> (String, String) {
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{self:?}"
        );
        let v: serde_json::Value = serde_json::from_str(&self.body).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
        (
            v["code"].as_str().unwrap().to_owned(),
            v["message"].as_str().unwrap().to_owned(),
        )
    }
}

/// Sends `method target` (with `extra` header lines and `body`) on a connection of its own.
async fn send(addr: SocketAddr, method: &str, target: &str, extra: &str, body: &str) -> Reply {
    let request = format!(
        "{method} {target} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (reply, _) = exchange(addr, request.as_bytes()).await;
    let (head, body) = reply.split_once("\r\n\r\n").expect("a whole head");
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().to_owned();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_owned()))
        .filter(|(n, _)| n != "date")
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

async fn get(addr: SocketAddr, target: &str) -> Reply {
    send(addr, "GET", target, "", "").await
}

fn no_route(path: &str) -> String {
    format!("no route {path}; see /openapi.json for the routes this face serves")
}

#[tokio::test]
async fn a_trailing_slash_or_an_extra_segment_is_no_route() {
    let (addr, _stop, _task) = face(HttpConfig::default()).await;
    for path in [
        "/",
        "/v1",
        "/v1/devices/",
        "/openapi.json/",
        "/v1/tasks/",
        "/v1/tasks//events",
        "/v1/tasks/t/",
        "/v1/tasks/t/x",
        "/v1/tasks/t/events/",
        "/v1/tasks/t/events/1",
        "/v2/tasks",
        "/V1/devices",
    ] {
        let r = get(addr, path).await;
        assert_eq!(r.status, "HTTP/1.1 404 Not Found", "{path}: {r:?}");
        assert_eq!(r.error(), ("NOT_FOUND".into(), no_route(path)), "{path}");
    }
}

#[tokio::test]
async fn task_ids_are_percent_decoded_and_only_a_literal_cancel_suffix_cancels() {
    let (addr, _stop, _task) = face(HttpConfig::default()).await;
    let unknown = |id: &str| {
        (
            "NOT_FOUND".to_owned(),
            format!("no task with id '{id}' (finished tasks are kept for a while, then forgotten)"),
        )
    };
    // The gateway names the id it was asked for: the path's, decoded.
    for (target, id) in [
        ("/v1/tasks/task-1", "task-1"),
        ("/v1/tasks/a%2Fb", "a/b"),
        ("/v1/tasks/a%3Acancel", "a:cancel"),
        ("/v1/tasks/caf%C3%A9", "café"),
        ("/v1/tasks/a+b", "a+b"),
    ] {
        let r = get(addr, target).await;
        assert_eq!(r.status, "HTTP/1.1 404 Not Found", "{target}: {r:?}");
        assert_eq!(r.error(), unknown(id), "{target}");
    }
    for (target, id) in [
        ("/v1/tasks/t:cancel", "t"),
        ("/v1/tasks/a%2Fb:cancel", "a/b"),
        ("/v1/tasks/t:cancel:cancel", "t:cancel"),
    ] {
        let r = send(addr, "POST", target, "", "").await;
        assert_eq!(r.status, "HTTP/1.1 404 Not Found", "{target}: {r:?}");
        assert_eq!(r.error(), unknown(id), "{target}");
    }
    let r = get(addr, "/v1/tasks/a%2Fb/events").await;
    assert_eq!(r.error(), unknown("a/b"), "events");
    let r = get(addr, "/v1/tasks/t:cancel/events").await;
    assert_eq!(r.error(), unknown("t:cancel"), "events");
    let r = send(
        addr,
        "POST",
        "/v1/tasks/a%2Fb/messages",
        "content-type: application/json\r\n",
        r#"{"note":"hi"}"#,
    )
    .await;
    assert_eq!(r.error(), unknown("a/b"), "messages");
    // A cancel without a task is no route; a task called ":cancel" has to be encoded.
    let r = send(addr, "POST", "/v1/tasks/:cancel", "", "").await;
    assert_eq!(
        r.error(),
        ("NOT_FOUND".into(), no_route("/v1/tasks/:cancel"))
    );
    let r = get(addr, "/v1/tasks/%3Acancel").await;
    assert_eq!(r.error(), unknown(":cancel"));
    // Bytes that are not UTF-8: refused before the method is looked at.
    for (method, target) in [
        ("GET", "/v1/tasks/%FF"),
        ("POST", "/v1/tasks/%FF:cancel"),
        ("DELETE", "/v1/tasks/%FF/events"),
        ("GET", "/v1/tasks/%FF/messages"),
    ] {
        let r = send(addr, method, target, "", "").await;
        assert_eq!(r.status, "HTTP/1.1 400 Bad Request", "{target}: {r:?}");
        assert_eq!(
            r.error(),
            (
                "INVALID_ARGUMENT".into(),
                "the task id in the path is not UTF-8".into()
            )
        );
    }
}

#[tokio::test]
async fn head_and_other_methods_a_path_does_not_serve_are_405_with_allow() {
    let (addr, _stop, _task) = face(HttpConfig::default()).await;
    for (method, path, allow) in [
        ("HEAD", "/openapi.json", "GET"),
        ("HEAD", "/v1/devices", "GET"),
        ("HEAD", "/v1/tasks", "GET, POST"),
        ("HEAD", "/v1/tasks/t", "GET"),
        ("HEAD", "/v1/tasks/t/events", "GET"),
        ("PUT", "/v1/tasks", "GET, POST"),
        ("OPTIONS", "/v1/devices", "GET"),
        ("POST", "/v1/tasks/t", "GET"),
        ("GET", "/v1/tasks/t:cancel", "POST"),
        ("DELETE", "/v1/tasks/t:cancel", "POST"),
        ("GET", "/v1/tasks/t/messages", "POST"),
        ("POST", "/v1/tasks/t/events", "GET"),
        ("PATCH", "/openapi.json", "GET"),
    ] {
        let r = send(addr, method, path, "", "").await;
        assert_eq!(
            r.status, "HTTP/1.1 405 Method Not Allowed",
            "{method} {path}: {r:?}"
        );
        assert_eq!(r.header("allow"), Some(allow), "{method} {path}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        let message = format!("{method} is not served on {path}; it serves {allow}");
        let length = format!(r#"{{"code":"UNIMPLEMENTED","message":"{message}"}}"#).len();
        assert_eq!(
            r.header("content-length"),
            Some(length.to_string().as_str()),
            "{method} {path}"
        );
        if method == "HEAD" {
            assert_eq!(r.body, "", "a body to HEAD");
            continue;
        }
        assert_eq!(r.error(), ("UNIMPLEMENTED".into(), message));
    }
}

#[tokio::test]
async fn refusals_come_in_order_credentials_route_method_query_body() {
    let (addr, _stop, _task) = face(HttpConfig::default()).await;
    let json = "content-type: application/json\r\n";
    let code = |r: Reply| (r.status.clone(), r.error().0);
    let bad = |s: &str| (s.to_owned(), "INVALID_ARGUMENT".to_owned());
    // A credential in the URL before anything else, even on no route or a wrong method.
    for (method, target) in [
        ("GET", "/nowhere?token=x"),
        ("DELETE", "/v1/tasks?key=x"),
        ("GET", "/v1/tasks/%FF?api_key=x"),
    ] {
        let r = send(addr, method, target, "", "").await;
        assert_eq!(
            code(r),
            bad("HTTP/1.1 400 Bad Request"),
            "{method} {target}"
        );
    }
    // The method before the query, the query before the body.
    let r = get(addr, "/v1/tasks/t:cancel?colour=red").await;
    assert_eq!(r.status, "HTTP/1.1 405 Method Not Allowed");
    let r = send(
        addr,
        "POST",
        "/v1/tasks?colour=red",
        "content-type: text/plain\r\n",
        "x",
    )
    .await;
    assert!(
        r.error().1.contains("unknown query parameter colour"),
        "{r:?}"
    );
    let r = send(addr, "POST", "/v1/tasks?wait=maybe", json, "").await;
    assert_eq!(code(r), bad("HTTP/1.1 400 Bad Request"));
    let r = send(addr, "POST", "/v1/tasks/t/messages?x=1", json, "{").await;
    assert!(r.error().1.contains("unknown query parameter x"), "{r:?}");
    let r = send(
        addr,
        "POST",
        "/v1/tasks/t:cancel?x=1",
        "content-type: text/plain\r\n",
        "x",
    )
    .await;
    assert!(r.error().1.contains("unknown query parameter x"), "{r:?}");
    // The content type before the JSON; a cancel's body may be empty, a message's not.
    let r = send(
        addr,
        "POST",
        "/v1/tasks/t/messages",
        "content-type: text/plain\r\n",
        "{",
    )
    .await;
    assert_eq!(r.status, "HTTP/1.1 415 Unsupported Media Type");
    let r = send(addr, "POST", "/v1/tasks/t/messages", json, "").await;
    assert!(r.error().1.starts_with("the body is empty"), "{r:?}");
    let r = send(addr, "POST", "/v1/tasks/t:cancel", json, "").await;
    assert!(r.error().1.starts_with("no task with id 't'"), "{r:?}");
    let r = send(
        addr,
        "POST",
        "/v1/tasks/t:cancel",
        json,
        r#"{"taskId":"u"}"#,
    )
    .await;
    assert!(
        r.error().1.contains("differs from the task in the path"),
        "{r:?}"
    );
    // Unknown query parameters on a route that takes none.
    let r = get(addr, "/openapi.json?x=1").await;
    assert!(
        r.error()
            .1
            .contains("unknown query parameter x: this call takes none"),
        "{r:?}"
    );
}

#[tokio::test]
async fn an_ended_task_with_every_event_read_is_204_without_a_body() {
    let (addr, _stop, _task) = face(HttpConfig::default()).await;
    let json = "content-type: application/json\r\n";
    let r = send(
        addr,
        "POST",
        "/v1/tasks",
        json,
        r#"{"goal":"wait","waitForDevice":true}"#,
    )
    .await;
    assert_eq!(r.status, "HTTP/1.1 201 Created", "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    let id = v["taskId"].as_str().unwrap().to_owned();
    assert_eq!(
        r.header("location"),
        Some(format!("/v1/tasks/{id}").as_str())
    );
    let r = send(addr, "POST", &format!("/v1/tasks/{id}:cancel"), "", "").await;
    assert_eq!(r.status, "HTTP/1.1 200 OK", "{r:?}");
    // Cancelled: its last event is the completed one.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let last = loop {
        let r = get(addr, &format!("/v1/tasks/{id}")).await;
        let task: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        if task["state"] == "TASK_STATE_CANCELLED" {
            break task["lastSeq"].as_str().unwrap().to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not cancelled: {task}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let r = send(
        addr,
        "GET",
        &format!("/v1/tasks/{id}/events"),
        &format!("last-event-id: {last}\r\n"),
        "",
    )
    .await;
    assert_eq!(r.status, "HTTP/1.1 204 No Content", "{r:?}");
    // No content-length, no content-type: only what the client's `connection: close` asks.
    assert_eq!(
        r.headers,
        vec![("connection".into(), "close".into())],
        "{r:?}"
    );
    assert_eq!(r.body, "");
}
