//! The companion accessibility service: with it, `content query` of its authority answers the
//! screen's tree as one `Row: 0 result=` line at once, however much `uiautomator dump` costs;
//! without it the provider is missing, as on a phone that does not have it.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use droidmesh_sim::apps::AppSet;
use droidmesh_sim::device::Device;
use droidmesh_sim::shell::run;

fn texts(node: &serde_json::Value, out: &mut Vec<String>) {
    if let Some(t) = node["text"].as_str().filter(|t| !t.is_empty()) {
        out.push(t.to_owned());
    }
    for c in node["children"].as_array().into_iter().flatten() {
        texts(c, out);
    }
}

#[test]
fn the_companion_answers_the_tree_at_once_and_is_missing_without_it() {
    let mut dev = Device::new(Arc::new(AppSet::default_set().unwrap()), "sim");
    dev.portal = true;
    dev.dump_cost = Duration::from_millis(300);
    let dev = Mutex::new(dev);
    run(&dev, "monkey -p com.android.settings 1");
    let t = Instant::now();
    let out = run(
        &dev,
        "content query --uri content://com.mobilerun.portal/state_full",
    );
    assert!(
        t.elapsed() < Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    let line = String::from_utf8(out.stdout).unwrap();
    assert_eq!(line.lines().count(), 1, "{line}");
    let json = line.trim().strip_prefix("Row: 0 result=").expect(&line);
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["status"], "success");
    let state = &v["result"];
    assert_eq!(state["phone_state"]["packageName"], "com.android.settings");
    assert_eq!(state["phone_state"]["currentApp"], "Settings");
    let mut seen = Vec::new();
    texts(&state["a11y_tree"], &mut seen);
    assert!(seen.iter().any(|t| t == "Wi-Fi"), "{seen:?}");
    let ping = String::from_utf8(
        run(
            &dev,
            "content query --uri content://com.mobilerun.portal/ping",
        )
        .stdout,
    )
    .unwrap();
    assert!(ping.contains("\"result\":\"pong\""), "{ping}");

    dev.lock().unwrap().portal = false;
    let out = run(
        &dev,
        "content query --uri content://com.mobilerun.portal/ping",
    );
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Error while accessing provider:com.mobilerun.portal")
    );
}
