//! Figure: the simulator's memory with clients that never read. Each client asks for thousands
//! of screenshots (`exec:screencap -p`) on one connection and reads nothing back; the
//! simulator's resident memory is printed before and after (target: at most 64 MB growth).
//!
//! `cargo run --release -p droidmesh-sim --example never_reads [CLIENTS] [STREAMS]`
use std::time::{Duration, Instant};

use droidmesh_adb_wire::{A_CNXN, A_OPEN, A_VERSION, encode};
use droidmesh_sim::SimOptions;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let clients: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let streams: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5_000);
    let fleet = droidmesh_sim::start(SimOptions {
        host: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        base_port: 0,
        devices: 1,
        ..SimOptions::default()
    })
    .await?;
    let addr = fleet.addrs()[0];
    let before = rss_mb();
    let mut held = Vec::new();
    let mut sent = 0u32;
    for _ in 0..clients {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(&encode(A_CNXN, A_VERSION, 256 * 1024, b"host::\0"))
            .await?;
        for id in 1..=streams {
            let open = encode(A_OPEN, id, 0, b"exec:screencap -p\0");
            // The simulator stops reading a host that does not read: the write then stalls.
            match tokio::time::timeout(Duration::from_secs(2), s.write_all(&open)).await {
                Ok(Ok(())) => sent += 1,
                _ => break,
            }
        }
        held.push(s);
    }
    // Let the simulator work through what it read, until its memory stops changing.
    let mut peak = rss_mb();
    let mut last = peak;
    let settle = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = rss_mb();
        peak = peak.max(now);
        if (now - last).abs() < 0.5 || settle.elapsed() > Duration::from_secs(30) {
            break;
        }
        last = now;
    }
    let after = rss_mb();
    println!(
        "never-reading clients: {clients}, screencap streams requested: {sent}\n\
         simulator RSS before {before:.1} MB, peak {peak:.1} MB, after {after:.1} MB; \
         growth at peak {:.1} MB (target <= 64 MB)",
        peak - before
    );
    drop(held);
    fleet.shutdown().await;
    Ok(())
}
