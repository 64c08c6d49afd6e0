//! Benchmarks of the whole mesh, services as separate processes (`cargo build --release -p
//! droidmesh && cargo bench -p droidmesh-e2e --bench mesh`): framework overhead per CodeAct
//! step with a zero-latency LLM double, step rate of 50 concurrent tasks on 50 simulators with
//! a 200 ms LLM double, the same figures for reasoning mode (a manager plan and an executor
//! subgoal per step; the gateway's routing overhead per handoff), resident memory per active
//! task, `droidmesh run` cold start, and the device layer's footprint (one idle simulated
//! device; the device service holding 20). `MESH_BENCH=telemetry` runs only the first: the
//! cost of metrics and tracing per step with no exporter.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use droidmesh_e2e::{Proc, droidmesh_bin, free_port, start_sims};
use droidmesh_llm::WireFormat;
use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::gateway_client::GatewayClient;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, DeviceBinding, ExecuteSubgoalRequest, GetStateRequest, LeaseRef,
    ListDevicesRequest, Mode, PlanRequest, ReleaseLeaseRequest, TaskRequest, task_event,
};
use tokio_stream::StreamExt;

#[path = "mesh/telemetry.rs"]
mod telemetry;

const STEP: &str = "```javascript\nconsole.log(ui_state.length)\n```";

/// One reply that both reasoning agents accept: the manager reads a one-subgoal plan, the
/// executor the action under it (a key press, so every step reaches the device).
const REASONING_STEP: &str = "<thought>\nnext\n</thought>\n<plan>\n1. Press the down key\n</plan>\n\n### Action\n{\"action\": \"press_key\", \"key\": \"dpad_down\"}\n";

/// A zero-latency model double that answers every request with `reply`.
async fn replying(reply: &str) -> MockLlmServer {
    let llm = MockLlmServer::start(vec![]).await.unwrap();
    llm.set_log_requests(false);
    llm.set_fallback(MockResponse::success(
        WireFormat::Openai,
        reply,
        "bench",
        100,
        10,
    ));
    llm
}

struct Mesh {
    gateway: GatewayClient<tonic::transport::Channel>,
    device_ep: String,
    manager_ep: String,
    executor_ep: String,
    serials: Vec<String>,
    pids: Vec<(String, u32)>,
    _procs: Vec<Proc>,
}

/// CPU time (user + system) process `pid` has used, from /proc (clock ticks of 10 ms).
fn cpu_ms(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // Fields after the command name, which is in parentheses and may hold spaces.
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            Some(ticks * 10)
        })
        .unwrap_or(0)
}

/// The machine's CPU time so far from /proc/stat: (all, stolen by the hypervisor), in ticks.
fn machine_ticks() -> (u64, u64) {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            let line = s.lines().next()?;
            let f: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|v| v.parse().ok())
                .collect();
            Some((f.iter().take(8).sum(), *f.get(7)?))
        })
        .unwrap_or((0, 0))
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse()
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0)
}

async fn start(sims: usize, llm_url: &str) -> Mesh {
    start_with(sims, llm_url, 0, "warn", "").await
}

/// [`start`] with `admin` as every service's admin port (0: none; one service then takes it),
/// `RUST_LOG` for the services and `gateway` as lines of the `[gateway]` section.
async fn start_with(sims: usize, llm_url: &str, admin: u16, rust_log: &str, gateway: &str) -> Mesh {
    start_routed(sims, llm_url, admin, rust_log, gateway, None).await
}

/// [`start_with`]; with `adb`, the device service reaches the phones through that adb server
/// (attached to it first) instead of straight to their ports.
async fn start_routed(
    sims: usize,
    llm_url: &str,
    admin: u16,
    rust_log: &str,
    gateway: &str,
    adb: Option<&droidmesh_sim::testkit::AdbServer>,
) -> Mesh {
    // The ports of a run just before may still be held (TIME_WAIT) for a minute or two.
    let ports_deadline = Instant::now() + Duration::from_secs(180);
    let (sim, serials) = loop {
        match start_sims(sims) {
            Ok(started) => break started,
            Err(e) if e.contains("consecutive free ports") && Instant::now() < ports_deadline => {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    let (adb_server, serials) = match adb {
        Some(adb) => {
            let attached: Vec<String> = serials
                .iter()
                .map(|s| adb.connect(s.parse().unwrap()).unwrap())
                .collect();
            (format!("127.0.0.1:{}", adb.port), attached)
        }
        None => (String::new(), serials),
    };
    let (dev, exe, man, gw) = (free_port(), free_port(), free_port(), free_port());
    let dir = std::env::temp_dir().join(format!("droidmesh-bench-{}-{gw}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let direct: Vec<String> = if adb.is_some() {
        Vec::new()
    } else {
        serials.iter().map(|s| format!("\"{s}\"")).collect()
    };
    let config = format!(
        "[listen]\nhost = \"127.0.0.1\"\ndevice = {dev}\nexecutor = {exe}\nmanager = {man}\ngateway = {gw}\nadmin = 0\ngateway_http = 0\n\
         [endpoints]\ndevice = \"http://127.0.0.1:{dev}\"\nexecutor = \"http://127.0.0.1:{exe}\"\nmanager = \"http://127.0.0.1:{man}\"\ngateway = \"http://127.0.0.1:{gw}\"\n\
         [gateway]\n{gateway}\n[device]\nadb_server = \"{adb_server}\"\ndirect_devices = [{}]\n\
         [llm.providers.mock]\nwire = \"openai\"\nbase_url = \"{llm_url}/v1\"\n[llm.profiles.default]\nprovider = \"mock\"\nmodel = \"bench\"\n",
        direct.join(", ")
    );
    let path = dir.join("droidmesh.toml");
    std::fs::write(&path, config).unwrap();
    let cfg = path.to_str().unwrap();
    let mut pids = vec![("sim".to_owned(), sim.id())];
    let mut procs = vec![sim];
    for (i, svc) in ["device", "executor", "manager", "gateway"]
        .iter()
        .enumerate()
    {
        let admin_addr = format!(
            "127.0.0.1:{}",
            if admin == 0 { 0 } else { admin + i as u16 }
        );
        let mut args = vec!["--config", cfg, "serve", svc];
        if admin != 0 {
            args.extend(["--admin", admin_addr.as_str()]);
        }
        let p = Proc::spawn_env(svc, &args, &[("RUST_LOG", rust_log)]).unwrap();
        pids.push(((*svc).to_owned(), p.id()));
        procs.push(p);
    }
    for p in [dev, exe, man, gw] {
        while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let mut gateway = GatewayClient::connect(format!("http://127.0.0.1:{gw}"))
        .await
        .unwrap();
    loop {
        let n = gateway
            .list_devices(ListDevicesRequest {})
            .await
            .map(|r| r.into_inner().devices.len())
            .unwrap_or(0);
        if n >= sims {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Mesh {
        gateway,
        device_ep: format!("http://127.0.0.1:{dev}"),
        manager_ep: format!("http://127.0.0.1:{man}"),
        executor_ep: format!("http://127.0.0.1:{exe}"),
        serials,
        pids,
        _procs: procs,
    }
}

/// Runs one task of `steps` steps; returns the times between consecutive step starts.
async fn task(mesh: &Mesh, serial: &str, steps: u32) -> Vec<Duration> {
    task_in(mesh, serial, steps, Mode::Direct).await
}

async fn task_in(mesh: &Mesh, serial: &str, steps: u32, mode: Mode) -> Vec<Duration> {
    timed_task(mesh, serial, steps, mode).await.1
}

/// When a task was submitted, when each of its steps started, and when its final event came.
struct Timeline {
    submitted: Instant,
    starts: Vec<Instant>,
    ended: Instant,
}

impl Timeline {
    /// From submission to the first step, the times between step starts, and from the last
    /// step start to the final event.
    fn phases(&self) -> (Duration, Vec<Duration>, Duration) {
        let first = self
            .starts
            .first()
            .map_or(Duration::ZERO, |t| *t - self.submitted);
        let last = self
            .starts
            .last()
            .map_or(Duration::ZERO, |t| self.ended - *t);
        (
            first,
            self.starts.windows(2).map(|w| w[1] - w[0]).collect(),
            last,
        )
    }
}

/// A task's phases (see [`Timeline::phases`]).
async fn timed_task(
    mesh: &Mesh,
    serial: &str,
    steps: u32,
    mode: Mode,
) -> (Duration, Vec<Duration>, Duration) {
    timeline(mesh, serial, steps, mode).await.phases()
}

async fn timeline(mesh: &Mesh, serial: &str, steps: u32, mode: Mode) -> Timeline {
    timeline_counted(mesh, serial, steps, mode, None).await
}

/// [`timeline`]; `first_step` is told when the task's first step starts.
async fn timeline_counted(
    mesh: &Mesh,
    serial: &str,
    steps: u32,
    mode: Mode,
    first_step: Option<tokio::sync::mpsc::UnboundedSender<()>>,
) -> Timeline {
    let submitted = Instant::now();
    let mut g = mesh.gateway.clone();
    let req = TaskRequest {
        goal: "bench".into(),
        device: serial.into(),
        max_steps: Some(steps),
        mode: mode as i32,
        ..TaskRequest::default()
    };
    let mut s = g.run_task(req).await.unwrap().into_inner();
    let mut starts = Vec::new();
    while let Some(ev) = s.next().await {
        if matches!(ev.unwrap().kind, Some(task_event::Kind::StepStarted(_))) {
            if starts.is_empty()
                && let Some(tx) = &first_step
            {
                let _ = tx.send(());
            }
            starts.push(Instant::now());
        }
    }
    Timeline {
        submitted,
        starts,
        ended: Instant::now(),
    }
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("mesh benchmarks run under `cargo bench` only");
        return;
    }
    if let Err(e) = droidmesh_bin() {
        println!("skipping: {e} (cargo build --release -p droidmesh)");
        return;
    }
    droidmesh_llm::install_crypto_provider();
    // `cargo bench -p droidmesh-e2e --bench mesh -- concurrent` runs only the concurrent-task
    // figures.
    if std::env::args().any(|a| a == "store") {
        // MESH_BENCH_TASKS: tasks per client (20), more for a longer run to profile (not a
        // DROIDMESH_ variable: the services it starts would read that as a config override).
        let per_client = std::env::var("MESH_BENCH_TASKS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(20);
        store_throughput(50, per_client).await;
        return;
    }
    if std::env::var("MESH_BENCH").as_deref() == Ok("steps") {
        steps_by_route().await;
        return;
    }
    // `-- concurrent200` runs only the 200-phone figure (for comparing builds run after run).
    // MESH_BENCH_TASKS runs it with another number of tasks and phones (how the figure scales).
    if std::env::args().any(|a| a == "concurrent200") {
        let n = std::env::var("MESH_BENCH_TASKS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(200);
        // MESH_BENCH_ROUNDS: runs of the figure, one after another (1 unless set).
        let rounds: usize = std::env::var("MESH_BENCH_ROUNDS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1);
        let mut figures = Vec::new();
        for _ in 0..rounds.max(1) {
            figures.push(concurrent(n, 10, 500, 95).await);
        }
        if figures.len() > 1 {
            let each: Vec<String> = figures.iter().map(|f| format!("{f:.1}%")).collect();
            figures.sort_by(f64::total_cmp);
            println!(
                "{n} tasks x 10 steps, 500 ms LLM, {} runs: {} of ideal (median {:.1}%)",
                figures.len(),
                each.join(", "),
                figures[figures.len() / 2]
            );
        }
        return;
    }
    if std::env::args().any(|a| a == "concurrent") {
        concurrent(50, 20, 200, 90).await;
        concurrent(200, 10, 500, 95).await;
        return;
    }

    telemetry::cost_per_step().await;
    if std::env::var("MESH_BENCH").as_deref() == Ok("telemetry") {
        return;
    }
    device_footprint().await;

    // 1. Framework overhead per step: zero-latency LLM double, one task.
    let llm = replying(STEP).await;
    let mesh = start(1, &llm.url()).await;
    let _warm = task(&mesh, &mesh.serials[0], 5).await;
    let mut steps = task(&mesh, &mesh.serials[0], 200).await;
    let mut device = DeviceServiceClient::connect(mesh.device_ep.clone())
        .await
        .unwrap();
    let mut dev_times = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        device
            .get_state(GetStateRequest {
                serial: mesh.serials[0].clone(),
                include_screenshot: false,
                screenshot_max_side: 0,
                masks: Vec::new(),
            })
            .await
            .unwrap();
        dev_times.push(t.elapsed());
    }
    let fresh = llm_rtt(&llm.url(), false).await;
    let http = llm_rtt(&llm.url(), true).await;
    let (step50, dev50) = (pct(&mut steps, 0.5), pct(&mut dev_times, 0.5));
    println!(
        "step time, zero-latency LLM (n={}): p50 {:?} p90 {:?}",
        steps.len(),
        step50,
        pct(&mut steps, 0.9)
    );
    println!(
        "  GetState alone p50 {dev50:?}; LLM double HTTP round trip p50 {http:?} on a kept-alive \
         connection, as the LLM client pools them ({fresh:?} on a new connection each)"
    );
    println!(
        "  framework overhead per step (step - device - kept-alive LLM round trip) p50 ~ {:?}  (target <= 2 ms)",
        step50.saturating_sub(dev50).saturating_sub(http)
    );
    drop(mesh);

    // 2. Concurrent tasks, one per simulated phone, with a slow LLM double.
    concurrent(50, 20, 200, 90).await;
    concurrent(200, 10, 500, 95).await;

    reasoning().await;
    killed_executor().await;

    // 3. `droidmesh run` cold start to the first device request (embedded mesh, replay).
    let mut samples = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let mut child = Command::new(droidmesh_bin().unwrap())
            .args(["run", "Open Settings and turn on Wi-Fi"])
            .env_remove("OPENAI_API_KEY")
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        for line in BufReader::new(out).lines() {
            if line.unwrap().starts_with("step 1") {
                samples.push(t.elapsed());
                break;
            }
        }
        let _ = child.wait();
    }
    println!(
        "droidmesh run: process start to step 1 (first device read follows at once): p50 {:?} (target <= 500 ms)",
        pct(&mut samples, 0.5)
    );
}

/// `n` concurrent tasks of `steps` steps on `n` simulated phones, each model call taking
/// `llm_ms`: steps per second against the ideal (every task waiting only on its model), and
/// the resident memory of the mesh's processes before, during and after. Returns the figure
/// (percent of ideal over the whole run).
async fn concurrent(n: usize, steps: u32, llm_ms: u64, target_pct: u32) -> f64 {
    let llm = MockLlmServer::start(vec![]).await.unwrap();
    llm.set_log_requests(false);
    llm.set_fallback(
        MockResponse::success(WireFormat::Openai, STEP, "bench", 100, 10)
            .delay(Duration::from_millis(llm_ms)),
    );
    // MESH_BENCH_STORE: the gateway's task store (its default, SQLite, unless set).
    let store = std::env::var("MESH_BENCH_STORE")
        .map(|s| format!("store = \"{s}\""))
        .unwrap_or_default();
    let mesh = std::sync::Arc::new(start_with(n, &llm.url(), 0, "warn", &store).await);
    let rss = |m: &Mesh, which: &[&str]| -> u64 {
        m.pids
            .iter()
            .filter(|(s, _)| which.contains(&s.as_str()))
            .map(|(_, p)| rss_kb(*p))
            .sum()
    };
    // MESH_BENCH_WARM: one one-step task per phone first, so that the timed run meets a mesh
    // that has served before (its connections and threads made), as a running one has.
    let warm = std::env::var_os("MESH_BENCH_WARM").is_some_and(|v| !v.is_empty());
    if warm {
        warm_up(&mesh).await;
    }
    let agents = ["gateway", "executor"];
    let all = ["sim", "device", "executor", "manager", "gateway"];
    let (idle, idle_all) = (rss(&mesh, &agents), rss(&mesh, &all));
    let cpu_before: Vec<(String, u64)> = mesh
        .pids
        .iter()
        .map(|(s, p)| (s.clone(), cpu_ms(*p)))
        .collect();
    let own_cpu_before = cpu_ms(std::process::id());
    let ticks_before = machine_ticks();
    let t = Instant::now();
    // Each task says when its first step starts.
    let (first_steps, mut first_started) = tokio::sync::mpsc::unbounded_channel();
    let mut handles = Vec::new();
    for i in 0..n {
        let m = mesh.clone();
        let first = first_steps.clone();
        handles.push(tokio::spawn(async move {
            let serial = m.serials[i].clone();
            timeline_counted(&m, &serial, steps, Mode::Direct, Some(first)).await
        }));
    }
    // The CPU each process used from the first submission until every task's first step began.
    drop(first_steps);
    let burst_deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for _ in 0..n {
        match tokio::time::timeout_at(burst_deadline, first_started.recv()).await {
            Ok(Some(())) => {}
            Ok(None) | Err(_) => break,
        }
    }
    let burst = t.elapsed();
    let burst_cpu: Vec<String> = mesh
        .pids
        .iter()
        .zip(&cpu_before)
        .map(|((svc, pid), (_, before))| {
            format!("{svc} {} ms", cpu_ms(*pid).saturating_sub(*before))
        })
        .chain(std::iter::once(format!(
            "client+model double {} ms",
            cpu_ms(std::process::id()).saturating_sub(own_cpu_before)
        )))
        .collect();
    // Sampled once every task has had time to start its first step.
    tokio::time::sleep(Duration::from_millis(llm_ms * 3).saturating_sub(burst)).await;
    let (busy, busy_all) = (rss(&mesh, &agents), rss(&mesh, &all));
    let (mut firsts, mut gaps, mut lasts) = (Vec::new(), Vec::new(), Vec::new());
    let mut timelines = Vec::new();
    for h in handles {
        let timeline = h.await.unwrap();
        let (first, between, last) = timeline.phases();
        firsts.push(first);
        gaps.extend(between);
        lasts.push(last);
        timelines.push(timeline);
    }
    let wall = t.elapsed();
    let rounds = call_rounds(&llm.arrivals(), t, n, llm_ms);
    // Step to step by step number, mean/max over the tasks: the first holds the rest of the
    // start burst (its model calls went out together), the later ones the steady state.
    let by_step: Vec<String> = (0..steps.saturating_sub(1) as usize)
        .map(|i| {
            let mut at: Vec<Duration> = timelines
                .iter()
                .filter_map(|t| Some(*t.starts.get(i + 1)? - *t.starts.get(i)?))
                .collect();
            if at.is_empty() {
                return "-".to_string();
            }
            let mean = at.iter().sum::<Duration>() / u32::try_from(at.len()).unwrap_or(1);
            format!("{}/{}", mean.as_millis(), pct(&mut at, 1.0).as_millis())
        })
        .collect();
    let mut durations: Vec<Duration> = timelines.iter().map(|t| t.ended - t.submitted).collect();
    let mean_gap = gaps.iter().sum::<Duration>() / u32::try_from(gaps.len().max(1)).unwrap_or(1);
    // While every task runs: from the moment the last one started its first step to the
    // moment the first one ended, the steps started per second.
    let all_running = timelines
        .iter()
        .filter_map(|t| t.starts.first())
        .max()
        .copied();
    let first_end = timelines.iter().map(|t| t.ended).min();
    let steady = match (all_running, first_end) {
        (Some(from), Some(to)) if to > from => {
            let started = timelines
                .iter()
                .flat_map(|t| &t.starts)
                .filter(|s| (from..to).contains(*s))
                .count();
            Some((started as f64 / (to - from).as_secs_f64(), to - from))
        }
        _ => None,
    };
    let after_all = rss(&mesh, &all);
    let cpu: Vec<String> = mesh
        .pids
        .iter()
        .zip(&cpu_before)
        .map(|((svc, pid), (_, before))| {
            let used = cpu_ms(*pid).saturating_sub(*before);
            format!(
                "{svc} {used} ms ({:.0} µs/step)",
                used as f64 * 1000.0 / (f64::from(steps) * n as f64)
            )
        })
        .collect();
    let total = f64::from(steps) * n as f64;
    let rate = total / wall.as_secs_f64();
    let ideal = n as f64 / (llm_ms as f64 / 1000.0);
    println!(
        "{n} concurrent tasks x {steps} steps, {llm_ms} ms LLM: {rate:.1} steps/s in {wall:.1?}; ideal {ideal:.0} steps/s -> {:.0}% (target >= {target_pct}%)",
        100.0 * rate / ideal
    );
    if let Some((steady, window)) = steady {
        println!(
            "  while all {n} run ({window:.1?}, start and end left out): {steady:.1} steps/s -> {:.0}% of ideal",
            100.0 * steady / ideal
        );
    }
    println!(
        "  where the time goes: submission to first step p50 {:?} max {:?}; step to step p50 {:?} p99 {:?} (model {llm_ms} ms); last step to final event p50 {:?} max {:?}",
        pct(&mut firsts, 0.5),
        pct(&mut firsts, 1.0),
        pct(&mut gaps, 0.5),
        pct(&mut gaps, 0.99),
        pct(&mut lasts, 0.5),
        pct(&mut lasts, 1.0),
    );
    println!(
        "  each task, submission to final event: p50 {:?} max {:?}; step to step mean {mean_gap:.1?} -> a step's model wait is {:.1}% of it",
        pct(&mut durations, 0.5),
        pct(&mut durations, 1.0),
        100.0 * llm_ms as f64 / mean_gap.as_secs_f64() / 1000.0,
    );
    // Where the delay of the tasks that ended last came from, against every task's: the start
    // (submission to first step), the steps (beyond the model's time) and the end.
    let parts = |t: &Timeline| {
        let (first, between, last) = t.phases();
        let model = Duration::from_millis(llm_ms);
        let excess: Duration = between.iter().map(|g| g.saturating_sub(model)).sum();
        [first, excess, last.saturating_sub(model)].map(|d| d.as_secs_f64() * 1000.0)
    };
    let mean_parts = |ts: &[&Timeline]| {
        let mut sum = [0.0; 3];
        for t in ts {
            for (s, p) in sum.iter_mut().zip(parts(t)) {
                *s += p;
            }
        }
        sum.map(|s| s / ts.len().max(1) as f64)
    };
    let mut by_end: Vec<&Timeline> = timelines.iter().collect();
    by_end.sort_by_key(|t| t.ended);
    let late = by_end.len().div_ceil(20);
    let [ls, lx, le] = mean_parts(&by_end[by_end.len() - late..]);
    let [as_, ax, ae] = mean_parts(&by_end);
    println!(
        "  the {late} tasks that ended last, mean ms: start {ls:.0}, steps beyond the model {lx:.0}, end beyond the model {le:.0} (every task: {as_:.0}, {ax:.0}, {ae:.0})"
    );
    println!(
        "  step to step by step (mean/max ms): {}",
        by_step.join(" ")
    );
    println!(
        "  model calls by round, ms after the round's ideal start (first submission + round x {llm_ms} ms), first/last: {}",
        rounds.join(" ")
    );
    // The double's own lateness counts against the figure as if the mesh spent it.
    let mut late = llm.reply_lateness();
    late.sort();
    if !late.is_empty() {
        let mean = late.iter().sum::<Duration>() / u32::try_from(late.len()).unwrap_or(1);
        println!(
            "  the model double's replies were ready {:.2} ms after their {llm_ms} ms on average (p99 {:.2} ms)",
            mean.as_secs_f64() * 1e3,
            pct(&mut late, 0.99).as_secs_f64() * 1e3
        );
    }
    println!(
        "  start burst (first submission until every first step began, {burst:.1?}{}), CPU used: {}",
        if warm {
            "; after a warm-up task per phone"
        } else {
            ""
        },
        burst_cpu.join(", ")
    );
    let ticks_after = machine_ticks();
    let (all, stolen) = (
        ticks_after.0.saturating_sub(ticks_before.0),
        ticks_after.1.saturating_sub(ticks_before.1),
    );
    println!(
        "  CPU used during the run on this {}-core machine: {}, client+model double {} ms; {:.1}% of the machine's time stolen by the hypervisor",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu.join(", "),
        cpu_ms(std::process::id()).saturating_sub(own_cpu_before),
        100.0 * stolen as f64 / all.max(1) as f64
    );
    println!(
        "  resident memory gateway+executor: idle {idle} kB, {n} tasks active {busy} kB -> {:.2} MB per active task (target <= 4 MB)",
        (busy.saturating_sub(idle)) as f64 / 1024.0 / n as f64
    );
    println!(
        "  resident memory of the whole mesh (sims, device, executor, manager, gateway): before {} MB, during {} MB, after {} MB",
        idle_all / 1024,
        busy_all / 1024,
        after_all / 1024
    );
    100.0 * rate / ideal
}

/// One task of one step per phone, all at once, each run to its end (within a minute).
async fn warm_up(mesh: &std::sync::Arc<Mesh>) {
    let mut warm = tokio::task::JoinSet::new();
    for serial in &mesh.serials {
        let (m, serial) = (mesh.clone(), serial.clone());
        warm.spawn(async move { timeline(&m, &serial, 1, Mode::Direct).await });
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while let Some(done) = tokio::time::timeout_at(deadline, warm.join_next())
        .await
        .expect("the warm-up tasks end within a minute")
    {
        done.unwrap();
    }
}

/// The model calls made from `from` on, in rounds of `tasks` calls (every task makes one call
/// per round, so the k-th round is the k-th `tasks` calls in time order; late rounds may overlap
/// the next one's first calls and are still told apart): for each, its first and last call in
/// ms after the round's ideal start (`from` + round x `llm_ms`). The first column is the start
/// burst; how the last grows from round to round is what the whole run loses.
fn call_rounds(arrivals: &[Instant], from: Instant, tasks: usize, llm_ms: u64) -> Vec<String> {
    let mut at: Vec<f64> = arrivals
        .iter()
        .filter(|a| **a >= from)
        .map(|a| (*a - from).as_secs_f64() * 1000.0)
        .collect();
    at.sort_by(f64::total_cmp);
    at.chunks(tasks.max(1))
        .enumerate()
        .map(|(k, round)| {
            let ideal = (k as u64 * llm_ms) as f64;
            let (first, last) = (round[0], round[round.len() - 1]);
            format!("{:.0}/{:.0}", first - ideal, last - ideal)
        })
        .collect()
}

/// A killed executor (SIGKILL while a step's code runs): time until the task's final event,
/// which must say the executor went away (target <= 2 s).
async fn killed_executor() {
    let llm = MockLlmServer::start(vec![]).await.unwrap();
    llm.set_log_requests(false);
    llm.set_fallback(MockResponse::success(
        WireFormat::Openai,
        "```javascript\nwait(10000)\n```",
        "bench",
        10,
        5,
    ));
    let mut samples = Vec::new();
    let mut reason = String::new();
    for _ in 0..3 {
        let mesh = start(1, &llm.url()).await;
        let mut g = mesh.gateway.clone();
        let mut events = g
            .run_task(TaskRequest {
                goal: "Wait".into(),
                device: mesh.serials[0].clone(),
                ..TaskRequest::default()
            })
            .await
            .unwrap()
            .into_inner();
        while let Some(ev) = events.next().await {
            if matches!(ev.unwrap().kind, Some(task_event::Kind::Code(_))) {
                break;
            }
        }
        let pid = mesh.pids.iter().find(|(s, _)| s == "executor").unwrap().1;
        let t = Instant::now();
        Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while let Ok(Some(Ok(ev))) = tokio::time::timeout_at(deadline, events.next()).await {
            if let Some(task_event::Kind::Completed(c)) = ev.kind {
                samples.push(t.elapsed());
                reason = c.error;
                break;
            }
        }
    }
    println!(
        "killed executor (SIGKILL mid-step) to the task's final event: p50 {:?} of {} (target <= 2 s); reason: {reason}",
        pct(&mut samples, 0.5),
        samples.len()
    );
}

/// Reasoning mode: one step is a manager plan and an executor subgoal, routed by the gateway.
/// The gateway's own share of a step is the step time minus the two agent calls made
/// directly (same requests, same mesh); each step has two handoffs (to the executor, back to
/// the manager).
async fn reasoning() {
    let llm = replying(REASONING_STEP).await;
    let mesh = start(1, &llm.url()).await;
    let serial = mesh.serials[0].clone();
    let _warm = task_in(&mesh, &serial, 5, Mode::Reasoning).await;
    let mut steps = task_in(&mesh, &serial, 200, Mode::Reasoning).await;

    // The same agent calls, made directly.
    let mut device = DeviceServiceClient::connect(mesh.device_ep.clone())
        .await
        .unwrap();
    let lease = device
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.clone(),
            holder: "bench".into(),
            ttl_ms: 600_000,
        })
        .await
        .unwrap()
        .into_inner();
    let binding = DeviceBinding {
        endpoint: mesh.device_ep.clone(),
        lease: Some(LeaseRef {
            serial: serial.clone(),
            lease_id: lease.lease_id.clone(),
        }),
    };
    let mut manager = droidmesh_proto::v1::manager_service_client::ManagerServiceClient::connect(
        mesh.manager_ep.clone(),
    )
    .await
    .unwrap();
    let mut executor =
        droidmesh_proto::v1::executor_service_client::ExecutorServiceClient::connect(
            mesh.executor_ep.clone(),
        )
        .await
        .unwrap();
    let (mut plans, mut acts) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        let t = Instant::now();
        manager
            .plan(PlanRequest {
                task_id: "bench".into(),
                instruction: "bench".into(),
                device: Some(binding.clone()),
                ..PlanRequest::default()
            })
            .await
            .unwrap();
        plans.push(t.elapsed());
        let t = Instant::now();
        let r = executor
            .execute_subgoal(ExecuteSubgoalRequest {
                task_id: "bench".into(),
                instruction: "bench".into(),
                subgoal: "Press the down key".into(),
                plan: "1. Press the down key".into(),
                device: Some(binding.clone()),
                ..ExecuteSubgoalRequest::default()
            })
            .await
            .unwrap()
            .into_inner();
        acts.push(t.elapsed());
        assert!(
            r.result.is_some_and(|r| r.success),
            "the bench action failed"
        );
    }
    device
        .release_lease(ReleaseLeaseRequest {
            lease: binding.lease.clone(),
        })
        .await
        .unwrap();
    let (step50, plan50, act50) = (
        pct(&mut steps, 0.5),
        pct(&mut plans, 0.5),
        pct(&mut acts, 0.5),
    );
    println!(
        "reasoning step (manager plan + executor subgoal + device), zero-latency LLM (n={}): p50 {:?} p90 {:?} (target <= 5 ms)",
        steps.len(),
        step50,
        pct(&mut steps, 0.9)
    );
    println!("  Plan alone p50 {plan50:?}; ExecuteSubgoal alone p50 {act50:?}");
    println!(
        "  gateway routing overhead per handoff ((step - plan - subgoal) / 2) p50 ~ {:?} (target <= 1 ms)",
        step50.saturating_sub(plan50).saturating_sub(act50) / 2
    );
    drop(mesh);

    // 50 concurrent reasoning tasks, 200 ms LLM: each step waits for two model calls.
    let llm = MockLlmServer::start(vec![]).await.unwrap();
    llm.set_log_requests(false);
    llm.set_fallback(
        MockResponse::success(WireFormat::Openai, REASONING_STEP, "bench", 100, 10)
            .delay(Duration::from_millis(200)),
    );
    let n = 50;
    let mesh = std::sync::Arc::new(start(n, &llm.url()).await);
    let steps_per_task = 10u32;
    let t = Instant::now();
    let mut handles = Vec::new();
    for i in 0..n {
        let m = mesh.clone();
        handles.push(tokio::spawn(async move {
            let serial = m.serials[i].clone();
            task_in(&m, &serial, steps_per_task, Mode::Reasoning).await
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let wall = t.elapsed();
    // The last step's plan runs too (it finds the step limit), hence steps + 1 plans.
    let ideal_wall = Duration::from_millis(200) * (2 * steps_per_task + 1);
    println!(
        "{n} concurrent reasoning tasks x {steps_per_task} steps, 200 ms LLM: {:.1?}; ideal {:.1?} -> {:.0}% of ideal (target >= 90%)",
        wall,
        ideal_wall,
        100.0 * ideal_wall.as_secs_f64() / wall.as_secs_f64()
    );
}

/// Round trip of one request to the LLM double, without the LLM client: on one kept-alive
/// connection (`pooled`, as the LLM client sends its requests) or on a new connection each.
async fn llm_rtt(url: &str, pooled: bool) -> Duration {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let addr = url.trim_start_matches("http://").to_owned();
    let body = r#"{"model":"bench","messages":[{"role":"user","content":"x"}]}"#;
    let connection = if pooled { "keep-alive" } else { "close" };
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: {connection}\r\n\r\n{body}",
        body.len()
    );
    let mut kept: Option<BufReader<tokio::net::TcpStream>> = None;
    let mut times = Vec::new();
    for _ in 0..100 {
        let t = Instant::now();
        let mut s = match kept.take() {
            Some(s) => s,
            None => BufReader::new(tokio::net::TcpStream::connect(&addr).await.unwrap()),
        };
        s.get_mut().write_all(req.as_bytes()).await.unwrap();
        // Headers, then exactly content-length bytes of body.
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            s.read_line(&mut line).await.unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        s.read_exact(&mut body).await.unwrap();
        times.push(t.elapsed());
        if pooled {
            kept = Some(s);
        }
    }
    pct(&mut times, 0.5)
}

/// Resident memory of one idle simulated device (its own process, after a few commands), and
/// of the device service holding 20 direct devices, each leased and read once.
async fn device_footprint() {
    let port = free_port();
    let _sim = Proc::spawn("sim1", &["sim", "--port", &port.to_string()]).unwrap();
    let sim_pid = _sim.id();
    let addr = format!("127.0.0.1:{port}");
    while std::net::TcpStream::connect(&addr).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let dev = droidmesh_device::adb::AdbDevice::new(
        addr.clone(),
        droidmesh_device::adb::Route::Direct(addr.parse().unwrap()),
        Duration::from_secs(10),
        None,
    );
    for cmd in [
        "uiautomator dump /dev/tty",
        "monkey -p com.android.settings 1",
        "uiautomator dump /dev/tty",
        "screencap -p",
    ] {
        dev.shell_bytes(cmd).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    println!(
        "resident memory of one idle simulated device (own process, after dump + screencap): {:.1} MB (target <= 20 MB)",
        rss_kb(sim_pid) as f64 / 1024.0
    );
    drop(dev);

    let llm = MockLlmServer::start(vec![]).await.unwrap();
    let mesh = start(20, &llm.url()).await;
    let mut device = DeviceServiceClient::connect(mesh.device_ep.clone())
        .await
        .unwrap();
    for serial in &mesh.serials {
        device
            .acquire_lease(AcquireLeaseRequest {
                serial: serial.clone(),
                holder: "bench".into(),
                ttl_ms: 600_000,
            })
            .await
            .unwrap();
        device
            .get_state(GetStateRequest {
                serial: serial.clone(),
                include_screenshot: true,
                screenshot_max_side: 1024,
                masks: Vec::new(),
            })
            .await
            .unwrap();
    }
    let pid = mesh
        .pids
        .iter()
        .find(|(s, _)| s == "device")
        .map(|(_, p)| *p)
        .unwrap();
    println!(
        "resident memory of the device service holding 20 devices (leased, state and screenshot read): {:.1} MB (target <= 60 MB)",
        rss_kb(pid) as f64 / 1024.0
    );
}

/// Tasks per second through one gateway, `clients` at once each running `per_client` one-step
/// tasks back to back on its own phone (zero-latency model), with the gateway's tasks kept in
/// memory and in its SQLite store, alternately (twice each) so machine noise hits both.
async fn store_throughput(clients: usize, per_client: usize) {
    let llm = MockLlmServer::start(vec![]).await.unwrap();
    llm.set_log_requests(false);
    llm.set_fallback(MockResponse::success(
        WireFormat::Openai,
        "```javascript\ncomplete(true, 'done')\n```",
        "bench",
        100,
        10,
    ));
    // MESH_BENCH_ROUNDS: pairs of runs (memory, then SQLite), 3 unless set.
    let rounds: usize = std::env::var("MESH_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    println!(
        "tasks/s through one gateway, {clients} clients x {per_client} one-step tasks, {rounds} rounds:"
    );
    let mut rates: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut cpus: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut alls: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for store in std::iter::repeat_n(["memory", "sqlite"], rounds).flatten() {
        let mesh = std::sync::Arc::new(
            start_with(
                clients,
                &llm.url(),
                0,
                "warn",
                &format!("store = \"{store}\""),
            )
            .await,
        );
        let run = |n: usize| {
            let handles: Vec<_> = (0..clients)
                .map(|i| {
                    let m = mesh.clone();
                    tokio::spawn(async move {
                        for _ in 0..n {
                            timed_task(&m, &m.serials[i], 1, Mode::Direct).await;
                        }
                    })
                })
                .collect();
            async move {
                for h in handles {
                    h.await.unwrap();
                }
            }
        };
        run(1).await; // warm up
        let gateway = mesh.pids.iter().find(|(s, _)| s == "gateway").unwrap().1;
        // Every process of the run: the mesh's and this one (clients and model double).
        let everyone =
            || mesh.pids.iter().map(|(_, p)| cpu_ms(*p)).sum::<u64>() + cpu_ms(std::process::id());
        let (cpu_before, all_before) = (cpu_ms(gateway), everyone());
        let t = Instant::now();
        run(per_client).await;
        let tasks = (clients * per_client) as f64;
        let rate = tasks / t.elapsed().as_secs_f64();
        let cpu = (cpu_ms(gateway) - cpu_before) as f64 * 1000.0 / tasks;
        let all = (everyone() - all_before) as f64 * 1000.0 / tasks;
        println!(
            "  {store:<7} {rate:>7.1} tasks/s, gateway CPU {cpu:>5.0} µs/task, all processes {all:>5.0} µs/task"
        );
        rates.entry(store).or_default().push(rate);
        cpus.entry(store).or_default().push(cpu);
        alls.entry(store).or_default().push(all);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    // Each round's SQLite run against the memory run just before it: the machine's speed
    // drifts between rounds more than the store costs.
    let mut ratios: Vec<f64> = rates["sqlite"]
        .iter()
        .zip(&rates["memory"])
        .map(|(s, m)| 100.0 * s / m)
        .collect();
    ratios.sort_by(f64::total_cmp);
    println!(
        "  sqlite / memory: {:.1}% of the means, median of the rounds {:.1}% (rounds {}) (target >= 95%)",
        100.0 * mean(&rates["sqlite"]) / mean(&rates["memory"]),
        ratios[ratios.len() / 2],
        ratios
            .iter()
            .map(|r| format!("{r:.0}%"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "  gateway CPU per task: memory {:.0} µs, sqlite {:.0} µs (+{:.0} µs)",
        mean(&cpus["memory"]),
        mean(&cpus["sqlite"]),
        mean(&cpus["sqlite"]) - mean(&cpus["memory"])
    );
    // The run is CPU-bound (every process shares the machine's cores), so tasks/s goes as the
    // inverse of the CPU all processes spend per task: a figure that drifts less with the
    // machine's speed than tasks/s does.
    println!(
        "  CPU of all processes per task: memory {:.0} µs, sqlite {:.0} µs: sqlite at {:.1}% of memory's tasks/s for the same CPU",
        mean(&alls["memory"]),
        mean(&alls["sqlite"]),
        100.0 * mean(&alls["memory"]) / mean(&alls["sqlite"])
    );
}

/// `MESH_BENCH=steps`: a CodeAct step with a zero-latency model, the phone reached straight at
/// its port and through Debian's adb server, in one run.
async fn steps_by_route() {
    let llm = replying(STEP).await;
    if !droidmesh_sim::testkit::adb_available() {
        println!("adb is not installed: only the direct route is measured");
    }
    let adb = droidmesh_sim::testkit::adb_available()
        .then(|| droidmesh_sim::testkit::AdbServer::start().unwrap());
    println!("step time, zero-latency model, one task of 200 steps per route:");
    for (name, route) in [("direct TCP", None), ("adb server", adb.as_ref())] {
        if name == "adb server" && route.is_none() {
            continue;
        }
        let mesh = start_routed(1, &llm.url(), 0, "warn", "", route).await;
        let _warm = task(&mesh, &mesh.serials[0], 5).await;
        let mut steps = task(&mesh, &mesh.serials[0], 200).await;
        println!(
            "  {name:<10} p50 {:?} p90 {:?}",
            pct(&mut steps, 0.5),
            pct(&mut steps, 0.9)
        );
    }
}
