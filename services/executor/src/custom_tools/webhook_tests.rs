#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::collections::{BTreeMap, HashMap};

use axum::http::{StatusCode, Uri, header};
use axum::response::IntoResponse;
use axum::routing::any;
use serde_json::json;

use super::*;

/// A loopback server: `/echo` answers what it got, `/slow` never answers, `/big` 5000 bytes,
/// `/fail` 503, `/moved` a redirect, `/text` plain text.
async fn server() -> String {
    let app = axum::Router::new()
        .route(
            "/echo",
            any(
                |method: axum::http::Method, uri: Uri, body: String| async move {
                    axum::Json(json!({
                        "method": method.as_str(),
                        "query": uri.query(),
                        "body": body,
                    }))
                },
            ),
        )
        .route("/slow", any(std::future::pending::<()>))
        .route("/big", any(|| async { "x".repeat(5000) }))
        .route(
            "/fail",
            any(|| async { (StatusCode::SERVICE_UNAVAILABLE, "upstream down") }),
        )
        .route(
            "/moved",
            any(|| async { (StatusCode::FOUND, [(header::LOCATION, "/echo")]).into_response() }),
        )
        .route("/text", any(|| async { "hello" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn hook(url: &str, method: &str) -> Webhook {
    Webhook::new(&WebhookConfig {
        url: url.into(),
        method: method.into(),
        headers: BTreeMap::new(),
        allow_hosts: vec!["127.0.0.1".into()],
        max_response_bytes: 1000,
    })
    .unwrap()
}

fn no_secrets() -> Secrets {
    Secrets::from(HashMap::new())
}

const SECOND: Duration = Duration::from_secs(10);

#[tokio::test]
async fn get_sends_the_arguments_as_a_query_and_post_as_a_json_body() {
    let base = server().await;
    let args = json!({"city": "Oslo", "days": 2, "tags": ["a", "b"], "skip": null});
    let got = hook(&format!("{base}/echo?key=1"), "GET")
        .call(&args, SECOND, &no_secrets())
        .await
        .unwrap();
    assert_eq!(got.value["method"], "GET");
    assert_eq!(got.value["query"], "key=1&city=Oslo&days=2&tags=a&tags=b");
    assert_eq!(got.value["body"], "");
    assert!(
        got.summary
            .starts_with(&format!("GET {base}/echo answered 200 OK (")),
        "{}",
        got.summary
    );
    let got = hook(&format!("{base}/echo"), "post")
        .call(&json!({"city": "Oslo"}), SECOND, &no_secrets())
        .await
        .unwrap();
    assert_eq!(got.value["method"], "POST");
    assert_eq!(got.value["query"], Value::Null);
    assert_eq!(got.value["body"], r#"{"city":"Oslo"}"#);
    let text = hook(&format!("{base}/text"), "GET")
        .call(&json!({}), SECOND, &no_secrets())
        .await
        .unwrap();
    assert_eq!(text.value, json!("hello"));
}

#[tokio::test]
async fn budgets_and_failures_are_errors_that_say_what_happened() {
    let base = server().await;
    let call = |path: &str, timeout: Duration| {
        let hook = hook(&format!("{base}{path}"), "POST");
        async move { hook.call(&json!({}), timeout, &no_secrets()).await }
    };
    let e = call("/slow", Duration::from_millis(300)).await.unwrap_err();
    assert_eq!(
        e,
        format!("request to {base}/slow timed out after 300 ms (the tool's timeout_ms)")
    );
    let e = call("/big", SECOND).await.unwrap_err();
    assert!(
        e.starts_with(&format!(
            "the response from {base}/big is larger than the limit of 1000 bytes"
        )),
        "{e}"
    );
    let e = call("/fail", SECOND).await.unwrap_err();
    assert_eq!(
        e,
        format!("{base}/fail answered 503 Service Unavailable: upstream down")
    );
    let e = call("/moved", SECOND).await.unwrap_err();
    assert!(
        e.starts_with(&format!("{base}/moved answered 302 Found, a redirect;")),
        "{e}"
    );
}

#[tokio::test]
async fn without_an_allowance_loopback_is_refused_before_a_connection() {
    let base = server().await;
    let refused = Webhook::new(&WebhookConfig {
        url: format!("{base}/echo"),
        method: "POST".into(),
        headers: BTreeMap::new(),
        allow_hosts: Vec::new(),
        max_response_bytes: 1000,
    })
    .unwrap();
    let e = refused
        .call(&json!({}), SECOND, &no_secrets())
        .await
        .unwrap_err();
    assert_eq!(
        e,
        format!(
            "request to {base}/echo refused: 127.0.0.1 is a loopback address; allowed hosts: none"
        )
    );
}
