//! Settling on a phone that takes its time (the simulator in real time: launches 600 ms,
//! screens sliding in 300 ms, switches landing 150 ms late): with settling on, each action's
//! next state is the settled screen and the wait is reported; with it off, the same reads see
//! the screen mid-change, which shows the test can fail.
use droidmesh_device::DeviceConfig;
use droidmesh_proto::v1::{Point, UiState};
use serde_json::Value;

use super::common::*;

async fn realtime_phone() -> droidmesh_sim::SimFleet {
    droidmesh_sim::start(droidmesh_sim::SimOptions {
        base_port: 0,
        realtime: true,
        dump_cost: Some(std::time::Duration::ZERO),
        ..droidmesh_sim::SimOptions::default()
    })
    .await
    .unwrap()
}

fn centre(state: &UiState, pred: impl Fn(&droidmesh_proto::v1::UiElement) -> bool) -> Point {
    let b = find(state, pred)
        .unwrap_or_else(|| panic!("not on screen: {:?}", texts(state)))
        .bounds
        .unwrap();
    Point {
        x: (b.left + b.right) / 2,
        y: (b.top + b.bottom) / 2,
    }
}

fn settle_of(data: Option<&prost_types::Struct>) -> Value {
    data.map(droidmesh_proto::struct_to_json)
        .and_then(|d| d.get("settle").cloned())
        .unwrap_or(Value::Null)
}

fn wifi_checked(state: &UiState) -> bool {
    find(state, |e| e.class_name == "android.widget.Switch")
        .expect("a switch")
        .checked
}

/// Reads until `done` holds (within 5 s): for the run with settling off, to start each
/// action from a still screen.
async fn until(client: &mut Client, serial: &str, done: impl Fn(&UiState) -> bool) -> UiState {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let s = state(client, serial).await;
        if done(&s) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the screen never settled"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// What the state right after each action showed: (launched app's widgets visible, switch
/// flipped, contact detail in place), and each action's settle report.
async fn run(settle_max_ms: u64) -> ([bool; 3], Vec<Value>) {
    let fleet = realtime_phone().await;
    let serial = fleet.devices()[0].addr.to_string();
    let mut client = serve(DeviceConfig {
        settle_max_ms,
        ..direct_config(&serial)
    })
    .await;
    let lease = acquire(&mut client, &serial, "settle").await;
    let mut reports = Vec::new();
    let mut seen = [false; 3];

    // Launch Settings: the starting window shows for 600 ms.
    let r = start_app(&mut client, &lease, "com.android.settings").await;
    reports.push(settle_of(r.data.as_ref()));
    let after = state(&mut client, &serial).await;
    seen[0] = texts(&after).iter().any(|t| t == "Wi-Fi");
    let now = until(&mut client, &serial, |s| {
        texts(s).iter().any(|t| t == "Wi-Fi")
    })
    .await;

    // Flip Wi-Fi (off at start): the setting lands 150 ms after the tap.
    assert!(!wifi_checked(&now));
    let wifi = centre(&now, |e| e.resource_id == "com.android.settings:id/wifi");
    let r = tap_at(&mut client, &lease, wifi).await;
    reports.push(settle_of(r.data.as_ref()));
    seen[1] = wifi_checked(&state(&mut client, &serial).await);
    until(&mut client, &serial, wifi_checked).await;

    // Open a contact from the list: the detail screen slides in for 300 ms.
    start_app(&mut client, &lease, "com.android.contacts").await;
    let list = until(&mut client, &serial, |s| {
        texts(s).iter().any(|t| t == "Ada Lovelace")
    })
    .await;
    let ada = centre(&list, |e| e.text == "Ada Lovelace");
    let r = tap_at(&mut client, &lease, ada).await;
    reports.push(settle_of(r.data.as_ref()));
    let phone = |s: &UiState| {
        find(s, |e| e.text == "+44 20 7946 0101").and_then(|e| e.bounds.map(|b| b.left))
    };
    let after = state(&mut client, &serial).await;
    // Settled, the number's row sits at the screen's left padding (48 px).
    seen[2] = phone(&after) == Some(48);
    (seen, reports)
}

#[tokio::test(flavor = "multi_thread")]
async fn with_settling_each_action_is_followed_by_the_settled_screen() {
    let (seen, reports) = run(DeviceConfig::default().settle_max_ms).await;
    assert_eq!(
        seen,
        [true, true, true],
        "launched app shown, switch flipped, detail in place; reports {reports:?}"
    );
    let waited: Vec<u64> = reports
        .iter()
        .map(|r| {
            assert_eq!(r["settled"], true, "{r}");
            r["waited_ms"].as_u64().unwrap()
        })
        .collect();
    assert!(
        waited[0] >= 600,
        "a launch waits out its 600 ms: {waited:?}"
    );
    assert!(
        waited[1] >= 150,
        "a switch waits out its 150 ms: {waited:?}"
    );
    assert!(waited[2] >= 300, "a slide waits out its 300 ms: {waited:?}");
    assert!(
        waited.iter().all(|w| *w < 1_500),
        "no wait is much longer than its transition: {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_settling_the_next_state_is_caught_mid_change() {
    let (seen, reports) = run(0).await;
    assert_eq!(
        seen,
        [false, false, false],
        "every read right after an action sees the screen mid-change"
    );
    assert!(reports.iter().all(Value::is_null), "{reports:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_that_gives_up_says_so_and_why() {
    let fleet = realtime_phone().await;
    let serial = fleet.devices()[0].addr.to_string();
    let mut client = serve(DeviceConfig {
        settle_max_ms: 200,
        settle_quiet_ms: 100,
        ..direct_config(&serial)
    })
    .await;
    let lease = acquire(&mut client, &serial, "settle").await;
    // The starting window shows for 600 ms: longer than the 200 ms the wait may take.
    let r = start_app(&mut client, &lease, "com.android.settings").await;
    let settle = settle_of(r.data.as_ref());
    assert_eq!(settle["settled"], false, "{settle}");
    let reason = settle["reason"].as_str().unwrap();
    assert!(
        reason.contains("gave up after 200 ms") && reason.contains("starting window"),
        "{reason}"
    );
    let waited = settle["waited_ms"].as_u64().unwrap();
    assert!((200..600).contains(&waited), "{settle}");
    assert!(
        r.action_taken.contains("the screen had not settled"),
        "the agent is told: {}",
        r.action_taken
    );
}
