//! The address policy as a script meets it: refusals after resolution and at every redirect
//! hop, worded so the model can report them.
use droidmesh_llm::testkit::MockResponse;
use serde_json::json;

use crate::common::*;

/// A step that prints the error a fetch throws (or the status when it does not throw).
fn probe(url: &str) -> String {
    format!(
        "try {{ const r = await fetch('{url}'); console.log('status', r.status) }} catch (e) {{ console.log(e.name + ': ' + e.message) }}"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_metadata_address_is_refused_and_the_answer_says_why() {
    let rig = rig(vec![
        step(&probe("http://169.254.169.254/latest/meta-data/iam?token=t0p")),
        step("const r = await fetch('http://[::ffff:169.254.169.254]/')"),
        reply("FAILED: the metadata address 169.254.169.254 is refused by the scripter's address policy."),
    ])
    .await;
    let events = run(&rig, request("Read the instance metadata.")).await;
    let obs = observations(&events);
    assert_eq!(
        obs[0].0,
        "FetchError: request to http://169.254.169.254/latest/meta-data/iam refused: 169.254.169.254 is a link-local/metadata address; allowed hosts: none"
    );
    assert!(!obs[0].0.contains("t0p"), "the query is not repeated");
    let uncaught = obs[1].1.as_deref().unwrap();
    assert!(
        uncaught.contains("FetchError: request to http://[::ffff:a9fe:a9fe]/ refused: ::ffff:169.254.169.254 is a link-local/metadata address"),
        "{uncaught}"
    );
    let (_, seen) = prompts(&rig, 1);
    assert!(
        seen.contains("169.254.169.254 is a link-local/metadata address"),
        "{seen}"
    );
    let f = finished(&events);
    assert!(!f.success);
    let r = f.result.as_ref().unwrap();
    assert!(
        r.error
            .as_deref()
            .unwrap()
            .contains("refused by the scripter's address policy")
    );
    let data = droidmesh_proto::struct_to_json(r.data.as_ref().unwrap());
    assert_eq!(data["http_requests"], json!(0), "no request was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn loopback_is_refused_by_name_and_by_address_unless_listed() {
    let local = target(vec![MockResponse::json(200, &json!({"secret": 1}))]).await;
    let port = local.addr().port();
    let other = target(vec![]).await;
    let mut cfg = config();
    // Listed by address and port: `localhost` is another host, and so is another port.
    cfg.http.allow_hosts = vec![format!("127.0.0.1:{port}")];
    let rig = rig_with(
        cfg,
        vec![
            step(&probe(&format!("http://localhost:{port}/admin"))),
            step(&probe(&format!(
                "http://127.0.0.1:{}/admin",
                other.addr().port()
            ))),
            step(&probe("http://0.0.0.0:9/")),
            step(&probe(&format!("http://127.0.0.1:{port}/admin"))),
            reply("Done."),
        ],
    )
    .await;
    let events = run(&rig, request("Call the local admin API.")).await;
    let obs = observations(&events);
    let by_name = &obs[0].0;
    assert!(
        by_name.starts_with(&format!(
            "FetchError: request to http://localhost:{port}/admin refused: localhost resolves to "
        )),
        "{by_name}"
    );
    assert!(
        by_name.contains("a loopback address; allowed hosts: 127.0.0.1:"),
        "{by_name}"
    );
    assert!(
        obs[1]
            .0
            .contains("refused: 127.0.0.1 is a loopback address"),
        "{}",
        obs[1].0
    );
    assert!(
        obs[2]
            .0
            .contains("refused: 0.0.0.0 is a 'this network' address"),
        "{}",
        obs[2].0
    );
    assert_eq!(
        obs[3].0, "status 200",
        "the listed host and port is reached"
    );
    assert_eq!(local.request_count(), 1, "only the allowed request arrived");
    assert_eq!(other.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_to_a_refused_address_is_stopped_at_the_hop() {
    let inner = target(vec![MockResponse::json(200, &json!({"secret": 1}))]).await;
    let hop = format!("http://127.0.0.1:{}/secret", inner.addr().port());
    let by_name = format!("http://localhost:{}/secret", inner.addr().port());
    let front = target(vec![
        MockResponse::raw(302, "").header("location", &hop),
        MockResponse::raw(307, "").header("location", &by_name),
    ])
    .await;
    let mut cfg = config();
    cfg.http.allow_hosts = vec![format!("127.0.0.1:{}", front.addr().port())];
    let start = format!("http://127.0.0.1:{}/start", front.addr().port());
    let rig = rig_with(
        cfg,
        vec![
            step(&probe(&start)),
            step(&probe(&start)),
            reply("Refused."),
        ],
    )
    .await;
    let events = run(&rig, request("Follow the link.")).await;
    let obs = observations(&events);
    assert_eq!(
        obs[0].0,
        format!(
            "FetchError: request to {hop} refused: 127.0.0.1 is a loopback address; allowed hosts: 127.0.0.1:{}",
            front.addr().port()
        )
    );
    assert!(
        obs[1].0.contains(&format!(
            "request to {by_name} refused: localhost resolves to"
        )),
        "{}",
        obs[1].0
    );
    assert_eq!(front.request_count(), 2);
    assert_eq!(
        inner.request_count(),
        0,
        "the second server received nothing"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn only_http_and_https_leave_the_sandbox() {
    let rig = rig(vec![
        step(&probe("file:///etc/passwd")),
        reply("Not possible."),
    ])
    .await;
    let events = run(&rig, request("Read a file.")).await;
    let obs = observations(&events);
    assert_eq!(
        obs[0].0,
        "FetchError: the file: scheme is not allowed; only http and https URLs can be fetched"
    );
}
