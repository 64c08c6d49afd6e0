//! The executor under test: a simulated device behind the real device service, a scripted
//! LLM server on loopback, and the executor served over gRPC.
use std::collections::HashMap;

use droidmesh_device::{DeviceConfig, device_service};
use droidmesh_executor::{ExecutorConfig, Secrets, executor_service};
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_llm::{LlmClient, LlmConfig, WireFormat};
use droidmesh_proto::v1::executor_service_client::ExecutorServiceClient;
use droidmesh_sim::{SimFleet, SimOptions};
use tonic::transport::server::TcpIncoming;

pub struct Rig {
    pub fleet: SimFleet,
    /// The scripted model (idle when the rig talks to another server, see [`rig_on`]).
    pub llm: MockLlmServer,
    pub device_ep: String,
    pub executor: ExecutorServiceClient<tonic::transport::Channel>,
}

pub async fn serve(router: tonic::transport::server::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(router.serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))));
    format!("http://{addr}")
}

pub fn reply(text: &str) -> MockResponse {
    MockResponse::success(WireFormat::Openai, text, "scripted-model", 500, 40)
}

pub async fn rig(script: Vec<MockResponse>) -> Rig {
    rig_with(
        script,
        ExecutorConfig {
            step_timeout_ms: 5_000,
            ..ExecutorConfig::default()
        },
    )
    .await
}

pub async fn rig_with(script: Vec<MockResponse>, cfg: ExecutorConfig) -> Rig {
    rig_full(script, cfg, HashMap::new()).await
}

/// A rig whose executor holds `secrets` (id → value, as `DROIDMESH_SECRET_<ID>` would give,
/// or [`Secrets`] read from a directory).
pub async fn rig_full(
    script: Vec<MockResponse>,
    cfg: ExecutorConfig,
    secrets: impl Into<Secrets>,
) -> Rig {
    let retry = "retry = { max_attempts = 1, initial_backoff = \"10ms\", max_backoff = \"10ms\" }";
    rig_secrets(script, cfg, secrets.into(), retry).await
}

/// One simulated phone on a free port.
async fn one_sim() -> SimFleet {
    droidmesh_sim::start(SimOptions {
        base_port: 0,
        devices: 1,
        ..SimOptions::default()
    })
    .await
    .unwrap()
}

/// A rig whose model provider has `provider` as its timeout and retry settings (TOML lines).
pub async fn rig_provider(
    script: Vec<MockResponse>,
    cfg: ExecutorConfig,
    secrets: HashMap<String, String>,
    provider: &str,
) -> Rig {
    rig_secrets(script, cfg, secrets.into(), provider).await
}

/// [`rig_provider`] with the executor's [`Secrets`] as given.
async fn rig_secrets(
    script: Vec<MockResponse>,
    cfg: ExecutorConfig,
    secrets: Secrets,
    provider: &str,
) -> Rig {
    let fleet = one_sim().await;
    let llm = MockLlmServer::start(script).await.unwrap();
    let base_url = format!("{}/v1", llm.url());
    rig_at(fleet, llm, &base_url, cfg, secrets, provider, "").await
}

/// A rig whose model is the OpenAI-compatible server at `base_url` (a llama.cpp double, say),
/// with `profile` (TOML lines: `context_tokens = 8192`, ...) added to the codeact profile.
pub async fn rig_on(base_url: &str, cfg: ExecutorConfig, provider: &str, profile: &str) -> Rig {
    let fleet = one_sim().await;
    let idle = MockLlmServer::start(Vec::new()).await.unwrap();
    rig_at(
        fleet,
        idle,
        base_url,
        cfg,
        HashMap::new().into(),
        provider,
        profile,
    )
    .await
}

async fn rig_at(
    fleet: SimFleet,
    llm: MockLlmServer,
    base_url: &str,
    cfg: ExecutorConfig,
    secrets: Secrets,
    provider: &str,
    profile: &str,
) -> Rig {
    let device = device_service(DeviceConfig {
        adb_server: String::new(),
        direct_devices: vec![fleet.addrs()[0].to_string()],
        ..DeviceConfig::default()
    })
    .unwrap();
    let device_ep = serve(tonic::transport::Server::builder().add_service(device)).await;
    let toml = format!(
        "[providers.mock]\nwire = \"openai\"\nbase_url = \"{base_url}\"\n{provider}\n[profiles.codeact]\nprovider = \"mock\"\nmodel = \"scripted-model\"\n{profile}\n[profiles.executor]\nprovider = \"mock\"\nmodel = \"scripted-model\"\n"
    );
    let client = LlmClient::from_config(&LlmConfig::from_toml_str(&toml).unwrap()).unwrap();
    let exec = executor_service(cfg, client, device_ep.clone(), secrets).unwrap();
    let exec_ep = serve(tonic::transport::Server::builder().add_service(exec)).await;
    let executor = ExecutorServiceClient::connect(exec_ep).await.unwrap();
    Rig {
        fleet,
        llm,
        device_ep,
        executor,
    }
}

impl Rig {
    /// Leases the rig's simulator for a test; returns a device client and the lease.
    pub async fn lease(
        &self,
    ) -> (
        droidmesh_proto::v1::device_service_client::DeviceServiceClient<tonic::transport::Channel>,
        droidmesh_proto::v1::LeaseRef,
    ) {
        let mut device = droidmesh_proto::v1::device_service_client::DeviceServiceClient::connect(
            self.device_ep.clone(),
        )
        .await
        .unwrap();
        let serial = self.fleet.addrs()[0].to_string();
        let granted = device
            .acquire_lease(droidmesh_proto::v1::AcquireLeaseRequest {
                serial: serial.clone(),
                holder: "test".into(),
                ttl_ms: 0,
            })
            .await
            .unwrap()
            .into_inner();
        let lease = droidmesh_proto::v1::LeaseRef {
            serial,
            lease_id: granted.lease_id,
        };
        (device, lease)
    }

    /// Leases the simulator and opens the notes app; returns the device client, the lease and
    /// the index of the note's text field.
    pub async fn open_notes(
        &self,
    ) -> (
        droidmesh_proto::v1::device_service_client::DeviceServiceClient<tonic::transport::Channel>,
        droidmesh_proto::v1::LeaseRef,
        u32,
    ) {
        use droidmesh_proto::v1::{GetStateRequest, StartAppRequest, start_app_request};
        let (mut device, lease) = self.lease().await;
        device
            .start_app(StartAppRequest {
                lease: Some(lease.clone()),
                app: Some(start_app_request::App::Package(
                    "com.droidmesh.notes".into(),
                )),
                activity: String::new(),
            })
            .await
            .unwrap();
        let state = device
            .get_state(GetStateRequest {
                serial: lease.serial.clone(),
                ..GetStateRequest::default()
            })
            .await
            .unwrap()
            .into_inner();
        let field = state.elements.iter().find(|e| e.editable).unwrap().index;
        (device, lease, field)
    }
}
