//! Connection floods and slow clients against `droidmesh up` (six gRPC ports and the gateway's
//! HTTP face in one process, a simulated phone, a scripted model), per face: silent
//! connections far beyond the cap are held to it, every service keeps answering its health
//! check and a real task completes while they last, they are closed by the preface (gRPC) or
//! header (HTTP) deadline, a client that sends its first bytes slowly is cut the same way, and
//! the process's memory comes back to where it was. Bounded: 1,500 connections per face, each
//! wait with a deadline. `flood_memory_figures` (ignored by default) prints the figures for
//! 20,000 attempted connections.
use super::*;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// The gRPC ports of `up`, by the name `[listen]` gives them.
const SERVICES: [&str; 6] = [
    "device",
    "executor",
    "manager",
    "scripter",
    "text_manipulator",
    "gateway",
];

struct Up {
    proc: Proc,
    /// Each service's gRPC port, in the order of [`SERVICES`].
    grpc: Vec<u16>,
    http: u16,
    serial: String,
}

impl Up {
    fn gateway(&self) -> u16 {
        self.grpc[5]
    }

    /// The process's resident memory now, in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.proc.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

/// `droidmesh up --sims 1` with `extra` appended to its config; returns once its gateway
/// lists the phone.
async fn start_up(llm_url: &str, extra: &str) -> Up {
    let grpc: Vec<u16> = (0..6).map(|_| free_port()).collect();
    let http = free_port();
    let dir = std::env::temp_dir().join(format!(
        "droidmesh-e2e-flood-{}-{}",
        std::process::id(),
        grpc[5]
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut config = "[listen]\nhost = \"127.0.0.1\"\nadmin = 0\n".to_owned();
    for (name, port) in SERVICES.iter().zip(&grpc) {
        config.push_str(&format!("{name} = {port}\n"));
    }
    config.push_str(&format!(
        "gateway_http = {http}\n[device]\nadb_server = \"\"\n\
         [llm.providers.mock]\nwire = \"openai\"\nbase_url = \"{llm_url}/v1\"\n\
         [llm.profiles.default]\nprovider = \"mock\"\nmodel = \"scripted-model\"\n{extra}"
    ));
    let path = dir.join("droidmesh.toml");
    std::fs::write(&path, config).unwrap();
    // The HTTP face warns once per connection it turns away (1,400 lines a flood here); the
    // gRPC ports' warnings, at most one per 10 s, stay in view.
    let proc = Proc::spawn_env(
        "up",
        &["--config", path.to_str().unwrap(), "up", "--sims", "1"],
        &[("RUST_LOG", "warn,droidmesh_gateway::http=error")],
    )
    .unwrap();
    let endpoint = format!("http://127.0.0.1:{}", grpc[5]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut g) = GatewayClient::connect(endpoint.clone()).await
            && let Ok(list) = g.list_devices(ListDevicesRequest {}).await
            && let Some(d) = list.into_inner().devices.first()
        {
            let serial = d.serial.clone();
            return Up {
                proc,
                grpc,
                http,
                serial,
            };
        }
        assert!(Instant::now() < deadline, "up never listed its phone");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A health check on a new connection to `port`: how long it took, or why it failed.
async fn health(port: u16) -> Result<Duration, String> {
    let started = Instant::now();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    HealthClient::new(channel)
        .check(HealthCheckRequest::default())
        .await
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?;
    Ok(started.elapsed())
}

/// Every service of `up` answers its health check on a new connection within 5 s.
async fn all_healthy(up: &Up, during: &str) {
    for (name, port) in SERVICES.iter().zip(&up.grpc) {
        let took = health(*port)
            .await
            .unwrap_or_else(|e| panic!("{during}: {name} did not answer its health check: {e}"));
        assert!(
            took < Duration::from_secs(5),
            "{during}: {name} took {took:?}"
        );
    }
}

/// Runs a one-step task through a new gateway connection; it must end SUCCEEDED within 60 s.
async fn a_task_completes(up: &Up, during: &str) {
    let started = Instant::now();
    let mut g = GatewayClient::connect(format!("http://127.0.0.1:{}", up.gateway()))
        .await
        .unwrap_or_else(|e| panic!("{during}: the gateway took no connection: {e}"));
    let req = TaskRequest {
        goal: "Say done".into(),
        device: up.serial.clone(),
        ..TaskRequest::default()
    };
    let mut stream = g.run_task(req).await.unwrap().into_inner();
    let mut last = None;
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(60), stream.next()).await {
        last = Some(ev.unwrap());
    }
    let completed = completed(&last.into_iter().collect::<Vec<_>>());
    assert!(completed.success, "{during}: {completed:?}");
    eprintln!("{during}: a task took {:?}", started.elapsed());
}

/// Whether the server still holds `conn` open.
fn still_open(conn: &TcpStream) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match conn.try_read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::WouldBlock,
        }
    }
}

/// Opens `n` connections to `port` that send nothing, dropping those the server closed as it
/// goes (so the test's own descriptors stay few); returns those still open.
async fn flood(port: u16, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for i in 0..n {
        match TcpStream::connect(("127.0.0.1", port)).await {
            Ok(c) => held.push(c),
            Err(e) => panic!("connection {i} of the flood failed: {e}"),
        }
        if i % 250 == 249 {
            held.retain(still_open);
        }
    }
    held
}

/// Waits until at most `most` of `conns` are still open; the count when it happened.
async fn held_to(conns: &[TcpStream], most: usize, what: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let open = conns.iter().filter(|c| still_open(c)).count();
        if open <= most {
            return open;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {open} connections still held, expected at most {most}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads `conn` until the server closes it; the time that took. Panics after `limit`.
async fn closed_within(mut conn: TcpStream, limit: Duration, what: &str) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((started + limit).into(), conn.read(&mut buf)).await {
            Err(_) => panic!("{what}: still open after {limit:?}"),
            Ok(Ok(0) | Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

/// Sends `bytes` one at a time, 200 ms apart, then nothing, until the server closes the
/// connection; how long after the connect that was.
async fn trickle(port: u16, bytes: &[u8]) -> Duration {
    let started = Instant::now();
    let mut conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut rest = bytes.iter();
    loop {
        if let Some(b) = rest.next()
            && conn.write_all(&[*b]).await.is_err()
        {
            return started.elapsed();
        }
        if !still_open(&conn) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "a client trickling its first bytes was never cut"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The HTTP face answers `GET /v1/devices` on a new connection.
async fn http_answers(port: u16) -> Result<(), String> {
    let mut c = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    c.write_all(b"GET /v1/devices HTTP/1.1\r\nHost: e2e\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut head = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(5), c.read_exact(&mut head))
        .await
        .map_err(|_| "no answer within 5 s".to_owned())?
        .map_err(|e| format!("closed: {e}"))?;
    if head.starts_with(b"HTTP/1.1 200") {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&head).into_owned())
    }
}

/// Waits until `rss` (KiB) is within `slack` KiB of `baseline`; the value then.
async fn memory_back(up: &Up, baseline: u64, slack: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = up.rss_kib();
        if now <= baseline + slack {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "memory stayed at {now} KiB, {} KiB over the baseline of {baseline} KiB",
            now - baseline
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const CAP: usize = 64;
/// Connections a gRPC port may still be closing on top of its cap (an eighth of it).
const CLOSING: usize = CAP / 8;
const FLOOD: usize = 1_500;

#[tokio::test(flavor = "multi_thread")]
async fn floods_and_slow_clients_on_either_face_leave_up_answering() {
    let llm =
        MockLlmServer::start((0..3).map(|_| reply("```javascript\ncomplete(true, 'done')\n```")))
            .await
            .unwrap();
    let up = start_up(
        &llm.url(),
        &format!(
            "[grpc]\nmax_connections = {CAP}\npreface_timeout_ms = 2000\n\
             [gateway_http]\nmax_connections = {CAP}\nread_timeout_ms = 2000\n"
        ),
    )
    .await;
    // Warm: every code path a task takes has run once.
    all_healthy(&up, "before").await;
    a_task_completes(&up, "before").await;
    let baseline = up.rss_kib();

    // gRPC: 1,500 silent connections to the public port.
    let started = Instant::now();
    let silent = flood(up.gateway(), FLOOD).await;
    let held = held_to(&silent, CAP + CLOSING, "gRPC flood").await;
    all_healthy(&up, "during the gRPC flood").await;
    a_task_completes(&up, "during the gRPC flood").await;
    let during = up.rss_kib();
    // Each silent one is closed by the preface deadline (2 s).
    for c in silent {
        closed_within(c, Duration::from_secs(10), "a silent gRPC connection").await;
    }
    eprintln!(
        "gRPC flood: {FLOOD} connections, {held} held (cap {CAP}), all closed {:?} after the \
         first; memory {baseline} KiB before, {during} KiB during",
        started.elapsed()
    );
    let cut = trickle(up.gateway(), &PREFACE_START).await;
    assert!(
        cut >= Duration::from_millis(1_900) && cut < Duration::from_secs(10),
        "a client trickling its preface was cut after {cut:?}"
    );
    // A request message over 4 MiB is refused as gRPC does, naming the limit.
    let mut g = GatewayClient::connect(format!("http://127.0.0.1:{}", up.gateway()))
        .await
        .unwrap();
    let huge = TaskRequest {
        goal: "x".repeat(5 * 1024 * 1024),
        device: up.serial.clone(),
        ..TaskRequest::default()
    };
    let refused = g.submit_task(huge).await.unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("4194304"),
        "{}",
        refused.message()
    );
    drop(g);

    // HTTP: 1,500 silent connections to the HTTP face; the ones it holds are cut by its header
    // deadline (2 s), so it answers again within that.
    let started = Instant::now();
    let silent = flood(up.http, FLOOD).await;
    let held_http = held_to(&silent, CAP, "HTTP flood").await;
    let answered = loop {
        match http_answers(up.http).await {
            Ok(()) => break started.elapsed(),
            Err(e) => assert!(
                started.elapsed() < Duration::from_secs(10),
                "the HTTP face did not answer during its flood: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    all_healthy(&up, "during the HTTP flood").await;
    for c in silent {
        closed_within(c, Duration::from_secs(10), "a silent HTTP connection").await;
    }
    eprintln!(
        "HTTP flood: {FLOOD} connections, {held_http} held (cap {CAP}), answered {answered:?} \
         after the first"
    );
    let cut = trickle(up.http, b"GET /v1/devices HTTP/1.1\r\nHost: e2e\r\n").await;
    assert!(
        cut >= Duration::from_millis(1_900) && cut < Duration::from_secs(10),
        "a client trickling its request head was cut after {cut:?}"
    );

    // Memory back where it was (within 8 MiB), and the process serves on.
    let after = memory_back(&up, baseline, 8 * 1024).await;
    eprintln!("memory: {baseline} KiB before, {during} KiB during, {after} KiB after");
    a_task_completes(&up, "after").await;
}

/// The start of the HTTP/2 client preface, sent a byte at a time by a slow client.
const PREFACE_START: [u8; 16] = *b"PRI * HTTP/2.0\r\n";

/// Figures: 20,000 connection attempts that send nothing against one gRPC port of `up` with
/// the default settings (1024 connections, 10 s preface deadline): how many the port held, how
/// long until the last was closed, and the process's memory before, at its peak and after.
/// `cargo test -p droidmesh-e2e --test e2e flood_memory_figures -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement: prints figures, takes about half a minute"]
async fn flood_memory_figures() {
    let llm = MockLlmServer::start(vec![reply("```javascript\ncomplete(true, 'done')\n```")])
        .await
        .unwrap();
    let up = start_up(&llm.url(), "").await;
    a_task_completes(&up, "warm-up").await;
    let before = up.rss_kib();
    let started = Instant::now();
    let mut peak = before;
    let mut held = Vec::new();
    for i in 0..20_000 {
        if let Ok(c) = TcpStream::connect(("127.0.0.1", up.gateway())).await {
            held.push(c);
        }
        if i % 500 == 499 {
            held.retain(still_open);
            peak = peak.max(up.rss_kib());
        }
    }
    held.retain(still_open);
    let most_held = held.len();
    let health_took = health(up.gateway()).await;
    peak = peak.max(up.rss_kib());
    let opened = started.elapsed();
    for c in held {
        closed_within(c, Duration::from_secs(30), "a silent connection").await;
    }
    let all_closed = started.elapsed();
    let after = memory_back(&up, before, 64 * 1024).await;
    println!(
        "20000 attempted: {most_held} held at the end of the flood (opened in {opened:?}), \
         health on a new connection during it: {health_took:?}, the last closed {all_closed:?} \
         after the first; RSS {before} KiB before, {peak} KiB peak (+{} KiB), {after} KiB after",
        peak - before
    );
}
