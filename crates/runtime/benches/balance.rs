//! What balancing costs per call (`cargo bench -p droidmesh-runtime --bench balance`): unary
//! calls to a real server on loopback through a direct channel, and through the balancer over
//! one and over three replicas behind a name. Sequential calls, so each figure is one call's
//! latency; the overhead is the balanced p50 minus the direct p50 (target <= 50 µs). With
//! `BENCH_METRICS=1` the process's meter provider is installed first (no exporter), so every
//! call is also recorded by the servers' RPC metrics layer: comparing two runs gives what the
//! metrics cost per call.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use droidmesh_proto::v1::GetLoadRequest;
use droidmesh_proto::v1::replica_service_client::ReplicaServiceClient;
use droidmesh_runtime::balance::{Discovery, StaticResolver};
use droidmesh_runtime::{ClientOptions, ServeOptions, TracedChannel, connect, serve};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tonic::service::Routes;

const CALLS: usize = 5_000;

async fn server(ip: IpAddr, port: u16) -> u16 {
    let listener = TcpListener::bind((ip, port)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let opts = ServeOptions::new("bench", &[]);
    tokio::spawn(serve(
        listener,
        Routes::default(),
        opts,
        std::future::pending(),
    ));
    port
}

/// Per-call latencies of `CALLS` sequential calls, after a warm-up.
async fn latencies(channel: TracedChannel) -> Vec<Duration> {
    let mut client = ReplicaServiceClient::new(channel);
    for _ in 0..200 {
        client.get_load(GetLoadRequest {}).await.unwrap();
    }
    let mut out = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        client.get_load(GetLoadRequest {}).await.unwrap();
        out.push(t.elapsed());
    }
    out.sort();
    out
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let metrics = std::env::var("BENCH_METRICS").is_ok_and(|v| v == "1");
    if metrics {
        droidmesh_runtime::metrics::install("bench", None).unwrap();
    }
    println!(
        "RPC metrics {} (no exporter)",
        if metrics { "recorded" } else { "not installed" }
    );
    let ips: Vec<IpAddr> = (2..=4).map(|i| IpAddr::from([127, 0, 0, i])).collect();
    let port = server(ips[0], 0).await;
    for ip in &ips[1..] {
        server(*ip, port).await;
    }
    let resolver = StaticResolver::default();
    resolver.set("one.bench", &ips[..1]);
    resolver.set("three.bench", &ips);
    let opts = ClientOptions {
        discovery: Discovery {
            resolver: Arc::new(resolver),
            ..Discovery::default()
        },
        ..ClientOptions::default()
    };
    let direct = latencies(connect(&format!("{}:{port}", ips[0]), &opts).unwrap()).await;
    let one = latencies(connect(&format!("one.bench:{port}"), &opts).unwrap()).await;
    let three = latencies(connect(&format!("three.bench:{port}"), &opts).unwrap()).await;
    for (what, v) in [
        ("direct channel", &direct),
        ("balanced, 1 replica", &one),
        ("balanced, 3 replicas", &three),
    ] {
        println!(
            "{what:<22} {CALLS} sequential unary calls: p50 {:?} p90 {:?}",
            pct(v, 0.5),
            pct(v, 0.9)
        );
    }
    let over =
        |v: &[Duration]| pct(v, 0.5).as_secs_f64() * 1e6 - pct(&direct, 0.5).as_secs_f64() * 1e6;
    println!(
        "balancing overhead per call (p50 minus direct p50): 1 replica {:.1} µs, 3 replicas {:.1} µs (target <= 50 µs)",
        over(&one),
        over(&three)
    );
}
