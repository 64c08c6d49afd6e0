//! Benchmarks of the device service, printed as percentiles (`cargo bench -p droidmesh-device`):
//! parsing a 1,000-node UI dump, and — when `adb` is installed — GetState without screenshot
//! and Tap round trips over gRPC → service → adb server → simulator, plus a breakdown of where
//! one adb call spends its time. `DEVICE_BENCH=settle` times how long actions wait for the UI
//! on a phone with realistic transitions: adaptive settling against a fixed 1.3 s wait.
//! `DEVICE_BENCH=portal` times a step (GetState, then a tap that flips a switch, settled) on a
//! phone whose `uiautomator dump` costs 1 s, read through uiautomator and through the
//! companion service.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use droidmesh_device::{DeviceConfig, device_service, ui_dump::parse_ui_dump};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, GetStateRequest, LeaseRef, Point, TapRequest, tap_request,
};

/// The device service for `cfg` on a loopback port in this process, and a client of it.
async fn serve(cfg: DeviceConfig) -> DeviceServiceClient<tonic::transport::Channel> {
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
    DeviceServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

/// A ten-minute lease of `serial`, as actions take it.
async fn lease(
    client: &mut DeviceServiceClient<tonic::transport::Channel>,
    serial: &str,
) -> Option<LeaseRef> {
    let lease = client
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.to_owned(),
            holder: "bench".into(),
            ttl_ms: 600_000,
        })
        .await
        .unwrap()
        .into_inner();
    Some(LeaseRef {
        serial: serial.to_owned(),
        lease_id: lease.lease_id,
    })
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this too: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let iters = if quick { 5 } else { 300 };
    bench_xml(if quick { 5 } else { 500 });
    let rt = tokio::runtime::Runtime::new().unwrap();
    if std::env::var("DEVICE_BENCH").as_deref() == Ok("settle") {
        rt.block_on(bench_settle());
        return;
    }
    if std::env::var("DEVICE_BENCH").as_deref() == Ok("portal") {
        rt.block_on(bench_portal());
        return;
    }
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
    // The round trips alone: a tap that changes nothing would otherwise wait out the quiet
    // window of settling (see `bench_settle`).
    let cfg = DeviceConfig {
        adb_server: format!("127.0.0.1:{}", adb.port),
        settle_max_ms: 0,
        ..DeviceConfig::default()
    };
    let mut client = serve(cfg).await;

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
        masks: Vec::new(),
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

    let lease = lease(&mut client, &serial).await;
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

/// The ten actions of the settle benchmark and what each must end on.
enum Act {
    Start(&'static str),
    Tap(&'static str),
    Back,
}

/// `DEVICE_BENCH=settle`: a ten-action script on the simulator in real time (launch 600 ms,
/// screens sliding in 300 ms, switches 150 ms; dumps free), each action followed by a
/// GetState: adaptive settling (the default settings) against no settling and a fixed
/// 1.3 s sleep, and against not waiting at all. Counts the states read mid-change (not what
/// the screen shows 1.3 s later).
async fn bench_settle() {
    use droidmesh_proto::v1::{
        Key, PressKeyRequest, StartAppRequest, press_key_request, start_app_request,
    };
    let script = [
        Act::Start("com.android.settings"),
        Act::Tap("Wi-Fi"),
        Act::Tap("Bluetooth"),
        Act::Tap("Network & internet"),
        Act::Tap("Mobile data"),
        Act::Back,
        Act::Start("com.android.contacts"),
        Act::Tap("Ada Lovelace"),
        Act::Back,
        Act::Tap("Alan Turing"),
    ];
    const FIXED: Duration = Duration::from_millis(1300);
    let mut waits: Vec<(&str, Vec<Duration>, usize)> = Vec::new();
    for (name, adaptive, sleep) in [
        ("adaptive settle", true, false),
        ("fixed 1.3 s sleep", false, true),
        ("no wait", false, false),
    ] {
        let fleet = droidmesh_sim::start(droidmesh_sim::SimOptions {
            base_port: 0,
            realtime: true,
            dump_cost: Some(Duration::ZERO),
            ..Default::default()
        })
        .await
        .unwrap();
        let serial = fleet.addrs()[0].to_string();
        let cfg = DeviceConfig {
            adb_server: String::new(),
            direct_devices: vec![serial.clone()],
            settle_max_ms: if adaptive {
                DeviceConfig::default().settle_max_ms
            } else {
                0
            },
            ..DeviceConfig::default()
        };
        let mut client = serve(cfg).await;
        let lease = lease(&mut client, &serial).await;
        let lref = lease;
        let get = |client: &mut DeviceServiceClient<tonic::transport::Channel>| {
            let serial = serial.clone();
            let mut client = client.clone();
            async move {
                client
                    .get_state(GetStateRequest {
                        serial,
                        ..Default::default()
                    })
                    .await
                    .unwrap()
                    .into_inner()
            }
        };
        let mut screen = get(&mut client).await;
        let mut waited = Vec::new();
        let mut mid_change = 0;
        for act in &script {
            let t = Instant::now();
            match act {
                Act::Start(package) => {
                    client
                        .start_app(StartAppRequest {
                            lease: lref.clone(),
                            app: Some(start_app_request::App::Package((*package).into())),
                            activity: String::new(),
                        })
                        .await
                        .unwrap();
                }
                Act::Tap(text) => {
                    let el = screen
                        .elements
                        .iter()
                        .find(|e| e.text == *text)
                        .unwrap_or_else(|| panic!("'{text}' is not on screen"));
                    let b = el.bounds.unwrap();
                    client
                        .tap(TapRequest {
                            lease: lref.clone(),
                            target: Some(tap_request::Target::Point(Point {
                                x: (b.left + b.right) / 2,
                                y: (b.top + b.bottom) / 2,
                            })),
                        })
                        .await
                        .unwrap();
                }
                Act::Back => {
                    client
                        .press_key(PressKeyRequest {
                            lease: lref.clone(),
                            key_spec: Some(press_key_request::KeySpec::Key(Key::Back as i32)),
                        })
                        .await
                        .unwrap();
                }
            }
            if sleep {
                tokio::time::sleep(FIXED).await;
            }
            // The action's own round trip is not waiting for the UI.
            waited.push(t.elapsed());
            screen = get(&mut client).await;
            // Read mid-change when it differs from the screen 1.3 s later (every transition
            // of the script is shorter).
            tokio::time::sleep(FIXED).await;
            let later = get(&mut client).await;
            let key = |s: &droidmesh_proto::v1::UiState| {
                s.elements
                    .iter()
                    .map(|e| (e.class_name.clone(), e.text.clone(), e.bounds, e.checked))
                    .collect::<Vec<_>>()
            };
            let moving = key(&screen) != key(&later);
            screen = later;
            if moving {
                mid_change += 1;
            }
        }
        waits.push((name, waited, mid_change));
        fleet.shutdown().await;
    }
    println!(
        "waiting for the UI over a 10-action script (launch 600 ms, slide 300 ms, switch 150 ms):"
    );
    for (name, w, mid) in &waits {
        let mean = w.iter().sum::<Duration>() / w.len() as u32;
        println!(
            "  {name:<18} mean {:>7.1} ms per action (action + wait), states read mid-change: {mid}; each: {:?}",
            mean.as_secs_f64() * 1e3,
            w.iter().map(|d| d.as_millis()).collect::<Vec<_>>()
        );
    }
    let mean =
        |i: usize| waits[i].1.iter().sum::<Duration>().as_secs_f64() / waits[i].1.len() as f64;
    println!("  adaptive / fixed: {:.2}", mean(0) / mean(1));
}

/// `DEVICE_BENCH=portal`: see the module comment.
async fn bench_portal() {
    const STEPS: usize = 6;
    let mut p50s = Vec::new();
    for portal in [false, true] {
        let fleet = droidmesh_sim::start(droidmesh_sim::SimOptions {
            base_port: 0,
            portal,
            dump_cost: Some(droidmesh_sim::PHONE_DUMP_COST),
            ..Default::default()
        })
        .await
        .unwrap();
        fleet.devices()[0].shell("monkey -p com.android.settings 1");
        let serial = fleet.addrs()[0].to_string();
        let mut client = serve(DeviceConfig {
            adb_server: String::new(),
            direct_devices: vec![serial.clone()],
            ..DeviceConfig::default()
        })
        .await;
        let lease = lease(&mut client, &serial).await;
        let mut times = Vec::new();
        let mut source = String::new();
        let mut settle = String::new();
        let mut reads = Vec::new();
        for _ in 0..STEPS {
            let t = Instant::now();
            let state = client
                .get_state(GetStateRequest {
                    serial: serial.clone(),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            source = state.ui_source.clone();
            reads.push(t.elapsed());
            let wifi = state
                .elements
                .iter()
                .find(|e| e.resource_id == "com.android.settings:id/wifi")
                .expect("the Wi-Fi row");
            let b = wifi.bounds.unwrap();
            let tapped = client
                .tap(TapRequest {
                    lease: lease.clone(),
                    target: Some(tap_request::Target::Point(Point {
                        x: (b.left + b.right) / 2,
                        y: (b.top + b.bottom) / 2,
                    })),
                })
                .await
                .unwrap()
                .into_inner();
            settle = droidmesh_proto::struct_to_json(tapped.data.as_ref().unwrap())["settle"]
                .to_string();
            times.push(t.elapsed());
        }
        println!("  last settle ({source}): {settle}");
        report(
            &format!("GetState of that step, source {source}"),
            &mut reads,
        );
        report(
            &format!("step (GetState + settled tap), dumps cost 1 s, source {source}"),
            &mut times,
        );
        p50s.push(times[times.len() / 2]);
        fleet.shutdown().await;
    }
    println!(
        "  companion is {:.1}x faster per step than uiautomator",
        p50s[0].as_secs_f64() / p50s[1].as_secs_f64()
    );
}
