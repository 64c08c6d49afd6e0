//! Connection floods and slow clients against `droidmesh up` (six gRPC ports and the gateway's
//! HTTP face in one process, a simulated phone, a scripted model), per face: silent
//! connections far beyond the cap are held to it, every service keeps answering its health
//! check and a real task completes while they last (on the HTTP face a listing and a task
//! submitted over HTTP answer at the first try, before the header deadline frees a slot), they
//! are closed by the preface (gRPC) or header (HTTP) deadline, a client that sends its first
//! bytes slowly is cut the same way, and the process's memory comes back to where it was.
//! Bounded: 1,500 connections per face, each wait with a deadline. `flood_memory_figures` and
//! `http_flood_answer_figures` (ignored by default) print figures.
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
    // Every face warns at its cap at most once per 10 s.
    let proc = Proc::spawn_env(
        "up",
        &["--config", path.to_str().unwrap(), "up", "--sims", "1"],
        &[("RUST_LOG", "warn")],
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

/// One request to the HTTP face on a new connection (`connection: close`), answered within
/// 5 s: its status and body, or why not.
async fn http_call(
    port: u16,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let mut c = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: e2e\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.write_all(request.as_bytes())
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut out))
        .await
        .map_err(|_| "no answer within 5 s".to_owned())?
        .map_err(|e| format!("closed: {e}"))?;
    let text = String::from_utf8_lossy(&out);
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("closed without an answer: {text:?}"))?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, body.to_owned()))
}

/// The HTTP face answers `GET /v1/devices` (its listing of the phones, through the device
/// service) on a new connection.
async fn http_answers(port: u16) -> Result<(), String> {
    match http_call(port, "GET", "/v1/devices", "").await? {
        (200, _) => Ok(()),
        (status, body) => Err(format!("{status}: {body}")),
    }
}

/// Submits a one-step task over HTTP on a new connection: its id once the face answered 201.
async fn http_submit(up: &Up) -> Result<String, String> {
    let body = format!(r#"{{"goal":"Say done","device":"{}"}}"#, up.serial);
    match http_call(up.http, "POST", "/v1/tasks", &body).await? {
        (201, body) => serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["taskId"].as_str().map(str::to_owned))
            .ok_or_else(|| format!("no task id in {body}")),
        (status, body) => Err(format!("{status}: {body}")),
    }
}

/// Waits (at most 60 s) until the task `id`, read over HTTP, has succeeded.
async fn http_task_succeeds(port: u16, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let read = http_call(port, "GET", &format!("/v1/tasks/{id}"), "").await;
        if let Ok((200, body)) = &read
            && body.contains("TASK_STATE_SUCCEEDED")
        {
            return;
        }
        assert!(
            Instant::now() < deadline && !format!("{read:?}").contains("TASK_STATE_FAILED"),
            "the task submitted over HTTP did not succeed: {read:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
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
        MockLlmServer::start((0..4).map(|_| reply("```javascript\ncomplete(true, 'done')\n```")))
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

    // HTTP: 1,500 silent connections to the HTTP face. At its cap each new connection takes
    // the place of the oldest silent one, so once it has taken them all in (it holds at most
    // its cap of them) and while the last ones are still held (their header deadline, 2 s,
    // not passed), a listing and a task submitted over HTTP answer at the first try.
    let started = Instant::now();
    let silent = flood(up.http, FLOOD).await;
    let flood_ended = Instant::now();
    let held_http = held_to(&silent, CAP, "HTTP flood").await;
    if let Err(e) = http_answers(up.http).await {
        panic!("the HTTP face refused GET /v1/devices during its flood: {e}");
    }
    let task = http_submit(&up)
        .await
        .unwrap_or_else(|e| panic!("the HTTP face refused a task during its flood: {e}"));
    let answered = flood_ended.elapsed();
    let still_held = silent.iter().filter(|c| still_open(c)).count();
    all_healthy(&up, "during the HTTP flood").await;
    http_task_succeeds(up.http, &task).await;
    for c in silent {
        closed_within(c, Duration::from_secs(10), "a silent HTTP connection").await;
    }
    eprintln!(
        "HTTP flood: {FLOOD} connections, {held_http} held (cap {CAP}); a listing and a task \
         answered {answered:?} after its end, {still_held} of its connections still held then; \
         all closed {:?} after the first",
        started.elapsed()
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

mod figures;
