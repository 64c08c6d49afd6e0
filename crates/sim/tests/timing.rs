//! Time on a simulated phone: in real time a launch shows the starting window first, a screen
//! opened from a row slides in, a switch lands late and a network-backed screen spins, each
//! for the app's configured time, and the dump and `dumpsys window` show the intermediate
//! state meanwhile. Off real time, every change is instant.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use droidmesh_sim::apps::AppSet;
use droidmesh_sim::device::Device;
use droidmesh_sim::shell::run;

fn device(realtime: bool) -> Mutex<Device> {
    let mut dev = Device::new(Arc::new(AppSet::default_set().unwrap()), "sim");
    dev.realtime = realtime;
    Mutex::new(dev)
}

fn out(dev: &Mutex<Device>, cmd: &str) -> String {
    let o = run(dev, cmd);
    assert_eq!(o.code, 0, "{cmd}: {o:?}");
    String::from_utf8(o.stdout).unwrap()
}

fn dump(dev: &Mutex<Device>) -> String {
    out(dev, "uiautomator dump /dev/tty")
}

/// The centre of the first node whose `text` is `text`.
fn centre(dump: &str, text: &str) -> (i32, i32) {
    let at = dump
        .find(&format!("text=\"{text}\""))
        .unwrap_or_else(|| panic!("no '{text}' in {dump}"));
    let b = &dump[at..];
    let b = &b[b.find("bounds=\"[").unwrap() + 9..];
    let b = &b[..b.find('"').unwrap()];
    let n: Vec<i32> = b
        .split([',', '[', ']'])
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    ((n[0] + n[2]) / 2, (n[1] + n[3]) / 2)
}

/// Polls until `done` holds (deadline 5 s); the time it took.
fn until(dev: &Mutex<Device>, cmd: &str, done: impl Fn(&str) -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if done(&out(dev, cmd)) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{cmd} never settled"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn in_real_time_screens_pass_through_their_intermediate_states() {
    let dev = device(true);
    let started = Instant::now();
    out(&dev, "monkey -p com.android.settings 1");
    let first = dump(&dev);
    let window = out(&dev, "dumpsys window");
    if started.elapsed() < Duration::from_millis(500) {
        assert!(first.contains("content-desc=\"Settings\""), "{first}");
        assert!(
            !first.contains("Wi-Fi"),
            "the starting window shows no widgets: {first}"
        );
        assert!(
            window.contains("Splash Screen com.android.settings"),
            "{window}"
        );
        assert!(
            window.contains("mAppTransitionState=APP_STATE_RUNNING"),
            "{window}"
        );
    }
    let waited = until(&dev, "uiautomator dump /dev/tty", |d| d.contains("Wi-Fi"));
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "the launch took {waited:?}"
    );
    assert!(out(&dev, "dumpsys window").contains("mAppTransitionState=APP_STATE_IDLE"));

    // A switch lands 150 ms after the tap.
    let (x, y) = centre(&dump(&dev), "Wi-Fi");
    let tapped = Instant::now();
    out(&dev, &format!("input tap {x} {y}"));
    let early = out(&dev, "settings get global wifi_on");
    let late = tapped.elapsed() >= Duration::from_millis(150);
    assert!(late || early.trim() == "0", "flipped at once: {early}");
    until(&dev, "settings get global wifi_on", |s| s.trim() == "1");
    assert!(tapped.elapsed() >= Duration::from_millis(150));

    // A row opens a screen that slides in from the right for 300 ms.
    let (x, y) = centre(&dump(&dev), "Network &amp; internet");
    let tapped = Instant::now();
    out(&dev, &format!("input tap {x} {y}"));
    let sliding = dump(&dev);
    let moving = tapped.elapsed() < Duration::from_millis(200);
    let window = out(&dev, "dumpsys window");
    until(&dev, "dumpsys window", |w| w.contains("APP_STATE_IDLE"));
    let settled = centre(&dump(&dev), "Hotspot &amp; tethering").0;
    if moving {
        assert!(
            centre(&sliding, "Hotspot &amp; tethering").0 > settled + 20,
            "the screen had not moved in: {sliding}"
        );
        assert!(window.contains("APP_STATE_RUNNING"), "{window}");
    }
    assert!(tapped.elapsed() >= Duration::from_millis(300));
}

#[test]
fn a_network_backed_screen_spins_before_its_content() {
    let dev = device(true);
    out(
        &dev,
        "am start -n com.android.messaging/.ui.conversationlist.ConversationListActivity",
    );
    until(&dev, "uiautomator dump /dev/tty", |d| {
        d.contains("Grace Hopper")
    });
    let (x, y) = centre(&dump(&dev), "Grace Hopper");
    let tapped = Instant::now();
    out(&dev, &format!("input tap {x} {y}"));
    until(&dev, "uiautomator dump /dev/tty", |d| {
        d.contains("android.widget.ProgressBar") && !d.contains("Did the build pass?")
    });
    until(&dev, "uiautomator dump /dev/tty", |d| {
        d.contains("Did the build pass?") && !d.contains("ProgressBar")
    });
    assert!(
        tapped.elapsed() >= Duration::from_millis(700),
        "slide 300 + load 400"
    );
}

#[test]
fn off_real_time_every_change_is_instant() {
    let dev = device(false);
    out(&dev, "monkey -p com.android.settings 1");
    let d = dump(&dev);
    assert!(d.contains("Wi-Fi"), "{d}");
    let (x, y) = centre(&d, "Wi-Fi");
    out(&dev, &format!("input tap {x} {y}"));
    assert_eq!(out(&dev, "settings get global wifi_on").trim(), "1");
    assert!(out(&dev, "dumpsys window").contains("APP_STATE_IDLE"));
}

#[test]
fn a_dump_costs_what_it_is_told_to() {
    let dev = device(true);
    dev.lock().unwrap().dump_cost = Duration::from_millis(120);
    let t = Instant::now();
    dump(&dev);
    assert!(t.elapsed() >= Duration::from_millis(120));
}
