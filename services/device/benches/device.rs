//! Benchmarks of the device service, printed as percentiles (`cargo bench -p droidmesh-device`):
//! parsing a 1,000-node UI dump, and — when `adb` is installed — GetState without screenshot
//! and Tap round trips over gRPC → service → adb server → simulator, plus a breakdown of where
//! one adb call spends its time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use droidmesh_device::{DeviceConfig, device_service, ui_dump::parse_ui_dump};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, GetStateRequest, LeaseRef, Point, TapRequest, tap_request,
};

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this too: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let iters = if quick { 5 } else { 300 };
    bench_xml(if quick { 5 } else { 500 });
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(bench_direct(iters));
    if !droidmesh_sim::testkit::adb_available() {
        println!("adb not installed: skipping the device round-trip benchmarks");
        return;
    }
    rt.block_on(bench_device(iters));
}

/// A uiautomator-style dump with `n` nodes: rows of a list, each a clickable row with two texts.
pub fn synthetic_dump(n: usize) -> String {
    let mut s = String::from(
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">",
    );
    let attrs = |text: &str, class: &str, clickable: bool, top: usize| {
        format!(
            "index=\"0\" text=\"{text}\" resource-id=\"com.example:id/row\" class=\"{class}\" package=\"com.example\" content-desc=\"\" checkable=\"false\" checked=\"false\" clickable=\"{clickable}\" enabled=\"true\" focusable=\"{clickable}\" focused=\"false\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" selected=\"false\" bounds=\"[0,{top}][1080,{}]\"",
            top + 100
        )
    };
    s.push_str(&format!(
        "<node {}>",
        attrs("", "android.widget.FrameLayout", false, 0)
    ));
    let rows = (n - 1) / 3;
    for r in 0..rows {
        s.push_str(&format!(
            "<node {}>",
            attrs("", "android.widget.LinearLayout", true, r * 100)
        ));
        s.push_str(&format!(
            "<node {} />",
            attrs(
                &format!("Contact number {r}"),
                "android.widget.TextView",
                false,
                r * 100
            )
        ));
        s.push_str(&format!(
            "<node {} />",
            attrs(
                &format!("+1 555 {r:04}"),
                "android.widget.TextView",
                false,
                r * 100
            )
        ));
        s.push_str("</node>");
    }
    s.push_str("</node></hierarchy>UI hierchary dumped to: /dev/tty");
    s
}

fn bench_xml(iters: usize) {
    let dump = synthetic_dump(1000);
    let nodes = parse_ui_dump(&dump).unwrap().total_nodes;
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        let ui = parse_ui_dump(std::hint::black_box(&dump)).unwrap();
        std::hint::black_box(&ui);
        times.push(t.elapsed());
    }
    report(
        &format!("parse ui dump ({nodes} nodes, {} KB)", dump.len() / 1024),
        &mut times,
    );
}

fn report(name: &str, times: &mut [Duration]) {
    times.sort();
    let pct = |p: f64| times[((times.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{name:<58} n={:<4} p50={:>9.3?} p90={:>9.3?} p99={:>9.3?} max={:>9.3?}",
        times.len(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        times[times.len() - 1]
    );
}

/// One adb call straight to the device's ADB port (no adb server): what `droidmesh up` and
/// `droidmesh run` use for their built-in simulated devices.
async fn bench_direct(iters: usize) {
    let fleet = droidmesh_sim::start(droidmesh_sim::SimOptions {
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        base_port: 0,
        devices: 1,
        ..Default::default()
    })
    .await
    .unwrap();
    let key = tempfile::tempdir().unwrap();
    let dev = droidmesh_device::adb::AdbDevice::new(
        "direct".into(),
        droidmesh_device::adb::Route::Direct(fleet.addrs()[0]),
        Duration::from_secs(10),
        Some(key.path().join("adbkey")),
    );
    dev.probe().await.unwrap();
    for (name, cmd) in [
        ("`echo ok`", "echo ok"),
        ("`uiautomator dump`", "uiautomator dump /dev/tty"),
    ] {
        let mut times = Vec::new();
        for _ in 0..iters {
            let t = Instant::now();
            dev.shell(cmd).await.unwrap();
            times.push(t.elapsed());
        }
        report(
            &format!("shell {name} direct TCP (native client)"),
            &mut times,
        );
    }
    fleet.shutdown().await;
}

async fn bench_device(iters: usize) {
    let fleet = droidmesh_sim::start(droidmesh_sim::SimOptions {
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        base_port: 0,
        devices: 1,
        ..Default::default()
    })
    .await
    .unwrap();
    let adb = droidmesh_sim::testkit::AdbServer::start().unwrap();
    let serial = adb.connect(fleet.addrs()[0]).unwrap();
    // Measure on a real screen (Settings: ~60 elements), not the 4-icon launcher.
    adb.shell(&serial, "monkey -p com.android.settings 1")
        .unwrap();
    let cfg = DeviceConfig {
        adb_server: format!("127.0.0.1:{}", adb.port),
        ..DeviceConfig::default()
    };
    let svc = device_service(cfg).unwrap();
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

    // Where one adb call goes: adb_client through the server, a bare shell, no gRPC.
    let server: std::net::SocketAddrV4 = format!("127.0.0.1:{}", adb.port).parse().unwrap();
    let dev = droidmesh_device::adb::AdbDevice::new(
        serial.clone(),
        droidmesh_device::adb::Route::Server(server),
        Duration::from_secs(10),
        None,
    );
    let mut times = Vec::new();
    for _ in 0..iters {
        let t = Instant::now();
        dev.shell("echo ok").await.unwrap();
        times.push(t.elapsed());
    }
    report(
        "shell `echo ok` via adb server (droidmesh's client)",
        &mut times,
    );
    let mut times = Vec::new();
    for _ in 0..iters {
        let t = Instant::now();
        let (s, a) = (serial.clone(), server);
        tokio::task::spawn_blocking(move || {
            let mut d = adb_client::server_device::ADBServerDevice::new(s, Some(a));
            let mut out = Vec::new();
            adb_client::ADBDeviceExt::shell_command(&mut d, &"echo ok", Some(&mut out), None)
                .unwrap();
        })
        .await
        .unwrap();
        times.push(t.elapsed());
    }
    report(
        "shell `echo ok` via adb server (adb_client, for comparison)",
        &mut times,
    );
    let mut times = Vec::new();
    for _ in 0..iters {
        let t = Instant::now();
        dev.shell("uiautomator dump /dev/tty").await.unwrap();
        times.push(t.elapsed());
    }
    report(
        "shell `uiautomator dump` via adb server (droidmesh's client)",
        &mut times,
    );

    let req = GetStateRequest {
        serial: serial.clone(),
        include_screenshot: false,
        screenshot_max_side: 0,
    };
    let mut times = Vec::new();
    let mut elements = 0;
    for _ in 0..iters {
        let t = Instant::now();
        elements = client
            .get_state(req.clone())
            .await
            .unwrap()
            .into_inner()
            .elements
            .len();
        times.push(t.elapsed());
    }
    report(
        &format!("GetState, no screenshot ({elements} elements)"),
        &mut times,
    );

    let mut times = Vec::new();
    for _ in 0..iters.min(50) {
        let t = Instant::now();
        client
            .get_state(GetStateRequest {
                include_screenshot: true,
                ..req.clone()
            })
            .await
            .unwrap();
        times.push(t.elapsed());
    }
    report("GetState with screenshot (max side 1024)", &mut times);

    let lease = client
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.clone(),
            holder: "bench".into(),
            ttl_ms: 600_000,
        })
        .await
        .unwrap()
        .into_inner();
    let lease = Some(LeaseRef {
        serial: serial.clone(),
        lease_id: lease.lease_id,
    });
    let mut times = Vec::new();
    for _ in 0..iters {
        let t = Instant::now();
        client
            .tap(TapRequest {
                lease: lease.clone(),
                // The launcher's status bar area: taps there change nothing.
                target: Some(tap_request::Target::Point(Point { x: 5, y: 5 })),
            })
            .await
            .unwrap();
        times.push(t.elapsed());
    }
    report("Tap by point (gRPC -> device -> ActionResult)", &mut times);
    fleet.shutdown().await;
}
