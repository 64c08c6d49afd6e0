//! The limits every request has: redirects, response size, time, requests per run.
use std::sync::atomic::Ordering;

use droidmesh_llm::testkit::MockResponse;
use serde_json::json;

use crate::common::*;

fn show(url: &str, options: &str) -> String {
    format!(
        "try {{ const r = await fetch('{url}', {options}); const t = await r.text(); console.log(r.status, r.redirected, r.url, t.length) }} catch (e) {{ console.log(e.name + ': ' + e.message) }}"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_are_followed_up_to_the_limit() {
    let server = target(vec![
        MockResponse::raw(303, "").header("location", "/moved"),
        MockResponse::json(200, &json!({"here": true})),
    ])
    .await;
    server.set_fallback(MockResponse::raw(302, "").header("location", "/again"));
    let base = format!("http://127.0.0.1:{}", server.addr().port());
    let mut cfg = config();
    cfg.http.max_redirects = 2;
    cfg.http.allow_hosts = vec![format!("127.0.0.1:{}", server.addr().port())];
    let rig = rig_with(
        cfg,
        vec![
            step(&show(
                &format!("{base}/start"),
                "{ method: 'POST', body: 'x=1' }",
            )),
            step(&show(&format!("{base}/loop"), "{}")),
            reply("Done."),
        ],
    )
    .await;
    let events = run(&rig, request("Follow redirects.")).await;
    let obs = observations(&events);
    assert_eq!(obs[0].0, format!("200 true {base}/moved 13"));
    assert_eq!(
        obs[1].0,
        format!(
            "FetchError: request to {base}/again was redirected more than 2 times; the last hop pointed to {base}/again"
        )
    );
    let got = server.requests();
    let seen: Vec<(&str, &str)> = got
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("POST", "/start"),
            ("GET", "/moved"),
            ("GET", "/loop"),
            ("GET", "/again"),
            ("GET", "/again"),
        ],
        "a 303 turns POST into GET; the loop stops after 2 redirects"
    );
    assert!(
        got[1].body.is_empty(),
        "the POST body is not sent again after a 303"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_response_larger_than_the_cap_is_refused_while_it_is_read() {
    let sized = target(vec![
        MockResponse::raw(200, "x".repeat(5_000)),
        MockResponse::raw(200, "x".repeat(1_000)),
    ])
    .await;
    let (stream, written, closed) = endless().await;
    let mut cfg = config();
    cfg.http.max_response_bytes = 1_000;
    cfg.http.allow_hosts = vec!["127.0.0.1".into()];
    let base = format!("http://127.0.0.1:{}", sized.addr().port());
    let rig = rig_with(
        cfg,
        vec![
            step(&show(&format!("{base}/big"), "{}")),
            step(&show(&format!("{base}/fits"), "{}")),
            step(&show(&format!("http://{stream}/stream"), "{}")),
            reply("Done."),
        ],
    )
    .await;
    let events = run(&rig, request("Download.")).await;
    let obs = observations(&events);
    assert_eq!(
        obs[0].0,
        format!(
            "FetchError: the response from {base}/big is larger than the limit of 1000 bytes (content-length 5000); ask for less (a smaller page, a filter, a range)"
        )
    );
    assert_eq!(obs[1].0, format!("200 false {base}/fits 1000"));
    assert!(
        obs[2].0.starts_with(&format!(
            "FetchError: the response from http://{stream}/stream is larger than the limit of 1000 bytes (more than 1000 bytes arrived)"
        )),
        "{}",
        obs[2].0
    );
    assert!(finished(&events).success);
    // The endless body was abandoned at the cap: the connection is closed, not read on.
    assert!(
        until(std::time::Duration::from_secs(10), || closed
            .load(Ordering::SeqCst)
            == 1)
        .await,
        "the client hung up on the endless body"
    );
    assert!(written.load(Ordering::SeqCst) < 16 * 1024 * 1024);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_never_answers_times_out() {
    let silent = silent().await;
    let mut cfg = config();
    cfg.http.timeout_ms = 300;
    cfg.http.allow_hosts = vec![silent.addr.ip().to_string()];
    let url = format!("http://{}/slow", silent.addr);
    let rig = rig_with(
        cfg,
        vec![
            step(&show(&url, "{}")),
            step(&show(&url, "{ timeout_ms: 100 }")),
            step(&show(&url, "{ timeout_ms: 60000 }")),
            reply("FAILED: the server did not answer."),
        ],
    )
    .await;
    let events = run(&rig, request("Fetch the slow page.")).await;
    let obs = observations(&events);
    assert_eq!(
        obs[0].0,
        format!("FetchError: request to {url} timed out after 300 ms")
    );
    assert_eq!(
        obs[1].0,
        format!("FetchError: request to {url} timed out after 100 ms")
    );
    assert_eq!(
        obs[2].0,
        format!("FetchError: request to {url} timed out after 300 ms"),
        "a script cannot ask for more than the configured timeout"
    );
    assert_eq!(silent.accepted.load(Ordering::SeqCst), 3);
    assert!(!finished(&events).success);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_has_a_budget_of_requests() {
    let server = target(vec![]).await;
    server.set_fallback(MockResponse::raw(200, "ok"));
    let mut cfg = config();
    cfg.http.max_requests_per_run = 3;
    cfg.http.allow_hosts = vec!["127.0.0.1".into()];
    let url = format!("http://127.0.0.1:{}/", server.addr().port());
    let rig = rig_with(
        cfg,
        vec![
            step(&format!(
                "let ok = 0; try {{ for (let i = 0; i < 10; i++) {{ await fetch('{url}'); ok++ }} }} catch (e) {{ console.log(ok, e.message) }}"
            )),
            reply("Done."),
        ],
    )
    .await;
    let events = run(&rig, request("Poll.")).await;
    let obs = observations(&events);
    assert_eq!(
        obs[0].0,
        "3 this run has sent 3 HTTP requests, its limit; work with the data you have"
    );
    assert_eq!(server.request_count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_never_outlives_the_step() {
    let silent = silent().await;
    let mut cfg = config();
    cfg.step_timeout_ms = 500;
    cfg.http.timeout_ms = 60_000;
    cfg.http.allow_hosts = vec![silent.addr.ip().to_string()];
    let url = format!("http://{}/slow", silent.addr);
    let rig = rig_with(
        cfg,
        vec![
            step(&format!("await fetch('{url}')")),
            reply("FAILED: the server did not answer in time."),
        ],
    )
    .await;
    let events = run(&rig, request("Fetch the slow page.")).await;
    let obs = observations(&events);
    let error = obs[0].1.as_deref().unwrap();
    // Which of the two deadlines is seen first depends on when the session thread started
    // the step; either way the request ended with the step, long before its own 60 s.
    assert!(
        error == "timeout error: script stopped: it ran longer than 500ms"
            || error.contains(&format!(
                "FetchError: request to {url} was stopped by the step's time limit"
            )),
        "{error}"
    );
    assert!(
        until(std::time::Duration::from_secs(10), || silent
            .closed
            .load(Ordering::SeqCst)
            == 1)
        .await,
        "the connection is closed with the step"
    );
}
