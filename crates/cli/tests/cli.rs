//! The binary as a user meets it: a bad config is refused before anything listens, with the
//! field named; the demo runs to success on the built-in simulators and says it is a replay.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::process::Command;

fn droidmesh() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_droidmesh"));
    c.env_remove("OPENAI_API_KEY").env("RUST_LOG", "error");
    c
}

#[test]
fn a_bad_config_is_refused_naming_the_field() {
    let out = droidmesh()
        .args(["serve", "gateway"])
        .env("DROIDMESH_GATEWAY__DEFAULT_MAX_STEPS", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gateway.default_max_steps"), "{err}");
}

#[test]
fn the_demo_runs_on_simulators_and_says_it_is_a_replay() {
    let out = droidmesh()
        .args(["run", "Open Settings and turn on Wi-Fi"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Replaying a recorded session"), "{text}");
    assert!(text.contains("replayed"), "{text}");
    assert!(text.contains("SUCCEEDED after 3 steps"), "{text}");
    assert!(
        text.contains("answer: Wi-Fi is on: the switch in Settings reads ON"),
        "{text}"
    );
}
