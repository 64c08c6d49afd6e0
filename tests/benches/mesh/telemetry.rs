//! What metrics and tracing cost per CodeAct step with no exporter configured: the same
//! 200-step task on the same mesh shape, services started with telemetry off (no admin port,
//! so no meter provider; `RUST_LOG=warn`, so info spans are disabled) and on (admin ports
//! serving /metrics, `RUST_LOG=info`: every RPC, chat and tool span made), alternated three
//! times each; median step times compared.
use super::*;

async fn median_step(admin: u16, rust_log: &str, llm_url: &str) -> Duration {
    let mesh = start_with(1, llm_url, admin, rust_log, "").await;
    let _warm = task(&mesh, &mesh.serials[0], 5).await;
    let mut steps = task(&mesh, &mesh.serials[0], 200).await;
    if admin != 0 {
        // The scrape works and counted the steps' RPCs.
        let body = reqwest_free_get(admin).await;
        assert!(body.contains("rpc_server_requests_total"), "{body}");
    }
    pct(&mut steps, 0.5)
}

/// `GET /metrics` from the device service's admin port, over a plain TCP connection.
async fn reqwest_free_get(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

pub async fn cost_per_step() {
    let llm = MockLlmServer::start(vec![]).await.unwrap();
    llm.set_log_requests(false);
    llm.set_fallback(MockResponse::success(
        WireFormat::Openai,
        STEP,
        "bench",
        100,
        10,
    ));
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        off.push(median_step(0, "warn", &llm.url()).await);
        let admin = loop {
            let p = free_port();
            if p > 1024
                && p < 60000
                && (1..4).all(|i| std::net::TcpListener::bind(("127.0.0.1", p + i)).is_ok())
            {
                break p;
            }
        };
        on.push(median_step(admin, "info", &llm.url()).await);
    }
    let (off50, on50) = (pct(&mut off, 0.5), pct(&mut on, 0.5));
    let cost = on50.as_secs_f64() - off50.as_secs_f64();
    println!(
        "telemetry per step, no exporter (3 meshes each, 200 steps, median of medians): off {off50:?}, on {on50:?}: {:+.1} us = {:+.2}% (target <= 2%)",
        cost * 1e6,
        cost / off50.as_secs_f64() * 100.0
    );
    println!("  runs off {off:?}; on {on:?}");
}
