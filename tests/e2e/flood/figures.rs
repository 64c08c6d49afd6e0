//! Figures, ignored by default: what a flood of silent connections costs `droidmesh up` in
//! memory (gRPC), and how long a real request to the HTTP face waits during one.
use super::*;

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

/// Figures: with the flood test's settings for the HTTP face (64 connections, 2 s header
/// deadline), how long after a flood of 1,500 silent connections a real request (`GET
/// /v1/devices` on a new connection, sent again every 20 ms while refused) is answered, and how
/// long the answered one took, over `ROUNDS` floods.
/// `cargo test -p droidmesh-e2e --test e2e http_flood_answer_figures -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement: prints figures, takes about 20 s"]
async fn http_flood_answer_figures() {
    const ROUNDS: usize = 7;
    let llm = MockLlmServer::start(Vec::new()).await.unwrap();
    let up = start_up(
        &llm.url(),
        &format!("[gateway_http]\nmax_connections = {CAP}\nread_timeout_ms = 2000\n"),
    )
    .await;
    http_answers(up.http).await.unwrap();
    let (mut waited, mut took, mut tries) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let silent = flood(up.http, FLOOD).await;
        let ended = Instant::now();
        let mut n = 0;
        loop {
            n += 1;
            let sent = Instant::now();
            if http_answers(up.http).await.is_ok() {
                took.push(sent.elapsed());
                break;
            }
            assert!(
                ended.elapsed() < Duration::from_secs(10),
                "no answer in 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        waited.push(ended.elapsed());
        tries.push(n);
        for c in silent {
            closed_within(c, Duration::from_secs(10), "a silent HTTP connection").await;
        }
    }
    waited.sort();
    took.sort();
    tries.sort();
    let spread = |v: &[Duration]| {
        format!(
            "min {:?}, median {:?}, max {:?}",
            v[0],
            v[v.len() / 2],
            v[v.len() - 1]
        )
    };
    println!(
        "{ROUNDS} floods of {FLOOD} silent connections (cap {CAP}): answered after the flood's \
         end: {}; the answered request took: {}; tries: {tries:?}",
        spread(&waited),
        spread(&took)
    );
}
