//! Scaling out executors (`cargo build --release -p droidmesh && cargo bench -p droidmesh-e2e
//! --bench replicas`): the same burst of direct tasks on simulated phones through one gateway,
//! with one executor replica and with three behind one name (127.0.0.2-4, a hosts file), each
//! replica taking at most `CAPACITY` runs at once (`listen.agent_max_in_flight`), the model
//! double answering in `LLM_MS`. Prints steps per second of each and their ratio.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::time::{Duration, Instant};

use droidmesh_e2e::{Proc, droidmesh_bin, free_port, start_sims};
use droidmesh_llm::WireFormat;
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_proto::v1::gateway_client::GatewayClient;
use droidmesh_proto::v1::{ListDevicesRequest, TaskRequest, task_event};
use tokio_stream::StreamExt;

const STEP: &str = "```javascript\nconsole.log(ui_state.length)\n```";
const TASKS: usize = 60;
const STEPS: u32 = 10;
const LLM_MS: u64 = 200;
const CAPACITY: usize = 20;

fn listening(addr: &str) -> bool {
    std::net::TcpStream::connect(addr).is_ok()
}

async fn until_listening(addr: &str) {
    while !listening(addr) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs the burst against `replicas` executors; returns steps per second.
async fn burst(replicas: u8, llm_url: &str) -> f64 {
    let (_sim, serials) = start_sims(TASKS).unwrap();
    let (dev, gw) = (free_port(), free_port());
    let exe = loop {
        let p = free_port();
        if (2..2 + replicas)
            .all(|i| std::net::TcpListener::bind((format!("127.0.0.{i}"), p)).is_ok())
        {
            break p;
        }
    };
    let dir = std::env::temp_dir().join(format!("droidmesh-replicas-{}-{gw}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hosts: String = (2..2 + replicas)
        .map(|i| format!("127.0.0.{i} executors.bench\n"))
        .collect();
    std::fs::write(dir.join("hosts"), hosts).unwrap();
    let direct: Vec<String> = serials.iter().map(|s| format!("\"{s}\"")).collect();
    let config = format!(
        "[listen]\nhost = \"127.0.0.1\"\ndevice = {dev}\ngateway = {gw}\nexecutor = {exe}\nagent_max_in_flight = {CAPACITY}\nadmin = 0\ngateway_http = 0\n\
         [endpoints]\ndevice = \"http://127.0.0.1:{dev}\"\nexecutor = \"http://executors.bench:{exe}\"\ngateway = \"http://127.0.0.1:{gw}\"\n\
         [device]\nadb_server = \"\"\ndirect_devices = [{}]\n\
         [gateway]\nhosts_file = \"{}\"\nprobe_every_ms = 100\n\
         [llm.providers.mock]\nwire = \"openai\"\nbase_url = \"{llm_url}/v1\"\n[llm.profiles.default]\nprovider = \"mock\"\nmodel = \"bench\"\n",
        direct.join(", "),
        dir.join("hosts").display(),
    );
    let path = dir.join("droidmesh.toml");
    std::fs::write(&path, config).unwrap();
    let cfg = path.to_str().unwrap();
    let mut procs = Vec::new();
    for svc in ["device", "gateway"] {
        procs.push(Proc::spawn(svc, &["--config", cfg, "serve", svc]).unwrap());
    }
    for i in 2..2 + replicas {
        let addr = format!("127.0.0.{i}:{exe}");
        procs.push(
            Proc::spawn(
                "executor",
                &["--config", cfg, "serve", "executor", "--listen", &addr],
            )
            .unwrap(),
        );
        until_listening(&addr).await;
    }
    for p in [dev, gw] {
        until_listening(&format!("127.0.0.1:{p}")).await;
    }
    let mut gateway = GatewayClient::connect(format!("http://127.0.0.1:{gw}"))
        .await
        .unwrap();
    while gateway
        .list_devices(ListDevicesRequest {})
        .await
        .map(|r| r.into_inner().devices.len())
        .unwrap_or(0)
        < TASKS
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // One warm-up task per replica, so every replica has been probed and has a sandbox ready.
    let warm: Vec<_> = (0..replicas as usize)
        .map(|i| run(gateway.clone(), serials[i].clone(), 2))
        .collect();
    for w in warm {
        w.await.unwrap();
    }
    let t = Instant::now();
    let tasks: Vec<_> = serials
        .iter()
        .map(|s| run(gateway.clone(), s.clone(), STEPS))
        .collect();
    let mut steps = 0;
    for task in tasks {
        steps += task.await.unwrap();
    }
    let rate = f64::from(steps) / t.elapsed().as_secs_f64();
    println!(
        "{replicas} executor replica(s), {TASKS} tasks x {STEPS} steps, {LLM_MS} ms model, capacity {CAPACITY} runs each: {steps} steps in {:.1?} -> {rate:.1} steps/s",
        t.elapsed()
    );
    rate
}

/// One direct task; the steps it started.
fn run(
    mut gateway: GatewayClient<tonic::transport::Channel>,
    serial: String,
    steps: u32,
) -> tokio::task::JoinHandle<u32> {
    tokio::spawn(async move {
        let req = TaskRequest {
            goal: "bench".into(),
            device: serial,
            max_steps: Some(steps),
            ..TaskRequest::default()
        };
        let mut s = gateway.run_task(req).await.unwrap().into_inner();
        let mut started = 0;
        while let Some(ev) = s.next().await {
            match ev.unwrap().kind {
                Some(task_event::Kind::StepStarted(_)) => started += 1,
                Some(task_event::Kind::Completed(c)) if c.error.contains("capacity") => {
                    panic!("a task was refused: {}", c.error)
                }
                _ => {}
            }
        }
        started
    })
}

#[tokio::main]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("replica benchmarks run under `cargo bench` only");
        return;
    }
    if let Err(e) = droidmesh_bin() {
        println!("skipping: {e} (cargo build --release -p droidmesh)");
        return;
    }
    droidmesh_llm::install_crypto_provider();
    let llm = MockLlmServer::start(vec![]).await.unwrap();
    llm.set_log_requests(false);
    llm.set_fallback(
        MockResponse::success(WireFormat::Openai, STEP, "bench", 100, 10)
            .delay(Duration::from_millis(LLM_MS)),
    );
    let one = burst(1, &llm.url()).await;
    let three = burst(3, &llm.url()).await;
    let ideal =
        |replicas: usize| (replicas * CAPACITY).min(TASKS) as f64 / (LLM_MS as f64 / 1000.0);
    println!(
        "3 replicas vs 1: {:.2}x (target >= 2.5x where CPU allows); ideal {:.0} and {:.0} steps/s -> {:.0}% and {:.0}% of ideal",
        three / one,
        ideal(1),
        ideal(3),
        100.0 * one / ideal(1),
        100.0 * three / ideal(3)
    );
}
