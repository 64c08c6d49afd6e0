//! ExecuteSubgoal end to end: the model's one JSON action drives the simulator through the
//! device service; what the manager can act on comes back as a failed ActionResult, and only
//! bad requests and unusable models are RPC errors.
use std::collections::HashMap;
use std::time::Duration;

use droidmesh_executor::ExecutorConfig;
use droidmesh_llm::testkit::MockResponse;
use droidmesh_proto::struct_to_json;
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{
    ActionRecord, ActionResult, DeviceBinding, ExecuteSubgoalRequest, ExecuteSubgoalResponse,
    GetStateRequest, LeaseRef, StartAppRequest, UiState, start_app_request,
};
use serde_json::{Value, json};
use tonic::Code;

use crate::rig::{Rig, reply, rig, rig_full, rig_with};

/// A leased device with `package` in front.
struct Leased {
    device: DeviceServiceClient<tonic::transport::Channel>,
    lease: LeaseRef,
}

async fn lease(rig: &Rig, package: &str) -> Leased {
    let (mut device, lease) = rig.lease().await;
    device
        .start_app(StartAppRequest {
            lease: Some(lease.clone()),
            app: Some(start_app_request::App::Package(package.into())),
            activity: String::new(),
        })
        .await
        .unwrap();
    Leased { device, lease }
}

impl Leased {
    async fn state(&mut self) -> UiState {
        self.device
            .get_state(GetStateRequest {
                serial: self.lease.serial.clone(),
                ..GetStateRequest::default()
            })
            .await
            .unwrap()
            .into_inner()
    }

    /// The index of the element with this text (a row's title; tapping it taps the row).
    async fn index_of(&mut self, text: &str) -> u32 {
        let state = self.state().await;
        let found = state.elements.iter().find(|e| e.text == text);
        found
            .map(|e| e.index)
            .unwrap_or_else(|| panic!("no {text}: {:#?}", state.elements))
    }
}

fn request(leased: &Leased, subgoal: &str) -> ExecuteSubgoalRequest {
    ExecuteSubgoalRequest {
        task_id: "t-1".into(),
        instruction: "Turn Wi-Fi on".into(),
        subgoal: subgoal.into(),
        plan: "1. Open Settings\n2. Tap the Wi-Fi switch\n3. DONE".into(),
        progress_status: "Settings is open.".into(),
        device: Some(DeviceBinding {
            endpoint: String::new(),
            lease: Some(leased.lease.clone()),
        }),
        action_history: vec![ActionRecord {
            agent: "executor".into(),
            action: "open_app".into(),
            description: "Open the Settings app".into(),
            success: true,
            feedback: "opened com.android.settings".into(),
        }],
        ..ExecuteSubgoalRequest::default()
    }
}

async fn execute(
    rig: &Rig,
    req: ExecuteSubgoalRequest,
) -> Result<ExecuteSubgoalResponse, tonic::Status> {
    let mut exec = rig.executor.clone();
    tokio::time::timeout(Duration::from_secs(30), exec.execute_subgoal(req))
        .await
        .expect("ExecuteSubgoal did not answer within 30 s")
        .map(tonic::Response::into_inner)
}

fn result(r: &ExecuteSubgoalResponse) -> &ActionResult {
    r.result.as_ref().unwrap()
}

fn data(r: &ActionResult) -> Value {
    r.data.as_ref().map(struct_to_json).unwrap_or(Value::Null)
}

fn setting(rig: &Rig, key: &str) -> String {
    let out = rig.fleet.devices()[0].shell(&format!("settings get global {key}"));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn action_reply(action: &str) -> MockResponse {
    reply(&format!(
        "### Thought\nThe switch is on screen.\n\n### Action\n{action}\n\n### Description\nToggle the switch."
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tap_by_index_turns_wifi_on() {
    let rig = rig(vec![]).await;
    let mut leased = lease(&rig, "com.android.settings").await;
    let wifi = leased.index_of("Wi-Fi").await;
    rig.llm.push(action_reply(&format!(
        r#"{{"action": "tap", "index": {wifi}}}"#
    )));
    assert_eq!(setting(&rig, "wifi_on"), "0");

    let resp = execute(&rig, request(&leased, "Tap the Wi-Fi switch"))
        .await
        .unwrap();
    let r = result(&resp);
    assert!(r.success, "{resp:?}");
    assert_eq!(r.method_used, "executor");
    assert!(!r.handoff_requested);
    assert!(r.duration_us > 0);
    assert_eq!(setting(&rig, "wifi_on"), "1");
    let d = data(r);
    assert_eq!(d["action"], "tap");
    assert_eq!(d["arguments"], json!({"index": wifi}));
    assert!(
        d["device"]["action_taken"]
            .as_str()
            .unwrap()
            .contains("Wi-Fi"),
        "{d}"
    );
    assert_eq!(resp.thought, "The switch is on screen.");
    assert_eq!(resp.description, "Toggle the switch.");
    let written: Value = serde_json::from_str(&resp.action_json).unwrap();
    assert_eq!(written, json!({"action": "tap", "index": wifi}));
    let usage = resp.usage.unwrap();
    assert_eq!(
        (usage.agent.as_str(), usage.usage.unwrap().calls),
        ("executor", 1)
    );

    // What the model was shown: the subgoal, the plan, the history and the screen.
    let requests = rig.llm.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].json();
    let system = body["messages"][0]["content"].as_str().unwrap().to_owned();
    for expected in [
        "Tap the Wi-Fi switch",
        "1. Open Settings\n2. Tap the Wi-Fi switch",
        "Settings is open.",
        "OK · open_app · Open the Settings app → opened com.android.settings",
        &format!("[{wifi}] TextView \"Wi-Fi\""),
        r#"{"action": "handoff""#,
        r#"{"action": "tap", "index": <number>}"#,
    ] {
        assert!(
            system.contains(expected),
            "{expected:?} missing from:\n{system}"
        );
    }
    // Only atomic actions are offered.
    assert!(!system.contains(r#""action": "complete""#), "{system}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_alias_names_the_same_action() {
    let rig = rig(vec![]).await;
    let mut leased = lease(&rig, "com.android.settings").await;
    let bluetooth = leased.index_of("Bluetooth").await;
    rig.llm.push(action_reply(&format!(
        r#"{{"action": "click", "index": {bluetooth}}}"#
    )));
    assert_eq!(setting(&rig, "bluetooth_on"), "1");
    let mut req = request(&leased, "Turn Bluetooth off");
    req.vision = true;
    // Handed over by another agent: its context is shown with the subgoal.
    req.handoff_context = Some(droidmesh_proto::json_to_struct(&json!({
        "reason": "the scripter found that Bluetooth must be off"
    })));
    let resp = execute(&rig, req).await.unwrap();
    assert!(result(&resp).success, "{resp:?}");
    assert_eq!(data(result(&resp))["action"], "tap");
    assert_eq!(setting(&rig, "bluetooth_on"), "0");
    // With vision, the screenshot goes with the question and the prompt says so.
    let body = rig.llm.requests()[0].json();
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("A screenshot of the screen is attached."),
        "{system}"
    );
    assert!(
        system.contains("## Handed over by another agent")
            && system.contains("the scripter found that Bluetooth must be off"),
        "{system}"
    );
    let user = body["messages"][1]["content"].to_string();
    assert!(
        user.contains("image_url") && user.contains("Turn Bluetooth off"),
        "{user}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn replies_that_cannot_be_carried_out_are_failed_results_and_change_nothing() {
    let rig = rig(vec![]).await;
    let mut leased = lease(&rig, "com.android.settings").await;
    let before = leased.state().await;
    let cases = [
        ("I would tap the switch.", "could not be read"),
        (
            r#"{"action": "teleport", "index": 2}"#,
            "unknown action `teleport`",
        ),
        (
            r#"{"action": "complete", "success": true, "reason": "done"}"#,
            "`complete` is not an action the executor can take",
        ),
        (
            r#"{"action": "tap", "index": 2.7}"#,
            "argument `index` must be an integer, found number 2.7",
        ),
        (
            r#"{"action": "tap", "text": "Wi-Fi"}"#,
            "unexpected argument `text`",
        ),
    ];
    for (written, expected) in cases {
        rig.llm.push(reply(written));
        let resp = execute(&rig, request(&leased, "Tap the Wi-Fi switch"))
            .await
            .unwrap();
        let r = result(&resp);
        assert!(!r.success, "{written}: {resp:?}");
        let error = r.error.clone().unwrap_or_default();
        assert!(error.contains(expected), "{written}: {error}");
        assert_eq!(r.method_used, "executor");
    }
    // The unknown action's message lists what is valid, handoff included.
    assert_eq!(setting(&rig, "wifi_on"), "0");
    let after = leased.state().await;
    assert_eq!(
        (after.phone, after.elements.len()),
        (before.phone, before.elements.len())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_action_lists_the_valid_ones() {
    let rig = rig(vec![reply(r#"{"action": "teleport"}"#)]).await;
    let leased = lease(&rig, "com.android.settings").await;
    let resp = execute(&rig, request(&leased, "Go somewhere"))
        .await
        .unwrap();
    let error = result(&resp).error.clone().unwrap();
    assert!(
        error.ends_with(
            "expected one of: tap, tap_at, long_press, type_text, press_key, back, home, swipe, \
             drag, wait, open_app, type_secret, handoff"
        ),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handoff_names_the_agent_and_touches_nothing() {
    let rig = rig(vec![
        reply(
            r#"### Action
{"action": "handoff", "agent": "scripter", "reason": "the subgoal calls a web API"}"#,
        ),
        reply(r#"{"action": "handoff", "agent": "mailman", "reason": "?"}"#),
    ])
    .await;
    let mut leased = lease(&rig, "com.android.settings").await;
    let before = leased.state().await;
    let subgoal = "Post the Wi-Fi state to https://example.test/hook";
    let resp = execute(&rig, request(&leased, subgoal)).await.unwrap();
    let r = result(&resp);
    assert!(r.success && r.handoff_requested, "{resp:?}");
    assert_eq!(r.suggested_agent.as_deref(), Some("scripter"));
    assert_eq!(
        r.handoff_reason.as_deref(),
        Some("the subgoal calls a web API")
    );
    assert_eq!(
        struct_to_json(r.handoff_context.as_ref().unwrap()),
        json!({"subgoal": subgoal, "reason": "the subgoal calls a web API"})
    );
    assert_eq!(leased.state().await.phone, before.phone);

    let resp = execute(&rig, request(&leased, subgoal)).await.unwrap();
    let r = result(&resp);
    assert!(!r.success && !r.handoff_requested, "{resp:?}");
    assert!(
        r.error
            .as_deref()
            .unwrap()
            .contains("`mailman`; expected \"agent\" to be one of: scripter, text_manipulator"),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_lease_is_a_failed_result_from_the_device() {
    let rig = rig(vec![]).await;
    let mut leased = lease(&rig, "com.android.settings").await;
    let wifi = leased.index_of("Wi-Fi").await;
    rig.llm.push(action_reply(&format!(
        r#"{{"action": "tap", "index": {wifi}}}"#
    )));
    let mut req = request(&leased, "Tap the Wi-Fi switch");
    req.device
        .as_mut()
        .unwrap()
        .lease
        .as_mut()
        .unwrap()
        .lease_id = "not-the-lease".into();
    let resp = execute(&rig, req).await.unwrap();
    let r = result(&resp);
    assert!(!r.success, "{resp:?}");
    let error = r.error.clone().unwrap();
    assert!(
        error.starts_with("tap failed: ")
            && error.contains("is no longer valid")
            && !error.contains("leased by"),
        "{error}"
    );
    assert_eq!(setting(&rig, "wifi_on"), "0");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_device_service_that_cannot_be_reached_is_a_failed_result() {
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let cfg = ExecutorConfig {
        step_timeout_ms: 5_000,
        device_endpoints: vec![format!("http://{addr}")],
        ..ExecutorConfig::default()
    };
    let rig = rig_with(vec![reply(r#"{"action": "back"}"#)], cfg).await;
    let leased = lease(&rig, "com.android.settings").await;
    let mut req = request(&leased, "Go back");
    req.device.as_mut().unwrap().endpoint = format!("http://{addr}");
    let resp = execute(&rig, req).await.unwrap();
    let r = result(&resp);
    assert!(!r.success, "{resp:?}");
    assert!(
        r.error
            .as_deref()
            .unwrap()
            .starts_with("cannot read the device"),
        "{r:?}"
    );
    assert_eq!(
        rig.llm.request_count(),
        0,
        "the model is not asked without a screen"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_and_unusable_models_are_rpc_errors() {
    let rig = rig(vec![]).await;
    let leased = lease(&rig, "com.android.settings").await;
    let err = execute(&rig, request(&leased, "  ")).await.unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::InvalidArgument, "subgoal is empty")
    );
    let mut req = request(&leased, "Tap");
    req.device = None;
    let err = execute(&rig, req).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("device.lease is required"),
        "{err:?}"
    );

    rig.llm.push(MockResponse::error(401, "invalid api key"));
    let err = execute(&rig, request(&leased, "Tap")).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("executor model")
            && err.message().contains("mock/scripted-model")
            && err.message().contains("invalid api key"),
        "{err:?}"
    );
    let mut req = request(&leased, "Tap");
    req.llm = Some(droidmesh_proto::v1::LlmOverride {
        provider: "nowhere".into(),
        ..Default::default()
    });
    let err = execute(&rig, req).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("nowhere/scripted-model"), "{err:?}");

    rig.llm.push(MockResponse::error(500, "upstream exploded"));
    let err = execute(&rig, request(&leased, "Tap")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().contains("upstream exploded"), "{err:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn type_secret_types_an_allowed_secret_that_no_answer_repeats() {
    let secret = "hunter2-Secret";
    let secrets = HashMap::from([("mail_password".to_owned(), secret.to_owned())]);
    let cfg = ExecutorConfig {
        step_timeout_ms: 5_000,
        ..ExecutorConfig::default()
    };
    let rig = rig_full(vec![], cfg, secrets).await;
    let mut leased = lease(&rig, "com.droidmesh.notes").await;
    let state = leased.state().await;
    let field = state.elements.iter().find(|e| e.editable).unwrap().index;
    let typed =
        format!(r#"{{"action": "type_secret", "secret_id": "mail_password", "index": {field}}}"#);
    rig.llm.push(action_reply(&typed));
    rig.llm.push(action_reply(&typed));

    // Not listed in the request's secret_ids: refused.
    let resp = execute(&rig, request(&leased, "Type the password"))
        .await
        .unwrap();
    let r = result(&resp);
    assert!(!r.success, "{resp:?}");
    assert!(
        r.error
            .as_deref()
            .unwrap()
            .contains("'mail_password' is not allowed"),
        "{r:?}"
    );

    let mut req = request(&leased, "Type the password");
    req.secret_ids = vec!["MAIL_PASSWORD".into()];
    let resp = execute(&rig, req).await.unwrap();
    assert!(result(&resp).success, "{resp:?}");
    assert!(!format!("{resp:?}").contains(secret), "{resp:?}");
    // The phone holds the secret; every later read masks the field, as a password field.
    let dump = rig.fleet.devices()[0].shell("uiautomator dump /dev/tty");
    assert!(String::from_utf8_lossy(&dump.stdout).contains(secret));
    let state = leased.state().await;
    let typed = state.elements.iter().find(|e| e.index == field).unwrap();
    assert_eq!(typed.text, "\u{2022}".repeat(secret.chars().count()));
    assert!(!format!("{state:?}").contains(secret));
    // The prompt names the id, never the value.
    for request in rig.llm.requests() {
        let body = request.json().to_string();
        assert!(!body.contains(secret));
    }
}
