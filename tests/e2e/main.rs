//! End to end across processes: `droidmesh sim` (two phones) attached through Debian's adb
//! server, and `droidmesh serve device|executor|manager|gateway` as four separate processes,
//! with a scripted LLM HTTP server on loopback standing in for the model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::time::Duration;

use droidmesh_e2e::{Proc, free_port};
use droidmesh_llm::WireFormat;
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_proto::v1::gateway_client::GatewayClient;
use droidmesh_proto::v1::{
    CancelTaskRequest, GetTaskRequest, ListDevicesRequest, TaskEvent, TaskRequest, TaskState,
    WatchTaskRequest, task_event,
};
use droidmesh_sim::testkit::{AdbServer, require_adb};
use tokio_stream::StreamExt;
use tonic::transport::Channel;

mod faults;
mod flood;
mod http;
mod lone_gateway;
mod masking;
mod metrics;
mod otlp_metrics;
mod pg_replicas;
mod reasoning;
mod recovery;
mod scale;
mod store;
mod store_damage;
mod tasks;
mod tls;
mod trace;

struct Mesh {
    adb: AdbServer,
    serials: Vec<String>,
    gateway: GatewayClient<Channel>,
    executor: Proc,
    device: Proc,
    /// The model double every agent process talks to (one queue, answered in call order).
    llm: MockLlmServer,
    /// Arguments that start the device service again (after `device.kill()`).
    device_args: Vec<String>,
    /// The other services' processes (sim, manager, scripter, text-manipulator, gateway).
    procs: Vec<Proc>,
    /// Holds `droidmesh.toml`, the config every process was started with.
    dir: std::path::PathBuf,
}

impl Mesh {
    /// The running process of service `name` (as `droidmesh serve` spells it).
    fn proc(&mut self, name: &str) -> &mut Proc {
        self.procs
            .iter_mut()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no process {name}"))
    }

    /// The port service `name` listens on, from the `[endpoints]` of the mesh's config.
    fn port(&self, name: &str) -> u16 {
        let key = format!("{} = \"http://127.0.0.1:", name.replace('-', "_"));
        let cfg = std::fs::read_to_string(self.dir.join("droidmesh.toml")).unwrap();
        let at = cfg
            .find(&key)
            .unwrap_or_else(|| panic!("no endpoint {name}"))
            + key.len();
        cfg[at..].split('"').next().unwrap().parse().unwrap()
    }

    /// Starts service `name` again from the mesh's config (after it was killed) and waits until
    /// it listens.
    async fn restart(&mut self, name: &str) {
        let port = self.port(name);
        let cfg = self.dir.join("droidmesh.toml");
        let cfg = cfg.to_str().unwrap();
        *self.proc(name) = Proc::spawn(name, &["--config", cfg, "serve", name]).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "{name} did not listen again"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// What a test adds to the mesh's config and environment.
#[derive(Default, Clone, Copy)]
struct Extra<'a> {
    env: &'a [(&'a str, &'a str)],
    /// Lines appended to the `[gateway]` section.
    gateway: &'a str,
    /// Whole sections appended to the config file.
    toml: &'a str,
    /// Arguments added to `droidmesh sim` (e.g. `--apps FILE`).
    sim: &'a [&'a str],
    /// A directory where each process's output goes, appended to `NAME.log`.
    logs: Option<&'a std::path::Path>,
}

impl Extra<'_> {
    /// Starts service process `name` with the mesh's environment, its output logged when asked.
    fn spawn(&self, name: &str, args: &[&str]) -> Proc {
        match self.logs {
            Some(dir) => Proc::spawn_logged(name, args, self.env, &dir.join(format!("{name}.log"))),
            None => Proc::spawn_env(name, args, self.env),
        }
        .unwrap()
    }
}

fn reply(text: &str) -> MockResponse {
    MockResponse::success(WireFormat::Openai, text, "scripted-model", 400, 30)
}

/// Two consecutive free ports for the simulator.
fn sim_port() -> u16 {
    for _ in 0..50 {
        let p = free_port();
        if p > 0 && p < 65000 && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
    panic!("no two consecutive free ports");
}

async fn start(script: Vec<MockResponse>) -> Mesh {
    start_env(script, &[]).await
}

/// [`start`], every droidmesh process given `env` too.
async fn start_env(script: Vec<MockResponse>, env: &[(&str, &str)]) -> Mesh {
    start_with(
        script,
        Extra {
            env,
            ..Extra::default()
        },
    )
    .await
}

/// Every service a separate process (device, manager, executor, scripter, text manipulator,
/// gateway), two simulators attached through Debian's adb, and `script` as the model.
async fn start_with(script: Vec<MockResponse>, extra: Extra<'_>) -> Mesh {
    let adb = AdbServer::start().unwrap();
    let port = sim_port();
    let port_arg = port.to_string();
    let mut sim_args = vec!["sim", "--port", &port_arg, "--devices", "2"];
    sim_args.extend_from_slice(extra.sim);
    let sim = Extra { env: &[], ..extra }.spawn("sim", &sim_args);
    let mut serials = Vec::new();
    for p in [port, port + 1] {
        let addr: std::net::SocketAddr = format!("127.0.0.1:{p}").parse().unwrap();
        for _ in 0..100 {
            if std::net::TcpStream::connect(addr).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        serials.push(adb.connect(addr).unwrap());
    }
    let llm = MockLlmServer::start(script).await.unwrap();
    let (dev, exe, man, gw) = (free_port(), free_port(), free_port(), free_port());
    let (scr, txt) = (free_port(), free_port());
    let dir = std::env::temp_dir().join(format!("droidmesh-e2e-{}-{gw}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        r#"[listen]
host = "127.0.0.1"
device = {dev}
executor = {exe}
manager = {man}
scripter = {scr}
text_manipulator = {txt}
gateway = {gw}
admin = 0
gateway_http = 0

[endpoints]
device = "http://127.0.0.1:{dev}"
executor = "http://127.0.0.1:{exe}"
manager = "http://127.0.0.1:{man}"
scripter = "http://127.0.0.1:{scr}"
text_manipulator = "http://127.0.0.1:{txt}"
gateway = "http://127.0.0.1:{gw}"

[device]
adb_server = "127.0.0.1:{adb}"

[gateway]
lease_ttl_ms = 3000
{gateway_extra}

[llm.providers.mock]
wire = "openai"
base_url = "{url}/v1"
retry = {{ max_attempts = 1, initial_backoff = "10ms", max_backoff = "10ms" }}

[llm.profiles.default]
provider = "mock"
model = "scripted-model"

{extra_toml}
"#,
        adb = adb.port,
        url = llm.url(),
        gateway_extra = extra.gateway,
        extra_toml = extra.toml,
    );
    let path = dir.join("droidmesh.toml");
    std::fs::write(&path, config).unwrap();
    let cfg = path.to_str().unwrap();
    let mut procs = vec![sim];
    let device_args: Vec<String> = ["--config", cfg, "serve", "device"]
        .map(String::from)
        .to_vec();
    let device = extra.spawn("device", &["--config", cfg, "serve", "device"]);
    for svc in ["manager", "scripter", "text-manipulator", "gateway"] {
        procs.push(extra.spawn(svc, &["--config", cfg, "serve", svc]));
    }
    let executor = extra.spawn("executor", &["--config", cfg, "serve", "executor"]);
    // Every service listens before the first task.
    for p in [dev, exe, man, scr, txt, gw] {
        let mut up = false;
        for _ in 0..300 {
            if std::net::TcpStream::connect(("127.0.0.1", p)).is_ok() {
                up = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(up, "nothing listens on port {p}");
    }
    let endpoint = format!("http://127.0.0.1:{gw}");
    let mut gateway = None;
    for _ in 0..200 {
        if let Ok(mut g) = GatewayClient::connect(endpoint.clone()).await
            && let Ok(list) = g.list_devices(ListDevicesRequest {}).await
            && serials
                .iter()
                .all(|s| list.get_ref().devices.iter().any(|d| &d.serial == s))
        {
            gateway = Some(g);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let gateway = gateway.expect("the gateway never listed both simulators");
    Mesh {
        adb,
        serials,
        gateway,
        executor,
        device,
        device_args,
        procs,
        llm,
        dir,
    }
}

async fn run(mesh: &Mesh, req: TaskRequest) -> Vec<TaskEvent> {
    let mut g = mesh.gateway.clone();
    let mut s = g.run_task(req).await.unwrap().into_inner();
    let mut events = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(60), s.next()).await {
        events.push(ev.unwrap());
    }
    events
}

fn completed(events: &[TaskEvent]) -> droidmesh_proto::v1::TaskCompleted {
    match events.last().and_then(|e| e.kind.clone()) {
        Some(task_event::Kind::Completed(c)) => c,
        other => panic!("the stream did not end with completed: {other:?}"),
    }
}

async fn lease_holder(mesh: &Mesh, serial: &str) -> Option<String> {
    let mut g = mesh.gateway.clone();
    let list = g
        .list_devices(ListDevicesRequest {})
        .await
        .unwrap()
        .into_inner();
    list.devices
        .into_iter()
        .find(|d| d.serial == serial)
        .and_then(|d| d.lease)
        .map(|l| l.holder)
}

/// Submits a task and watches it until the first code block has been sent to the executor.
async fn submit_until_code(mesh: &Mesh, req: TaskRequest) -> (String, tonic::Streaming<TaskEvent>) {
    submit_until(mesh, req, |e| {
        matches!(e.kind, Some(task_event::Kind::Code(_)))
    })
    .await
}

/// Submits `req` and watches it until an event matches `until`.
async fn submit_until(
    mesh: &Mesh,
    req: TaskRequest,
    until: impl Fn(&TaskEvent) -> bool,
) -> (String, tonic::Streaming<TaskEvent>) {
    let mut g = mesh.gateway.clone();
    let id = g.submit_task(req).await.unwrap().into_inner().task_id;
    let mut watch = g
        .watch_task(WatchTaskRequest {
            task_id: id.clone(),
            from_seq: 1,
        })
        .await
        .unwrap()
        .into_inner();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(30), watch.next())
            .await
            .expect("no event within 30 s")
            .expect("the stream ended early")
            .unwrap();
        if until(&ev) {
            return (id, watch);
        }
    }
}

async fn rest_of(watch: &mut tonic::Streaming<TaskEvent>) -> Vec<TaskEvent> {
    let mut rest = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(30), watch.next()).await {
        rest.push(ev.unwrap());
    }
    rest
}

async fn task_state(mesh: &Mesh, id: &str) -> TaskState {
    let mut g = mesh.gateway.clone();
    let task = g
        .get_task(GetTaskRequest {
            task_id: id.to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    TaskState::try_from(task.state).unwrap()
}
