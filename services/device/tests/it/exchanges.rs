//! How much ADB traffic a CodeAct step costs (a GetState, then one tap that changes the
//! screen): counted at the simulator (streams opened on the device) on both routes, and,
//! through the adb server, at a counting proxy in front of it (connections the device service
//! makes).
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use droidmesh_device::DeviceConfig;
use droidmesh_proto::v1::Point;
use droidmesh_sim::testkit::{AdbServer, require_adb};
use tokio::io::AsyncWriteExt;

use super::common::*;
use super::sims::start_fleet;

/// The device streams one step opens: one `input tap`, then, settling, two observations (the
/// screen changed at once and then held still); the step's GetState is given the second.
const STREAMS_PER_STEP: u64 = 3;
/// The same with settling off: one observation command, one `input tap`.
const STREAMS_PER_STEP_UNSETTLED: u64 = 2;
/// Connections to the adb server one step opens: one per command (the device's features are
/// asked once, then kept).
const SERVER_CONNECTIONS_PER_STEP: u64 = 3;
const STEPS: u64 = 5;

/// A TCP proxy to the adb server that counts the connections made through it.
async fn counting_proxy(server_port: u16) -> (u16, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicU64::new(0));
    let counted = count.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let Ok(mut server) =
                    tokio::net::TcpStream::connect(("127.0.0.1", server_port)).await
                else {
                    return;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                let _ = client.shutdown().await;
            });
        }
    });
    (port, count)
}

/// Reads the screen, then taps what changes it at once: the Settings icon on the launcher,
/// the back button in Settings.
async fn step(client: &mut Client, serial: &str, lease: &droidmesh_proto::v1::Lease) {
    let seen = state(client, serial).await;
    let package = seen
        .phone
        .as_ref()
        .map(|p| p.package.clone())
        .unwrap_or_default();
    let point = if package.contains("launcher") {
        let icon = find(&seen, |e| e.text == "Settings").expect("the launcher shows Settings");
        let b = icon.bounds.unwrap();
        Point {
            x: (b.left + b.right) / 2,
            y: (b.top + b.bottom) / 2,
        }
    } else {
        // The navigation bar's back button.
        Point { x: 100, y: 2330 }
    };
    let done = tap_at(client, lease, point).await;
    let data = droidmesh_proto::struct_to_json(done.data.as_ref().unwrap());
    if let Some(settle) = data.get("settle") {
        assert_eq!(settle["settled"], true, "the tap did not settle: {settle}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_is_one_observation_and_one_action_at_the_device_on_both_routes() {
    if !require_adb("a_step_is_one_observation_and_one_action") {
        return;
    }
    let fleet = start_fleet(2).await;
    let (direct_dev, server_dev) = (&fleet.devices()[0], &fleet.devices()[1]);

    // Straight to the device's port.
    let serial = direct_dev.addr.to_string();
    let mut direct = serve(direct_config(&serial)).await;
    let lease = acquire(&mut direct, &serial, "counter").await;
    // The first read also learns the screen's size, once.
    step(&mut direct, &serial, &lease).await;
    let (before, _) = direct_dev.streams_opened();
    for _ in 0..STEPS {
        step(&mut direct, &serial, &lease).await;
    }
    let (after, services) = direct_dev.streams_opened();
    assert_eq!(
        after - before,
        STREAMS_PER_STEP * STEPS,
        "direct: streams per {STEPS} steps; the last services: {services:?}"
    );

    // Without settling: one observation and the action.
    let mut unsettled = serve(DeviceConfig {
        settle_max_ms: 0,
        ..direct_config(&serial)
    })
    .await;
    drop(direct);
    let lease = acquire(&mut unsettled, &serial, "counter-unsettled").await;
    step(&mut unsettled, &serial, &lease).await;
    let (before, _) = direct_dev.streams_opened();
    for _ in 0..STEPS {
        step(&mut unsettled, &serial, &lease).await;
    }
    let (after, services) = direct_dev.streams_opened();
    assert_eq!(
        after - before,
        STREAMS_PER_STEP_UNSETTLED * STEPS,
        "direct, settling off: streams per {STEPS} steps; the last services: {services:?}"
    );

    // Through Debian's adb server, behind a proxy that counts connections.
    let adb = AdbServer::start().unwrap();
    let serial = adb.connect(server_dev.addr).unwrap();
    let (proxy, connections) = counting_proxy(adb.port).await;
    let mut via = serve(DeviceConfig {
        adb_server: format!("127.0.0.1:{proxy}"),
        ..DeviceConfig::default()
    })
    .await;
    let lease = acquire(&mut via, &serial, "counter").await;
    step(&mut via, &serial, &lease).await;
    let (before, _) = server_dev.streams_opened();
    let connected = connections.load(Ordering::SeqCst);
    for _ in 0..STEPS {
        step(&mut via, &serial, &lease).await;
    }
    let (after, services) = server_dev.streams_opened();
    assert_eq!(
        after - before,
        STREAMS_PER_STEP * STEPS,
        "adb server: streams per {STEPS} steps; the last services: {services:?}"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst) - connected,
        SERVER_CONNECTIONS_PER_STEP * STEPS,
        "adb server: connections per {STEPS} steps"
    );
    drop(adb);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_listed_devices_first_read_is_one_command() {
    let fleet = start_fleet(2).await;
    let (listed, unlisted) = (&fleet.devices()[0], &fleet.devices()[1]);
    let serials = [listed.addr.to_string(), unlisted.addr.to_string()];
    let mut client = serve(direct_config(&serials[0])).await;
    // Listing learns what does not change (model, product, screen size, UI source) ...
    let devices = devices(&mut client).await;
    assert_eq!(devices.len(), 1, "{devices:?}");
    let (learned, services) = listed.streams_opened();
    for asked in [
        "getprop ro.product.model",
        "wm size",
        "wm density",
        "content query",
    ] {
        assert!(
            services.iter().any(|s| s.contains(asked)),
            "listing did not ask `{asked}`: {services:?}"
        );
    }
    // ... so a task's first read is the observation alone, and the screen size is the one
    // the device reports.
    let lease = acquire(&mut client, &serials[0], "first-read").await;
    let seen = state(&mut client, &serials[0]).await;
    let (after, services) = listed.streams_opened();
    assert_eq!(
        after - learned,
        1,
        "the first read after listing; the last services: {services:?}"
    );
    let screen = seen.screen.unwrap();
    assert_eq!((screen.width, screen.height), (1080, 2400), "{screen:?}");
    drop(lease);

    // A device attached after the listing learns the same facts at its first read.
    let mut direct = serve(direct_config(&serials[1])).await;
    let lease = acquire(&mut direct, &serials[1], "first-read-unlisted").await;
    let (before, _) = unlisted.streams_opened();
    let seen = state(&mut direct, &serials[1]).await;
    let (after, services) = unlisted.streams_opened();
    assert!(
        after - before > 1,
        "an unlisted device's first read asks for the screen size too: {services:?}"
    );
    assert_eq!(seen.screen.unwrap().width, 1080);
    drop(lease);
    fleet.shutdown().await;
}
