//! Resident memory of the device service holding 20 devices.
//!
//! `cargo run --release -p droidmesh-device --example device_rss`
//!
//! The 20 simulators run in a child process (this binary re-executed with
//! `DROIDMESH_RSS_CHILD=20`) so that their memory is not counted; the adb server is its own
//! process too. This process runs only the device service and a gRPC client, attaches all 20
//! devices through the adb server, reads the state (UI dump + screenshot) of each, and then
//! reports its own VmRSS and VmHWM from /proc/self/status.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};

use droidmesh_device::{DeviceConfig, device_service};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{GetStateRequest, ListDevicesRequest};

const DEVICES: usize = 20;

fn main() {
    if let Ok(n) = std::env::var("DROIDMESH_RSS_CHILD") {
        child(n.parse().unwrap());
        return;
    }
    if !droidmesh_sim::testkit::adb_available() {
        println!("adb not installed: cannot measure");
        return;
    }
    let rss_start = status_kb("VmRSS");
    let mut sims = Command::new(std::env::current_exe().unwrap())
        .env("DROIDMESH_RSS_CHILD", DEVICES.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(sims.stdout.take().unwrap()).lines();
    let addrs: Vec<SocketAddr> = (0..DEVICES)
        .map(|_| lines.next().unwrap().unwrap().parse().unwrap())
        .collect();
    let adb = droidmesh_sim::testkit::AdbServer::start().unwrap();
    let serials: Vec<String> = addrs.iter().map(|a| adb.connect(*a).unwrap()).collect();

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let svc = device_service(DeviceConfig {
            adb_server: format!("127.0.0.1:{}", adb.port),
            ..DeviceConfig::default()
        })
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(
                    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
                ),
        );
        let mut client = DeviceServiceClient::connect(format!("http://{addr}"))
            .await
            .unwrap();
        let listed = client
            .list_devices(ListDevicesRequest {})
            .await
            .unwrap()
            .into_inner()
            .devices;
        let ours = listed
            .iter()
            .filter(|d| serials.contains(&d.serial))
            .count();
        assert_eq!(
            ours, DEVICES,
            "the service does not see all devices: {listed:?}"
        );
        for round in 0..3 {
            let mut tasks = Vec::new();
            for s in &serials {
                let mut c = client.clone();
                let s = s.clone();
                tasks.push(tokio::spawn(async move {
                    c.get_state(GetStateRequest {
                        serial: s,
                        include_screenshot: round > 0,
                        screenshot_max_side: 0,
                        masks: Vec::new(),
                    })
                    .await
                    .unwrap()
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        }
    });
    let child_rss = child_status_kb(sims.id(), "VmRSS");
    println!(
        "device service process, {DEVICES} devices attached and read 3 times each (GetState with screenshots):"
    );
    println!("  VmRSS at start            {:>8} kB", rss_start);
    println!("  VmRSS now                 {:>8} kB", status_kb("VmRSS"));
    println!("  VmHWM (peak RSS)          {:>8} kB", status_kb("VmHWM"));
    println!(
        "  (simulator child process  {:>8} kB, not counted)",
        child_rss
    );
    drop(sims.stdin.take());
    let _ = sims.wait();
}

fn child(n: usize) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let fleet = droidmesh_sim::start(droidmesh_sim::SimOptions {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            base_port: 0,
            devices: n,
            ..Default::default()
        })
        .await
        .unwrap();
        for a in fleet.addrs() {
            println!("{a}");
        }
        // Serve until the parent closes our stdin.
        tokio::task::spawn_blocking(|| {
            let mut buf = [0u8; 16];
            let _ = std::io::stdin().read(&mut buf);
        })
        .await
        .unwrap();
        fleet.shutdown().await;
    });
}

fn status_kb(key: &str) -> u64 {
    parse_status(
        &std::fs::read_to_string("/proc/self/status").unwrap_or_default(),
        key,
    )
}

fn child_status_kb(pid: u32, key: &str) -> u64 {
    parse_status(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default(),
        key,
    )
}

fn parse_status(s: &str, key: &str) -> u64 {
    s.lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .strip_prefix(':')?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}
