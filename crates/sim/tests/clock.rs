//! The Clock app's timer and stopwatch: set, started, paused, resumed and reset on the app's
//! screens with taps and typing, and read back as a check reads them, through
//! content://com.droidmesh.clock/timer and /stopwatch; each screen shows only the buttons its
//! state allows; the alarms still open as before; a reset starts both over.
use std::sync::Mutex;

use droidmesh_sim::device::Device;

use crate::screen::{phone, sh, shows, tap, texts};

const TIMER: &str = "content query --uri content://com.droidmesh.clock/timer";
const STOPWATCH: &str = "content query --uri content://com.droidmesh.clock/stopwatch";
const ALARMS: &str =
    "content query --uri content://com.droidmesh.clock/alarms --projection time:enabled";
const TIMER_AT_START: &str =
    "Row: 0 _id=1, hours=0, minutes=0, seconds=0, state=unset, started=0, paused=0\n";
const STOPWATCH_AT_START: &str = "Row: 0 _id=1, state=stopped, started=0, paused=0\n";

/// Taps the field `id`, empties it with DEL presses and types `text`.
fn retype(dev: &Mutex<Device>, id: &str, text: &str) {
    tap(dev, id);
    sh(dev, &format!("input keyevent {}", ["67"; 6].join(" ")));
    sh(dev, &format!("input text '{text}'"));
}

/// The phone's clock in ms.
fn now_ms(dev: &Mutex<Device>) -> i64 {
    dev.lock().unwrap().clock.now_ms()
}

/// The value of `column` in a one-row answer.
fn column(rows: &str, column: &str) -> String {
    rows.trim_end()
        .split(", ")
        .find_map(|kv| kv.rsplit(' ').next()?.strip_prefix(&format!("{column}=")))
        .unwrap_or_else(|| panic!("no {column} in {rows}"))
        .to_owned()
}

#[test]
fn a_timer_is_set_started_paused_and_reset_on_its_screen_as_its_provider_reads() {
    let dev = phone();
    assert_eq!(sh(&dev, TIMER), TIMER_AT_START);
    sh(&dev, "monkey -p com.droidmesh.clock 1");
    assert!(
        shows(&dev, "Timer") && shows(&dev, "Stopwatch"),
        "{:?}",
        texts(&dev)
    );
    tap(&dev, "Timer");
    assert!(!shows(&dev, "Pause"), "{:?}", texts(&dev));
    retype(&dev, "hours", "1");
    retype(&dev, "minutes", "5");
    retype(&dev, "seconds", "30");
    tap(&dev, "Set");
    assert_eq!(
        sh(&dev, TIMER),
        "Row: 0 _id=1, hours=1, minutes=5, seconds=30, state=set, started=0, paused=0\n",
        "set, not started"
    );

    let before = now_ms(&dev);
    tap(&dev, "Start");
    let after = now_ms(&dev);
    let running = sh(&dev, TIMER);
    assert_eq!(column(&running, "state"), "running", "{running}");
    let started: i64 = column(&running, "started").parse().unwrap();
    assert!((before..=after).contains(&started), "{running}");
    // A running timer offers pause, not start or set, and no fields to change.
    assert!(shows(&dev, "Pause"), "{:?}", texts(&dev));
    for gone in ["Start", "Set", "Resume"] {
        assert!(!shows(&dev, gone), "{gone}: {:?}", texts(&dev));
    }
    assert!(!texts(&dev).iter().any(|t| t == "Hours"));

    tap(&dev, "Pause");
    let paused = sh(&dev, TIMER);
    assert_eq!(column(&paused, "state"), "paused", "{paused}");
    assert!(column(&paused, "paused").parse::<i64>().unwrap() >= started);
    tap(&dev, "Resume");
    assert_eq!(column(&sh(&dev, TIMER), "state"), "running");
    tap(&dev, "Reset");
    assert_eq!(
        sh(&dev, TIMER),
        "Row: 0 _id=1, hours=1, minutes=5, seconds=30, state=set, started=0, paused=0\n",
        "reset keeps the length and stops it"
    );
    // The list on the main screen says what the timer holds (the first back closes the
    // keyboard the fields opened).
    sh(&dev, "input keyevent KEYCODE_BACK KEYCODE_BACK");
    assert!(shows(&dev, "1 h 5 min 30 s, set"), "{:?}", texts(&dev));
    tap(&dev, "Timer");
    tap(&dev, "Delete");
    assert_eq!(sh(&dev, TIMER), TIMER_AT_START);
}

#[test]
fn a_timer_with_an_empty_field_is_refused_on_screen() {
    let dev = phone();
    sh(&dev, "monkey -p com.droidmesh.clock 1");
    tap(&dev, "Timer");
    tap(&dev, "minutes");
    sh(&dev, "input keyevent 67");
    tap(&dev, "Start");
    assert!(
        shows(&dev, "Could not save: Minutes is empty"),
        "{:?}",
        texts(&dev)
    );
    assert_eq!(sh(&dev, TIMER), TIMER_AT_START);
}

#[test]
fn the_stopwatch_starts_pauses_resumes_and_resets_keeping_when_it_started() {
    let dev = phone();
    assert_eq!(sh(&dev, STOPWATCH), STOPWATCH_AT_START);
    sh(&dev, "monkey -p com.droidmesh.clock 1");
    tap(&dev, "Stopwatch");
    for gone in ["Pause", "Resume", "Reset"] {
        assert!(!shows(&dev, gone), "{gone}: {:?}", texts(&dev));
    }
    let before = now_ms(&dev);
    tap(&dev, "Start");
    let after = now_ms(&dev);
    let running = sh(&dev, STOPWATCH);
    assert_eq!(column(&running, "state"), "running", "{running}");
    let started: i64 = column(&running, "started").parse().unwrap();
    assert!((before..=after).contains(&started), "{running}");
    assert!(!shows(&dev, "Start"), "{:?}", texts(&dev));

    tap(&dev, "Pause");
    let paused = sh(&dev, STOPWATCH);
    assert_eq!(column(&paused, "state"), "paused");
    assert!(column(&paused, "paused").parse::<i64>().unwrap() >= started);
    tap(&dev, "Resume");
    let resumed = sh(&dev, STOPWATCH);
    assert_eq!(column(&resumed, "state"), "running");
    assert_eq!(
        column(&resumed, "started"),
        started.to_string(),
        "{resumed}"
    );
    tap(&dev, "Pause");
    tap(&dev, "Reset");
    assert_eq!(sh(&dev, STOPWATCH), STOPWATCH_AT_START);
}

#[test]
fn the_alarms_open_as_before_next_to_the_timer_and_stopwatch() {
    let dev = phone();
    sh(&dev, "monkey -p com.droidmesh.clock 1");
    tap(&dev, "21:00");
    assert!(
        shows(&dev, "Pills"),
        "the alarm's screen: {:?}",
        texts(&dev)
    );
    tap(&dev, "Turn on");
    assert!(
        sh(&dev, ALARMS).contains("time=21:00, enabled=1"),
        "{}",
        sh(&dev, ALARMS)
    );
    assert_eq!(sh(&dev, TIMER), TIMER_AT_START);
    assert_eq!(sh(&dev, STOPWATCH), STOPWATCH_AT_START);
}

#[test]
fn a_reset_starts_the_timer_and_the_stopwatch_over() {
    let dev = phone();
    sh(&dev, "monkey -p com.droidmesh.clock 1");
    tap(&dev, "Stopwatch");
    tap(&dev, "Start");
    sh(&dev, "input keyevent KEYCODE_BACK");
    tap(&dev, "Timer");
    tap(&dev, "Start");
    assert_ne!(sh(&dev, TIMER), TIMER_AT_START);
    assert_ne!(sh(&dev, STOPWATCH), STOPWATCH_AT_START);
    dev.lock().unwrap().reset();
    assert_eq!(sh(&dev, TIMER), TIMER_AT_START);
    assert_eq!(sh(&dev, STOPWATCH), STOPWATCH_AT_START);
}
