//! The figure for typing text of any language (`cargo bench -p droidmesh-device --bench
//! typing`): TypeText of 200 CJK characters through the companion app's keyboard against 200
//! ASCII characters through `input text`, on the simulator reached straight over TCP, each call
//! clearing the note field, typing, restoring the keyboard (companion) and reading the field
//! back; once without waiting for the UI to settle (the typing itself) and once with the
//! default settling (what a caller sees). Printed: time per call as percentiles, and the
//! device commands one call sends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::time::{Duration, Instant};

use droidmesh_device::{DeviceConfig, device_service};
use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, GetStateRequest, LeaseRef, StartAppRequest, TypeTextRequest,
    start_app_request,
};
use droidmesh_sim::{SimFleet, SimOptions};

type Client = DeviceServiceClient<tonic::transport::Channel>;

async fn serve(cfg: DeviceConfig) -> Client {
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

/// A phone (with the companion app or without any keyboard app) in the notes app, a client
/// holding its lease, and the index of the note field.
async fn phone(portal: bool, settle: bool) -> (SimFleet, Client, LeaseRef, u32) {
    let fleet = droidmesh_sim::start(SimOptions {
        base_port: 0,
        portal,
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let serial = fleet.addrs()[0].to_string();
    let mut client = serve(DeviceConfig {
        adb_server: String::new(),
        direct_devices: vec![serial.clone()],
        settle_max_ms: if settle {
            DeviceConfig::default().settle_max_ms
        } else {
            0
        },
        ..DeviceConfig::default()
    })
    .await;
    let lease = client
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.clone(),
            holder: "bench".into(),
            ttl_ms: 600_000,
        })
        .await
        .unwrap()
        .into_inner();
    let lease = LeaseRef {
        serial: serial.clone(),
        lease_id: lease.lease_id,
    };
    client
        .start_app(StartAppRequest {
            lease: Some(lease.clone()),
            app: Some(start_app_request::App::Package(
                "com.droidmesh.notes".into(),
            )),
            activity: String::new(),
        })
        .await
        .unwrap();
    let st = client
        .get_state(GetStateRequest {
            serial,
            ..GetStateRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    let index = st
        .elements
        .iter()
        .find(|e| e.resource_id.ends_with("note_input"))
        .unwrap()
        .index;
    (fleet, client, lease, index)
}

/// One TypeText: its time and the device commands it sent.
async fn type_once(
    fleet: &SimFleet,
    client: &mut Client,
    lease: &LeaseRef,
    index: u32,
    text: &str,
) -> (Duration, u64) {
    let (before, _) = fleet.devices()[0].streams_opened();
    let t = Instant::now();
    let r = client
        .type_text(TypeTextRequest {
            lease: Some(lease.clone()),
            text: text.into(),
            index: Some(index),
            clear: true,
            sensitive: false,
        })
        .await
        .unwrap()
        .into_inner();
    let took = t.elapsed();
    assert!(r.success, "{r:?}");
    let data = droidmesh_proto::struct_to_json(r.data.as_ref().unwrap());
    assert_eq!(data["field_matches"], true, "{data}");
    let (after, _) = fleet.devices()[0].streams_opened();
    (took, after - before)
}

fn report(name: &str, times: &mut [Duration], commands: u64) {
    times.sort();
    let pct = |p: f64| times[((times.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{name:<44} n={:<4} min={:>9.3?} p50={:>9.3?} p90={:>9.3?} p99={:>9.3?} max={:>9.3?} commands/call={commands}",
        times.len(),
        times[0],
        pct(0.5),
        pct(0.9),
        pct(0.99),
        times[times.len() - 1]
    );
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this too: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let iters = if quick { 3 } else { 200 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cjk: String = "中文输入测试日本語한국어"
            .chars()
            .cycle()
            .take(200)
            .collect();
        let ascii: String = "The quick brown fox jumps over the lazy dog. "
            .chars()
            .cycle()
            .take(200)
            .collect();
        for settle in [false, true] {
            let (f1, mut c1, l1, i1) = phone(true, settle).await;
            let (f2, mut c2, l2, i2) = phone(false, settle).await;
            // Warm up: connections, the keyboard lookup, the screen size.
            type_once(&f1, &mut c1, &l1, i1, &cjk).await;
            type_once(&f2, &mut c2, &l2, i2, &ascii).await;
            let (mut t1, mut t2) = (Vec::new(), Vec::new());
            let (mut n1, mut n2) = (0, 0);
            // Interleaved, so both see the same machine load.
            for _ in 0..iters {
                let (t, n) = type_once(&f1, &mut c1, &l1, i1, &cjk).await;
                t1.push(t);
                n1 = n;
                let (t, n) = type_once(&f2, &mut c2, &l2, i2, &ascii).await;
                t2.push(t);
                n2 = n;
            }
            let how = if settle { "settled" } else { "no settle" };
            report(
                &format!("200 CJK chars, companion keyboard, {how}"),
                &mut t1,
                n1,
            );
            report(&format!("200 ASCII chars, input text, {how}"), &mut t2, n2);
        }
    });
}
