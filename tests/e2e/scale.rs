//! Scaling out: executor replicas as separate processes on 127.0.0.2, .3, .4 (and .5) behind
//! one name the gateway resolves through a hosts file it re-reads, simulated phones attached
//! directly, and a model double with a fixed delay. Where each task runs is read from each
//! executor's own load report (`ReplicaService/GetLoad`).
use droidmesh_e2e::{Proc, free_port, start_sims};
use droidmesh_llm::WireFormat;
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_proto::v1::gateway_client::GatewayClient;
use droidmesh_proto::v1::replica_service_client::ReplicaServiceClient;
use droidmesh_proto::v1::{
    GetLoadRequest, ListDevicesRequest, ReplicaLoad, TaskCompleted, TaskRequest, task_event,
};
use std::time::{Duration, Instant};
use tokio_stream::StreamExt;
use tonic::transport::Channel;

const NAME: &str = "executors.test";

/// Counts its own steps (top-level `var`s persist across a task's steps) and completes at
/// the sixth, so a task takes six model calls.
const STEP: &str = "```javascript\nvar n = (typeof n === 'number' ? n : 0) + 1;\nif (n >= 6) complete(true, 'done after ' + n + ' steps');\n```";

struct Scale {
    gateway: GatewayClient<Channel>,
    serials: Vec<String>,
    exec_port: u16,
    /// Each executor's admin port (on its own address).
    admin_port: u16,
    /// Executor processes by the last byte of their address.
    executors: Vec<(u8, Proc)>,
    dir: std::path::PathBuf,
    cfg: String,
    _procs: Vec<Proc>,
    _llm: MockLlmServer,
}

/// A port free on 127.0.0.2 to .5 (one Service name has one port).
fn shared_port() -> u16 {
    for _ in 0..50 {
        let p = free_port();
        if p > 0
            && (2..=5).all(|i| std::net::TcpListener::bind((format!("127.0.0.{i}"), p)).is_ok())
        {
            return p;
        }
    }
    panic!("no port free on 127.0.0.2-5");
}

fn hosts(replicas: &[u8]) -> String {
    replicas
        .iter()
        .map(|i| format!("127.0.0.{i} {NAME}\n"))
        .collect()
}

async fn until_listening(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {addr}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Scale {
    async fn start(sims: usize, replicas: &[u8], llm_ms: u64) -> Scale {
        let llm = MockLlmServer::start(vec![]).await.unwrap();
        llm.set_log_requests(false);
        llm.set_fallback(
            MockResponse::success(WireFormat::Openai, STEP, "scripted-model", 100, 10)
                .delay(Duration::from_millis(llm_ms)),
        );
        let (sim, serials) = start_sims(sims).unwrap();
        let (dev, gw, exe) = (free_port(), free_port(), shared_port());
        let admin = loop {
            let p = shared_port();
            if p != exe {
                break p;
            }
        };
        let dir = std::env::temp_dir().join(format!("droidmesh-scale-{}-{gw}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("hosts"), hosts(replicas)).unwrap();
        let direct: Vec<String> = serials.iter().map(|s| format!("\"{s}\"")).collect();
        let config = format!(
            r#"[listen]
host = "127.0.0.1"
device = {dev}
gateway = {gw}
executor = {exe}
drain_notice_ms = 3000
agent_drain_secs = 20
admin = 0
gateway_http = 0

[endpoints]
device = "http://127.0.0.1:{dev}"
executor = "http://{NAME}:{exe}"
gateway = "http://127.0.0.1:{gw}"

[device]
adb_server = ""
direct_devices = [{direct}]

[gateway]
lease_ttl_ms = 3000
hosts_file = "{hosts}"
resolve_every_ms = 500
probe_every_ms = 100

[llm.providers.mock]
wire = "openai"
base_url = "{url}/v1"
retry = {{ max_attempts = 1, initial_backoff = "10ms", max_backoff = "10ms" }}

[llm.profiles.default]
provider = "mock"
model = "scripted-model"
"#,
            direct = direct.join(", "),
            hosts = dir.join("hosts").display(),
            url = llm.url(),
        );
        let path = dir.join("droidmesh.toml");
        std::fs::write(&path, config).unwrap();
        let cfg = path.to_str().unwrap().to_owned();
        let mut procs = vec![sim];
        for svc in ["device", "gateway"] {
            procs.push(Proc::spawn(svc, &["--config", &cfg, "serve", svc]).unwrap());
        }
        let mut scale = Scale {
            gateway: GatewayClient::connect(format!("http://127.0.0.1:{gw}"))
                .await
                .ok()
                .unwrap_or_else(|| {
                    // Not listening yet: connect lazily instead.
                    GatewayClient::new(
                        Channel::from_shared(format!("http://127.0.0.1:{gw}"))
                            .unwrap()
                            .connect_lazy(),
                    )
                }),
            serials,
            exec_port: exe,
            admin_port: admin,
            executors: Vec::new(),
            dir,
            cfg,
            _procs: procs,
            _llm: llm,
        };
        for i in replicas {
            scale.start_executor(*i).await;
        }
        until_listening(&format!("127.0.0.1:{gw}")).await;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let listed = scale
                .gateway
                .list_devices(ListDevicesRequest {})
                .await
                .map(|r| r.into_inner().devices.len())
                .unwrap_or(0);
            if listed >= sims {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the gateway lists {listed} of {sims} devices"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        scale
    }

    /// Load reports executor 127.0.0.`last` has answered, from its own `/metrics`.
    async fn load_reports(&self, last: u8) -> f64 {
        let addr = format!("127.0.0.{last}:{}", self.admin_port);
        let Some(scrape) = super::metrics::scrape_at(&addr).await else {
            return 0.0;
        };
        super::metrics::total(
            &scrape,
            "rpc_server_requests_total",
            &[("rpc_method", "GetLoad"), ("rpc_grpc_status_code", "0")],
        )
    }

    /// Waits until the gateway has probed every executor in `of` since now: each answered a
    /// load report it had not answered yet (the test itself asks none meanwhile). A report
    /// answered once the executor drains says so, so the gateway then knows.
    async fn until_probed(&self, of: &[u8]) {
        let mut before = Vec::new();
        for i in of {
            before.push(self.load_reports(*i).await);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (i, seen) in of.iter().zip(before) {
            while self.load_reports(*i).await <= seen {
                assert!(
                    Instant::now() < deadline,
                    "the gateway never probed 127.0.0.{i}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    async fn start_executor(&mut self, last: u8) {
        let addr = format!("127.0.0.{last}:{}", self.exec_port);
        let admin = format!("127.0.0.{last}:{}", self.admin_port);
        let args = [
            "--config", &self.cfg, "serve", "executor", "--listen", &addr, "--admin", &admin,
        ];
        let p = Proc::spawn("executor", &args).unwrap();
        self.executors.push((last, p));
        until_listening(&addr).await;
    }

    fn executor(&mut self, last: u8) -> &mut Proc {
        &mut self
            .executors
            .iter_mut()
            .find(|(i, _)| *i == last)
            .expect("no such executor")
            .1
    }

    /// What executor 127.0.0.`last` reports; `None` once it is gone.
    async fn load(&self, last: u8) -> Option<ReplicaLoad> {
        let url = format!("http://127.0.0.{last}:{}", self.exec_port);
        let channel = Channel::from_shared(url)
            .ok()?
            .connect_timeout(Duration::from_millis(500));
        let mut client = ReplicaServiceClient::new(channel.connect().await.ok()?);
        let reply =
            tokio::time::timeout(Duration::from_secs(2), client.get_load(GetLoadRequest {}));
        Some(reply.await.ok()?.ok()?.into_inner())
    }

    /// In-flight work of each executor in `of`, waiting (up to 30 s) until they sum to `total`.
    async fn loads_summing_to(&self, of: &[u8], total: u32) -> Vec<u32> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut loads = Vec::new();
            for i in of {
                loads.push(self.load(*i).await.map_or(0, |l| l.in_flight));
            }
            if loads.iter().sum::<u32>() == total {
                return loads;
            }
            assert!(
                Instant::now() < deadline,
                "loads of {of:?} are {loads:?}, expected a sum of {total}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts a direct task on `serial`; its final event arrives on the handle.
    fn task(&self, serial: &str, steps: u32) -> tokio::task::JoinHandle<TaskCompleted> {
        let mut g = self.gateway.clone();
        let req = TaskRequest {
            goal: "count six steps".into(),
            device: serial.into(),
            max_steps: Some(steps),
            ..TaskRequest::default()
        };
        tokio::spawn(async move {
            let mut stream = g.run_task(req).await.unwrap().into_inner();
            let mut last = None;
            while let Ok(Some(ev)) =
                tokio::time::timeout(Duration::from_secs(60), stream.next()).await
            {
                last = ev.unwrap().kind;
            }
            match last {
                Some(task_event::Kind::Completed(c)) => c,
                other => panic!("the task's stream did not end with completed: {other:?}"),
            }
        })
    }

    async fn leases_held(&mut self) -> usize {
        let list = self
            .gateway
            .list_devices(ListDevicesRequest {})
            .await
            .unwrap()
            .into_inner();
        list.devices.iter().filter(|d| d.lease.is_some()).count()
    }
}

#[tokio::test]
async fn tasks_spread_over_executor_replicas_a_killed_one_loses_only_its_own_and_a_new_one_gets_work()
 {
    let mut mesh = Scale::start(44, &[2, 3, 4], 250).await;
    mesh.until_probed(&[2, 3, 4]).await;

    // 30 tasks at once spread within ±20% of 10 per replica.
    let first: Vec<_> = (0..30).map(|i| mesh.task(&mesh.serials[i], 20)).collect();
    let loads = mesh.loads_summing_to(&[2, 3, 4], 30).await;
    for load in &loads {
        assert!(
            (8..=12).contains(load),
            "30 tasks over 3 executors: {loads:?}"
        );
    }

    // One is killed mid-run: its tasks end saying so, the others finish.
    let lost = loads[2] as usize;
    mesh.executor(4).kill();
    let mut gone = 0;
    let mut done = 0;
    for t in first {
        let c = t.await.unwrap();
        if c.success {
            assert!(c.answer.contains("done after 6 steps"), "{c:?}");
            done += 1;
        } else {
            assert!(
                c.error.contains("executor at") && c.error.contains("went away"),
                "a task fails only because its executor went away: {c:?}"
            );
            gone += 1;
        }
    }
    assert_eq!(
        (gone, done),
        (lost, 30 - lost),
        "tasks lost with the killed executor"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while mesh.leases_held().await > 0 {
        assert!(
            Instant::now() < deadline,
            "a lease stayed held after every task ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // New tasks go to the two left and all succeed.
    let second: Vec<_> = (30..40).map(|i| mesh.task(&mesh.serials[i], 20)).collect();
    let loads = mesh.loads_summing_to(&[2, 3], 10).await;
    assert!(loads.iter().all(|l| *l > 0), "{loads:?}");
    for t in second {
        let c = t.await.unwrap();
        assert!(c.success, "{c:?}");
    }

    // A fourth replica, added to the name, gets work once the gateway resolves it again.
    mesh.start_executor(5).await;
    std::fs::write(mesh.dir.join("hosts"), hosts(&[2, 3, 4, 5])).unwrap();
    let mut third = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut i = 0;
    loop {
        third.push(mesh.task(&mesh.serials[i % 44], 20));
        i += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
        if mesh.load(5).await.is_some_and(|l| l.in_flight > 0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new executor got no task in 15 s"
        );
        // One task per device: wait for the earlier ones before reusing a device.
        if i % 44 == 0 {
            for t in third.drain(..) {
                t.await.unwrap();
            }
        }
    }
    for t in third {
        let c = t.await.unwrap();
        assert!(c.success, "{c:?}");
    }
}

#[tokio::test]
async fn an_executor_asked_to_stop_takes_no_new_task_finishes_its_own_and_exits_0() {
    // Six model calls of 600 ms: each task outlasts the stop, the notice and the new tasks.
    let mut mesh = Scale::start(8, &[2, 3], 600).await;
    mesh.until_probed(&[2, 3]).await;
    let first: Vec<_> = (0..4).map(|i| mesh.task(&mesh.serials[i], 20)).collect();
    let loads = mesh.loads_summing_to(&[2, 3], 4).await;
    assert!(
        loads.iter().all(|l| *l > 0),
        "four tasks over two idle executors: {loads:?}"
    );
    let on_stopping = loads[0];

    mesh.executor(2).terminate().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !mesh.load(2).await.is_some_and(|l| l.draining) {
        assert!(
            Instant::now() < deadline,
            "the executor never reported draining"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Once the gateway has probed it draining, new tasks all go to the other one, though it
    // still takes calls for the 3 s notice (when its count would show any new task).
    mesh.until_probed(&[2]).await;
    let second: Vec<_> = (4..8).map(|i| mesh.task(&mesh.serials[i], 20)).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stopping = mesh.load(2).await.map_or(0, |l| l.in_flight);
        assert!(
            stopping <= on_stopping,
            "the stopping executor took new work"
        );
        if mesh.load(3).await.is_some_and(|l| l.in_flight >= 4) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new tasks did not all reach the other executor"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    for t in first.into_iter().chain(second) {
        let c = t.await.unwrap();
        assert!(
            c.success,
            "every task finishes, the stopping executor's too: {c:?}"
        );
    }
    let status = mesh
        .executor(2)
        .wait_exit(Duration::from_secs(20))
        .expect("the executor exits within its drain deadline");
    assert!(status.success(), "exit status {status}");
}
