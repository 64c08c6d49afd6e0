//! The test bed: one simulated phone, the device service straight to it over TCP, an LLM
//! double and the text manipulator, each a real server on loopback.
use std::path::PathBuf;

use droidmesh_device::{DeviceConfig, device_service};
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_llm::{LlmClient, LlmConfig, WireFormat};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::text_manipulator_service_client::TextManipulatorServiceClient;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, ActionResult, DeviceBinding, GetStateRequest, LeaseRef, ManipulateRequest,
    ManipulateResponse, StartAppRequest, TapRequest, TypeTextRequest, UiElement, UiState,
    start_app_request, tap_request,
};
use droidmesh_sim::{SimFleet, SimOptions};
use droidmesh_text_manipulator::{TextManipulatorConfig, text_manipulator_service};
use tonic::transport::{Channel, server::TcpIncoming};

pub const NOTES: &str = "com.droidmesh.notes";
pub const LOGIN: &str = "com.droidmesh.login";

/// The embedded apps plus a sign-in screen with a password field.
const LOGIN_APP: &str = r#"
[[apps]]
package = "com.droidmesh.login"
label = "Login"
[[apps.screens]]
id = "main"
activity = ".LoginActivity"
title = "Sign in"
widgets = [
  { kind = "edit", id = "password", hint = "Password", password = true },
]
"#;

pub struct Rig {
    pub fleet: SimFleet,
    pub llm: MockLlmServer,
    pub device_ep: String,
    pub device: DeviceServiceClient<Channel>,
    pub client: TextManipulatorServiceClient<Channel>,
    pub serial: String,
    pub lease: LeaseRef,
    _apps: tempfile::NamedTempFile,
}

async fn serve(router: tonic::transport::server::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(router.serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))));
    format!("http://{addr}")
}

/// A reply of the scripted model.
pub fn reply(text: &str) -> MockResponse {
    MockResponse::success(WireFormat::Openai, text, "scripted-model", 300, 30)
}

/// A reply holding one JavaScript block.
pub fn program(code: &str) -> MockResponse {
    reply(&format!("```js\n{code}\n```"))
}

/// The rig with the default configuration and a quick sandbox clock.
pub async fn rig(script: Vec<MockResponse>) -> Rig {
    rig_with(
        script,
        TextManipulatorConfig {
            sandbox_timeout_ms: 300,
            ..TextManipulatorConfig::default()
        },
    )
    .await
}

pub async fn rig_with(script: Vec<MockResponse>, cfg: TextManipulatorConfig) -> Rig {
    rig_on(script, cfg, false).await
}

/// The rig whose phone has the ADBKeyBoard app (it types any text, not only ASCII).
pub async fn rig_with_keyboard(script: Vec<MockResponse>) -> Rig {
    rig_on(
        script,
        TextManipulatorConfig {
            sandbox_timeout_ms: 300,
            ..TextManipulatorConfig::default()
        },
        true,
    )
    .await
}

async fn rig_on(script: Vec<MockResponse>, cfg: TextManipulatorConfig, adb_keyboard: bool) -> Rig {
    let apps_toml = format!(
        "{}\n{LOGIN_APP}",
        include_str!("../../../crates/sim/apps/default.toml")
    );
    let mut apps = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut apps, apps_toml.as_bytes()).unwrap();
    let fleet = droidmesh_sim::start(SimOptions {
        base_port: 0,
        devices: 1,
        apps_file: Some(PathBuf::from(apps.path())),
        adb_keyboard,
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let serial = fleet.addrs()[0].to_string();
    let device = device_service(DeviceConfig {
        adb_server: String::new(),
        direct_devices: vec![serial.clone()],
        command_timeout_ms: 5_000,
        ..DeviceConfig::default()
    })
    .unwrap();
    let device_ep = serve(tonic::transport::Server::builder().add_service(device)).await;
    let llm = MockLlmServer::start(script).await.unwrap();
    let toml = format!(
        "[providers.mock]\nwire = \"openai\"\nbase_url = \"{}/v1\"\nretry = {{ max_attempts = 1, initial_backoff = \"10ms\", max_backoff = \"10ms\" }}\n[profiles.text_manipulator]\nprovider = \"mock\"\nmodel = \"scripted-model\"\n",
        llm.url()
    );
    let llm_client = LlmClient::from_config(&LlmConfig::from_toml_str(&toml).unwrap()).unwrap();
    let svc = text_manipulator_service(cfg, llm_client, device_ep.clone()).unwrap();
    let ep = serve(tonic::transport::Server::builder().add_service(svc)).await;
    let client = TextManipulatorServiceClient::connect(ep).await.unwrap();
    let mut device = DeviceServiceClient::connect(device_ep.clone())
        .await
        .unwrap();
    let lease = device
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.clone(),
            holder: "text-manipulator-test".into(),
            ttl_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let lease = LeaseRef {
        serial: serial.clone(),
        lease_id: lease.lease_id,
    };
    Rig {
        fleet,
        llm,
        device_ep,
        device,
        client,
        serial,
        lease,
        _apps: apps,
    }
}

impl Rig {
    /// A request for `subgoal` on this rig's device, under its lease.
    pub fn request(&self, subgoal: &str, apply: bool) -> ManipulateRequest {
        ManipulateRequest {
            task_id: "task-1".into(),
            instruction: "Make my shopping note a bulleted list".into(),
            subgoal: subgoal.into(),
            plan: format!("1. Open Notes\nTEXT_TASK: {subgoal}\n2. Tap Save"),
            device: Some(DeviceBinding {
                endpoint: self.device_ep.clone(),
                lease: Some(self.lease.clone()),
            }),
            apply,
            ..ManipulateRequest::default()
        }
    }

    pub async fn manipulate(&self, request: ManipulateRequest) -> ManipulateResponse {
        let mut client = self.client.clone();
        client.manipulate(request).await.unwrap().into_inner()
    }

    pub async fn state(&self) -> UiState {
        let mut device = self.device.clone();
        device
            .get_state(GetStateRequest {
                serial: self.serial.clone(),
                include_screenshot: false,
                screenshot_max_side: 0,
                masks: Vec::new(),
            })
            .await
            .unwrap()
            .into_inner()
    }

    pub async fn element(&self, id: &str) -> UiElement {
        let state = self.state().await;
        let suffix = format!(":id/{id}");
        state
            .elements
            .iter()
            .find(|e| e.resource_id.ends_with(&suffix))
            .cloned()
            .unwrap_or_else(|| panic!("no element {id} on the screen"))
    }

    pub async fn open(&self, package: &str) {
        let mut device = self.device.clone();
        let started = device
            .start_app(StartAppRequest {
                lease: Some(self.lease.clone()),
                app: Some(start_app_request::App::Package(package.into())),
                activity: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(started.success, "{started:?}");
    }

    /// Taps the field `id`, which focuses it, and types `text` into it.
    pub async fn type_into(&self, id: &str, text: &str, sensitive: bool) {
        let index = self.element(id).await.index;
        let mut device = self.device.clone();
        let typed = device
            .type_text(TypeTextRequest {
                lease: Some(self.lease.clone()),
                text: text.into(),
                index: Some(index),
                clear: true,
                sensitive,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(typed.success, "{typed:?}");
    }

    pub async fn tap(&self, id: &str) {
        let index = self.element(id).await.index;
        let mut device = self.device.clone();
        let tapped = device
            .tap(TapRequest {
                lease: Some(self.lease.clone()),
                target: Some(tap_request::Target::Index(index)),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(tapped.success, "{tapped:?}");
    }

    /// A file on the phone, read as `adb shell cat` would.
    pub fn read_file(&self, path: &str) -> String {
        let out = self.fleet.devices()[0].shell(&format!("cat {path}"));
        assert_eq!(out.code, 0, "cat {path}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// The last message of the `i`-th request the model received.
    pub fn last_message(&self, i: usize) -> String {
        let body = self.llm.requests()[i].json();
        let messages = body["messages"].as_array().unwrap();
        let content = &messages.last().unwrap()["content"];
        match content.as_str() {
            Some(text) => text.to_owned(),
            None => content.to_string(),
        }
    }
}

pub fn result(response: &ManipulateResponse) -> &ActionResult {
    response.result.as_ref().unwrap()
}

pub fn data(response: &ManipulateResponse) -> serde_json::Value {
    droidmesh_proto::struct_to_json(result(response).data.as_ref().unwrap())
}
