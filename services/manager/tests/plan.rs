//! Plan end to end: the real device service reads a simulated phone, a scripted model answers,
//! and the test checks both the decision that comes back and the prompt the model was sent.
use droidmesh_device::{DeviceConfig, device_service};
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_llm::{LlmClient, LlmConfig, WireFormat};
use droidmesh_manager::{ManagerConfig, manager_service};
use droidmesh_proto::v1::manager_service_client::ManagerServiceClient;
use droidmesh_proto::v1::{
    ActionRecord, ConversationTurn, DeviceBinding, FileDetail, LeaseRef, LlmOverride, PlanRequest,
    PlanResponse, subgoal,
};
use droidmesh_sim::{SimFleet, SimOptions};
use serde_json::Value;
use tonic::Code;
use tonic::transport::server::TcpIncoming;

pub(crate) struct Rig {
    pub(crate) fleet: SimFleet,
    pub(crate) llm: MockLlmServer,
    pub(crate) device_ep: String,
    pub(crate) serial: String,
    pub(crate) manager: ManagerServiceClient<tonic::transport::Channel>,
}

pub(crate) async fn serve(router: tonic::transport::server::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(router.serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))));
    format!("http://{addr}")
}

fn reply(text: &str) -> MockResponse {
    MockResponse::success(WireFormat::Openai, text, "planner-model", 700, 60)
}

/// A simulated phone behind the real device service, a scripted model, and the manager,
/// whose default device service is the rig's.
pub(crate) async fn rig(replies: &[&str]) -> Rig {
    rig_with(replies, ManagerConfig::default()).await
}

/// [`rig`] with the manager configured by `cfg`.
pub(crate) async fn rig_with(replies: &[&str], cfg: ManagerConfig) -> Rig {
    let fleet = droidmesh_sim::start(SimOptions {
        base_port: 0,
        devices: 1,
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let serial = fleet.addrs()[0].to_string();
    let device = device_service(DeviceConfig {
        adb_server: String::new(),
        direct_devices: vec![serial.clone()],
        ..DeviceConfig::default()
    })
    .unwrap();
    let device_ep = serve(tonic::transport::Server::builder().add_service(device)).await;
    let llm = MockLlmServer::start(replies.iter().map(|r| reply(r)))
        .await
        .unwrap();
    let toml = format!(
        "[providers.mock]\nwire = \"openai\"\nbase_url = \"{}/v1\"\nretry = {{ max_attempts = 1, initial_backoff = \"10ms\", max_backoff = \"10ms\" }}\n[profiles.manager]\nprovider = \"mock\"\nmodel = \"planner-model\"\n[profiles.structured_output]\nprovider = \"mock\"\nmodel = \"planner-model\"\n",
        llm.url()
    );
    let client = LlmClient::from_config(&LlmConfig::from_toml_str(&toml).unwrap()).unwrap();
    let svc = manager_service(cfg, client, device_ep.clone()).unwrap();
    let ep = serve(tonic::transport::Server::builder().add_service(svc)).await;
    Rig {
        fleet,
        llm,
        device_ep,
        serial,
        manager: ManagerServiceClient::connect(ep).await.unwrap(),
    }
}

impl Rig {
    /// A request for the rig's device through the manager's default device service.
    pub(crate) fn request(&self, instruction: &str) -> PlanRequest {
        PlanRequest {
            task_id: "t-1".into(),
            instruction: instruction.into(),
            device: Some(DeviceBinding {
                endpoint: String::new(),
                lease: Some(LeaseRef {
                    serial: self.serial.clone(),
                    lease_id: String::new(),
                }),
            }),
            step: 1,
            ..PlanRequest::default()
        }
    }

    pub(crate) async fn plan(&self, r: PlanRequest) -> Result<PlanResponse, tonic::Status> {
        self.manager.clone().plan(r).await.map(|r| r.into_inner())
    }

    /// The body of the `i`-th request the model received.
    fn body(&self, i: usize) -> Value {
        self.llm.requests()[i].json()
    }

    /// The text of the `i`-th prompt (text parts joined when images come with it).
    pub(crate) fn prompt(&self, i: usize) -> String {
        match &self.body(i)["messages"][0]["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            other => panic!("unexpected content: {other}"),
        }
    }
}

fn kinds(r: &PlanResponse) -> Vec<(u32, subgoal::Kind, &str)> {
    r.subgoals
        .iter()
        .map(|s| (s.number, s.kind(), s.text.as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_routes_an_action_a_script_and_a_text_task_in_order() {
    let rig = rig(&["<thought>The launcher is open; Notes comes first.</thought>\n<add_memory>The launcher was open at step 1.</add_memory>\n<add_memory>Sam's number is 555-0100.</add_memory>\n<plan>\n1. Open the Notes app\n2. <script>\nFetch https://api.example.com/weather?city=Paris and report the temperature\n</script>\n3. TEXT_TASK: Put the temperature on the first line\n4. DONE\n</plan>"]).await;
    let r = rig
        .plan(rig.request("Write today's Paris temperature in a new note"))
        .await
        .unwrap();
    assert_eq!(
        kinds(&r),
        [
            (1, subgoal::Kind::Action, "Open the Notes app"),
            (
                2,
                subgoal::Kind::Script,
                "Fetch https://api.example.com/weather?city=Paris and report the temperature"
            ),
            (
                3,
                subgoal::Kind::TextTask,
                "Put the temperature on the first line"
            ),
        ]
    );
    assert_eq!(r.thought, "The launcher is open; Notes comes first.");
    assert_eq!(
        r.add_memory,
        "The launcher was open at step 1.\nSam's number is 555-0100."
    );
    assert!(
        r.plan_text.starts_with("1. Open the Notes app"),
        "{}",
        r.plan_text
    );
    assert!(r.accomplished.is_none() && r.human_help.is_none() && r.direct_response.is_none());
    assert!(r.parse_warnings.is_empty(), "{:?}", r.parse_warnings);
    let usage = r.usage.unwrap();
    assert_eq!(usage.agent, "manager");
    assert_eq!(usage.usage.unwrap().calls, 1);
    assert_eq!(usage.usage.unwrap().input_tokens, 700);
    // The model saw the request and the phone as the device service read it.
    let prompt = rig.prompt(0);
    assert!(prompt.contains("Write today's Paris temperature in a new note"));
    assert!(prompt.contains("- app: com.android.launcher3"), "{prompt}");
    assert_eq!(rig.body(0)["model"], "planner-model");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_completion_comes_back_as_accomplished() {
    let rig = rig(&["<thought>Wi-Fi is on.</thought>\n<request_accomplished success=\"true\">Wi-Fi is on.</request_accomplished>"]).await;
    let r = rig.plan(rig.request("Turn Wi-Fi on")).await.unwrap();
    let done = r.accomplished.unwrap();
    assert!(done.success);
    assert_eq!(done.answer, "Wi-Fi is on.");
    assert!(r.subgoals.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_without_tags_is_a_warning_for_the_model_not_an_error() {
    let rig = rig(&["I would open Settings and then tap Wi-Fi."]).await;
    let r = rig.plan(rig.request("Turn Wi-Fi on")).await.unwrap();
    assert!(r.subgoals.is_empty());
    assert!(r.accomplished.is_none() && r.human_help.is_none() && r.direct_response.is_none());
    assert_eq!(r.parse_warnings.len(), 1, "{:?}", r.parse_warnings);
    let warning = &r.parse_warnings[0];
    assert!(
        warning.starts_with("expected a <plan> with at least one subgoal")
            && warning.ends_with("found no tags at all"),
        "{warning}"
    );
    assert_eq!(r.usage.unwrap().usage.unwrap().calls, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn repeated_failures_are_put_in_front_of_the_model() {
    let rig =
        rig(&["<thought>Scroll first.</thought><plan>1. Swipe up to reveal Wi-Fi</plan>"]).await;
    let failed = |feedback: &str| ActionRecord {
        agent: "executor".into(),
        action: "tap".into(),
        description: "Tap Wi-Fi".into(),
        success: false,
        feedback: feedback.into(),
    };
    let r = rig
        .plan(PlanRequest {
            previous_plan: "1. Tap Wi-Fi\n2. Turn it on".into(),
            memory: "Settings opened at step 1.\nThe Wi-Fi row was not visible at step 2.".into(),
            action_history: vec![
                failed("element 12 not found"),
                failed("element 14 not found"),
            ],
            error_history: vec![
                failed("element 12 not found"),
                failed("element 14 not found"),
            ],
            ..rig.request("Turn Wi-Fi on")
        })
        .await
        .unwrap();
    assert_eq!(kinds(&r)[0].2, "Swipe up to reveal Wi-Fi");
    let prompt = rig.prompt(0);
    let failures = prompt
        .split("## Repeated failures")
        .nth(1)
        .unwrap_or_else(|| panic!("no Repeated failures section in:\n{prompt}"));
    assert!(
        failures.contains("The last 2 attempts failed"),
        "{failures}"
    );
    assert!(
        failures.contains("1. tap · Tap Wi-Fi → element 12 not found"),
        "{failures}"
    );
    assert!(
        failures.contains("2. tap · Tap Wi-Fi → element 14 not found"),
        "{failures}"
    );
    assert!(prompt.contains("## Your previous plan\n1. Tap Wi-Fi\n2. Turn it on"));
    assert!(
        prompt.contains("- Settings opened at step 1.\n- The Wi-Fi row was not visible at step 2."),
        "{prompt}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn conversation_notes_and_files_reach_the_prompt() {
    let rig = rig(&["<thought>Asked about the earlier run.</thought>\n<direct_response>\nThe network was \"Home\".\n</direct_response>"]).await;
    let r = rig
        .plan(PlanRequest {
            conversation: vec![
                ConversationTurn {
                    goal: "Turn Wi-Fi on".into(),
                    answer: "Wi-Fi is on, connected to \"Home\".".into(),
                    success: true,
                },
                ConversationTurn {
                    goal: "Call Sam".into(),
                    answer: "Sam is not in the contacts.".into(),
                    success: false,
                },
            ],
            notes: vec!["The user changed the goal to: Which network did you join?".into()],
            files: vec![FileDetail {
                path: "/srv/files/t-1/report.csv".into(),
                name: "report.csv".into(),
                size_bytes: 2048,
                ..FileDetail::default()
            }],
            ..rig.request("Which network did you join?")
        })
        .await
        .unwrap();
    assert_eq!(
        r.direct_response.as_deref(),
        Some("The network was \"Home\".")
    );
    assert!(r.subgoals.is_empty() && r.accomplished.is_none());
    let prompt = rig.prompt(0);
    let earlier = prompt.find("## Earlier in this conversation").unwrap();
    let wifi = prompt.find("1. The user asked: Turn Wi-Fi on").unwrap();
    let sam = prompt.find("2. The user asked: Call Sam").unwrap();
    assert!(earlier < wifi && wifi < sam, "{prompt}");
    assert!(prompt.contains("Not done: Sam is not in the contacts."));
    assert!(prompt.contains("<direct_response>"));
    let notes = prompt
        .find("## Messages from the user since your last plan")
        .unwrap();
    let how = prompt.find("## How to reply").unwrap();
    assert!(notes < how, "notes come before the reply format:\n{prompt}");
    assert!(prompt.contains("- The user changed the goal to: Which network did you join?"));
    assert!(prompt.contains("- report.csv (2048 bytes) at /srv/files/t-1/report.csv"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_for_a_person_s_help_comes_back_from_the_manager() {
    let rig = rig(&["<thought>A QR code fills the screen.</thought>\n<request_human_help reason=\"The app wants a QR code scanned\">\nScan the code on the phone with your laptop, then reply \"done\".\n</request_human_help>"]).await;
    let r = rig
        .plan(rig.request("Log in to the web app"))
        .await
        .unwrap();
    let help = r.human_help.unwrap();
    assert_eq!(help.agent, "manager");
    assert_eq!(help.reason, "The app wants a QR code scanned");
    assert_eq!(
        help.instructions,
        "Scan the code on the phone with your laptop, then reply \"done\"."
    );
    assert!(r.subgoals.is_empty() && r.parse_warnings.is_empty());
    assert!(rig.prompt(0).contains("<request_human_help reason="));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_task_s_model_override_is_used_and_vision_attaches_the_screen() {
    let rig = rig(&[
        "<plan>1. Open Settings</plan>",
        "<plan>1. Open Settings</plan>",
    ])
    .await;
    let r = rig
        .plan(PlanRequest {
            llm: Some(LlmOverride {
                model: "vision-model".into(),
                ..LlmOverride::default()
            }),
            vision: true,
            // Named explicitly here; the other tests use the manager's default.
            device: Some(DeviceBinding {
                endpoint: rig.device_ep.clone(),
                lease: Some(LeaseRef {
                    serial: rig.serial.clone(),
                    lease_id: String::new(),
                }),
            }),
            ..rig.request("Turn Wi-Fi on")
        })
        .await
        .unwrap();
    assert_eq!(r.subgoals.len(), 1);
    let body = rig.body(0);
    assert_eq!(body["model"], "vision-model");
    let parts = body["messages"][0]["content"].as_array().unwrap();
    let image = parts
        .iter()
        .find(|p| p["type"] == "image_url")
        .unwrap_or_else(|| panic!("no image part in {parts:?}"));
    let url = image["image_url"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{}",
        &url[..40]
    );
    assert!(
        rig.prompt(0)
            .contains("A screenshot of the screen is attached.")
    );
    // Without vision: no image, and the profile's model.
    rig.plan(rig.request("Turn Wi-Fi on")).await.unwrap();
    let body = rig.body(1);
    assert_eq!(body["model"], "planner-model");
    assert!(body["messages"][0]["content"].is_string(), "{body}");
    assert!(
        !rig.prompt(1)
            .contains("A screenshot of the screen is attached.")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_unusable_models_and_unreadable_devices_are_errors() {
    // A device service that is not there, listed so the manager may read from it.
    let cfg = ManagerConfig {
        device_endpoints: vec!["http://127.0.0.1:1".into()],
        ..ManagerConfig::default()
    };
    let rig = rig_with(&[], cfg).await;
    let err = rig.plan(rig.request("  ")).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let err = rig
        .plan(PlanRequest {
            device: None,
            ..rig.request("Turn Wi-Fi on")
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("device.lease.serial"), "{err:?}");
    // A device service that is not there (worth another try), and a device it does not know
    // (not worth one).
    let mut gone = rig.request("Turn Wi-Fi on");
    gone.device.as_mut().unwrap().endpoint = "http://127.0.0.1:1".into();
    let err = rig.plan(gone).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().contains(&rig.serial), "{err:?}");
    let mut unknown = rig.request("Turn Wi-Fi on");
    unknown
        .device
        .as_mut()
        .unwrap()
        .lease
        .as_mut()
        .unwrap()
        .serial = "emulator-5554".into();
    let err = rig.plan(unknown).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(err.message().contains("emulator-5554"), "{err:?}");
    assert_eq!(
        rig.llm.request_count(),
        0,
        "no model call without a device state"
    );
    // A refused key: nothing another call could fix.
    rig.llm.push(MockResponse::error(401, "invalid api key"));
    let err = rig.plan(rig.request("Turn Wi-Fi on")).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("manager model mock/planner-model"),
        "{err:?}"
    );
    // A provider in trouble: worth another try later.
    rig.llm.push(MockResponse::error(503, "overloaded"));
    let err = rig.plan(rig.request("Turn Wi-Fi on")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
}

const PLAN: &str = "<plan>\n1. Open Settings\n</plan>";

#[tokio::test(flavor = "multi_thread")]
async fn the_card_of_the_app_in_front_reaches_the_plan_and_an_edited_card_the_next_one() {
    let cards = tempfile::tempdir().unwrap();
    let android = cards.path().join("android");
    std::fs::create_dir_all(&android).unwrap();
    std::fs::write(
        android.join("app_cards.json"),
        r#"{"com.android.settings": "settings.md"}"#,
    )
    .unwrap();
    std::fs::write(android.join("settings.md"), "Wi-Fi is the first switch.").unwrap();
    let rig = rig_with(
        &[PLAN, PLAN, PLAN],
        ManagerConfig {
            app_cards: droidmesh_app_cards::AppCardsConfig {
                dir: Some(cards.path().to_owned()),
                ..Default::default()
            },
            ..ManagerConfig::default()
        },
    )
    .await;
    // The launcher in front and a goal that names no app: no card.
    rig.plan(rig.request("Turn on Wi-Fi")).await.unwrap();
    assert!(
        !rig.prompt(0).contains("## About the app"),
        "{}",
        rig.prompt(0)
    );

    let out = rig.fleet.devices()[0].shell("am start -n com.android.settings/.Settings");
    assert_eq!(out.code, 0, "{out:?}");
    rig.plan(rig.request("Turn on Wi-Fi")).await.unwrap();
    let prompt = rig.prompt(1);
    assert!(
        prompt.contains("## About the app\n### com.android.settings\nWi-Fi is the first switch."),
        "{prompt}"
    );

    std::fs::write(
        android.join("settings.md"),
        "Wi-Fi is under Network & internet too.",
    )
    .unwrap();
    rig.plan(rig.request("Turn on Wi-Fi")).await.unwrap();
    assert!(
        rig.prompt(2)
            .contains("Wi-Fi is under Network & internet too."),
        "{}",
        rig.prompt(2)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_the_request_names_brings_its_built_in_card_and_a_bad_card_dir_is_refused() {
    let rig = rig(&[PLAN]).await;
    rig.plan(rig.request("Add a task in the Tasks app"))
        .await
        .unwrap();
    let prompt = rig.prompt(0);
    assert!(
        prompt.contains("### com.droidmesh.tasks\n# Tasks") && prompt.contains("\"New task\""),
        "{prompt}"
    );
    let err = ManagerConfig {
        app_cards: droidmesh_app_cards::AppCardsConfig {
            dir: Some("/no/cards/here".into()),
            ..Default::default()
        },
        ..ManagerConfig::default()
    }
    .validate()
    .unwrap_err();
    assert!(
        err.starts_with("manager.app_cards.dir: /no/cards/here is not a directory"),
        "{err}"
    );
}
