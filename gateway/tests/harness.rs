//! A whole stack per test: device service, scripted executor and manager, and the gateway,
//! each a real gRPC server on its own loopback port; one shared adb server and simulator fleet.
#![allow(dead_code)]
use std::net::SocketAddr;
use std::sync::OnceLock;

use droidmesh_device::{DeviceConfig, device_service};
use droidmesh_gateway::http::HttpConfig;
use droidmesh_gateway::{GatewayConfig, Peers};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::executor_service_server::ExecutorServiceServer;
use droidmesh_proto::v1::gateway_client::GatewayClient;
use droidmesh_proto::v1::manager_service_server::ManagerServiceServer;
use droidmesh_proto::v1::{ListDevicesRequest, TaskEvent, TaskRequest, task_event};
use droidmesh_sim::testkit::{AdbServer, require_adb};
use tokio_stream::StreamExt;
use tonic::transport::Channel;
use tonic::transport::server::{Router, TcpIncoming};

use super::agents::{ScriptedExecutor, ScriptedManager};

pub const FLEET: usize = 32;

pub struct Shared {
    pub adb: AdbServer,
    pub serials: Vec<String>,
}

static SHARED: OnceLock<Option<Shared>> = OnceLock::new();

pub fn shared() -> Option<&'static Shared> {
    SHARED
        .get_or_init(|| {
            if !require_adb("gateway integration tests") {
                return None;
            }
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Runtime::new().unwrap();
                rt.block_on(async move {
                    let fleet = droidmesh_sim::start(droidmesh_sim::SimOptions {
                        base_port: 0,
                        devices: FLEET,
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                    tx.send(fleet.addrs()).unwrap();
                    std::future::pending::<()>().await;
                    drop(fleet);
                });
            });
            let addrs: Vec<SocketAddr> = rx.recv().unwrap();
            let adb = AdbServer::start().unwrap();
            let serials = addrs.iter().map(|a| adb.connect(*a).unwrap()).collect();
            Some(Shared { adb, serials })
        })
        .as_ref()
}

pub async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(router.serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))));
    format!("http://{addr}")
}

pub struct Stack {
    pub gateway: GatewayClient<Channel>,
    pub gateway_endpoint: String,
    /// The gateway's HTTP face, on the same service: `http://127.0.0.1:PORT`.
    pub http: String,
    pub device: DeviceServiceClient<Channel>,
    pub executor_endpoint: String,
    /// The directory of the gateway's embedded task store, removed with the stack.
    pub data_dir: Option<tempfile::TempDir>,
}

/// Gives a gateway that keeps its tasks in the embedded store a directory of its own.
pub fn own_store(mut cfg: GatewayConfig) -> (GatewayConfig, Option<tempfile::TempDir>) {
    if cfg.store != "sqlite" || cfg.data_dir.is_some() {
        return (cfg, None);
    }
    let dir = tempfile::tempdir().unwrap();
    cfg.data_dir = Some(dir.path().to_owned());
    (cfg, Some(dir))
}

pub fn test_config() -> GatewayConfig {
    GatewayConfig {
        lease_ttl_ms: 3_000,
        device_poll_ms: 50,
        stop_grace_ms: 2_000,
        ..GatewayConfig::default()
    }
}

async fn device_endpoint(shared: &Shared) -> String {
    let device_svc = device_service(DeviceConfig {
        adb_server: format!("127.0.0.1:{}", shared.adb.port),
        command_timeout_ms: 5_000,
        ..DeviceConfig::default()
    })
    .unwrap();
    serve(tonic::transport::Server::builder().add_service(device_svc)).await
}

/// The HTTP face's settings in tests: keep-alives every 200 ms.
pub fn test_http_config() -> HttpConfig {
    HttpConfig {
        keep_alive_ms: 200,
        ..HttpConfig::default()
    }
}

/// Serves one gateway on both faces: gRPC and HTTP, each on its own loopback port.
async fn serve_gateway(cfg: GatewayConfig, peers: &Peers) -> (String, String) {
    let store = droidmesh_gateway::open_store(&cfg).unwrap();
    let gw = droidmesh_gateway::gateway(cfg, peers, store).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(droidmesh_gateway::http::serve(
        listener,
        None,
        gw.clone(),
        test_http_config(),
        std::time::Duration::from_secs(1),
        std::future::pending(),
    ));
    let server = droidmesh_proto::v1::gateway_server::GatewayServer::from_arc(gw);
    let grpc = serve(tonic::transport::Server::builder().add_service(server)).await;
    (grpc, http)
}

/// A port on which nothing listens.
pub fn dead_endpoint() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}")
}

/// A reasoning-mode stack: the real device service, the scripted agents of `minds`, and the
/// gateway with `cfg`. `scripter_down` points the gateway at a scripter nobody serves.
pub async fn reasoning_stack(
    shared: &Shared,
    minds: &std::sync::Arc<super::minds::Minds>,
    cfg: GatewayConfig,
    scripter_down: bool,
) -> Stack {
    use super::minds;
    let device_ep = device_endpoint(shared).await;
    let agents = serve(
        tonic::transport::Server::builder()
            .add_service(minds::manager(minds))
            .add_service(minds::executor(minds))
            .add_service(minds::scripter(minds))
            .add_service(minds::text(minds)),
    )
    .await;
    let peers = Peers {
        device: device_ep.clone(),
        executor: agents.clone(),
        manager: agents.clone(),
        scripter: if scripter_down {
            dead_endpoint()
        } else {
            agents.clone()
        },
        text_manipulator: agents.clone(),
    };
    let (cfg, data_dir) = own_store(cfg);
    let (gw_ep, http) = serve_gateway(cfg, &peers).await;
    let device = DeviceServiceClient::connect(device_ep).await.unwrap();
    let mut d = device.clone();
    d.list_devices(ListDevicesRequest {}).await.unwrap();
    Stack {
        gateway: GatewayClient::connect(gw_ep.clone()).await.unwrap(),
        gateway_endpoint: gw_ep,
        http,
        device,
        executor_endpoint: agents,
        data_dir,
    }
}

/// Starts a stack; `executor` replaces the scripted executor's endpoint when given.
pub async fn stack(shared: &Shared, executor: Option<String>) -> Stack {
    stack_with(shared, executor, test_config()).await
}

/// [`stack`] with the gateway configured by `cfg`.
pub async fn stack_with(shared: &Shared, executor: Option<String>, cfg: GatewayConfig) -> Stack {
    let device_ep = device_endpoint(shared).await;
    let executor_ep = match executor {
        Some(ep) => ep,
        None => {
            serve(
                tonic::transport::Server::builder()
                    .add_service(ExecutorServiceServer::new(ScriptedExecutor)),
            )
            .await
        }
    };
    let manager_ep = serve(
        tonic::transport::Server::builder().add_service(ManagerServiceServer::new(ScriptedManager)),
    )
    .await;
    let peers = Peers {
        device: device_ep.clone(),
        executor: executor_ep.clone(),
        manager: manager_ep.clone(),
        // Not used by direct-mode tests; reasoning tests start their own.
        scripter: manager_ep.clone(),
        text_manipulator: manager_ep,
    };
    let (cfg, data_dir) = own_store(cfg);
    let (gw_ep, http) = serve_gateway(cfg, &peers).await;
    let device = DeviceServiceClient::connect(device_ep).await.unwrap();
    // The device service learns about devices from the adb server on first use.
    let mut d = device.clone();
    d.list_devices(ListDevicesRequest {}).await.unwrap();
    Stack {
        gateway: GatewayClient::connect(gw_ep.clone()).await.unwrap(),
        gateway_endpoint: gw_ep,
        http,
        device,
        executor_endpoint: executor_ep,
        data_dir,
    }
}

pub fn request(goal: &str, device: &str) -> TaskRequest {
    TaskRequest {
        goal: goal.into(),
        device: device.into(),
        ..TaskRequest::default()
    }
}

/// Watches `id` from the start until an event matches `until` (within 10 s).
pub async fn watch_until(stack: &Stack, id: &str, until: impl Fn(&TaskEvent) -> bool) -> TaskEvent {
    let mut g = stack.gateway.clone();
    let mut s = g
        .watch_task(droidmesh_proto::v1::WatchTaskRequest {
            task_id: id.into(),
            from_seq: 1,
        })
        .await
        .unwrap()
        .into_inner();
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let ev = s.next().await.expect("the stream ended").unwrap();
            if until(&ev) {
                return ev;
            }
        }
    })
    .await
    .expect("no matching event within 10 s")
}

/// Collects a stream of events to its end.
pub async fn collect(mut s: tonic::Streaming<TaskEvent>) -> Vec<TaskEvent> {
    let mut out = Vec::new();
    while let Some(ev) = s.next().await {
        out.push(ev.unwrap());
    }
    out
}

pub fn completed(events: &[TaskEvent]) -> &droidmesh_proto::v1::TaskCompleted {
    match events.last().and_then(|e| e.kind.as_ref()) {
        Some(task_event::Kind::Completed(c)) => c,
        other => panic!("the last event is not completed: {other:?}"),
    }
}

/// The lease holder of `serial`, if leased.
pub async fn holder(stack: &Stack, serial: &str) -> Option<String> {
    let mut d = stack.device.clone();
    let devices = d
        .list_devices(ListDevicesRequest {})
        .await
        .unwrap()
        .into_inner()
        .devices;
    devices
        .into_iter()
        .find(|x| x.serial == serial)
        .and_then(|x| x.lease)
        .map(|l| l.holder)
}

/// A TCP relay on loopback in front of a server: [`Proxy::kill`] drops every connection at
/// once, as a process that dies does; [`Proxy::freeze`] stops relaying while keeping every
/// connection open, as a process that is stopped (SIGSTOP) does.
pub struct Proxy {
    pub endpoint: String,
    tasks: std::sync::Arc<std::sync::Mutex<tokio::task::JoinSet<()>>>,
    frozen: tokio::sync::watch::Sender<bool>,
}

/// Copies one direction of a relayed connection; while frozen it reads nothing more.
async fn relay_one_way(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if frozen.wait_for(|f| !*f).await.is_err() {
            return;
        }
        let n = tokio::select! {
            n = from.read(&mut buf) => n,
            _ = frozen.wait_for(|f| *f) => continue,
        };
        match n {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

impl Proxy {
    /// Relays connections to `upstream` ("http://host:port").
    pub async fn start(upstream: &str) -> Proxy {
        let target = upstream.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let tasks = std::sync::Arc::new(std::sync::Mutex::new(tokio::task::JoinSet::new()));
        let (frozen, watch) = tokio::sync::watch::channel(false);
        let set = tasks.clone();
        tasks.lock().unwrap().spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let outbound = tokio::net::TcpStream::connect(&target).await.unwrap();
                let _ = (inbound.set_nodelay(true), outbound.set_nodelay(true));
                let (in_rd, in_wr) = inbound.into_split();
                let (out_rd, out_wr) = outbound.into_split();
                let mut set = set.lock().unwrap();
                set.spawn(relay_one_way(in_rd, out_wr, watch.clone()));
                set.spawn(relay_one_way(out_rd, in_wr, watch.clone()));
            }
        });
        Proxy {
            endpoint,
            tasks,
            frozen,
        }
    }

    /// Closes the listener and every relayed connection.
    pub fn kill(&self) {
        self.tasks.lock().unwrap().abort_all();
    }

    /// Stops relaying in both directions; connections stay open and new ones are accepted
    /// but get nothing through, as with a stopped process.
    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }
}
