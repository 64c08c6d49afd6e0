//! The binary as a user meets it: a bad config is refused before anything listens, with the
//! field named; the demos (direct and reasoning mode) run to success on the built-in simulators
//! and say they are replays.
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

/// Runs `droidmesh` with `args`; asserts it succeeded and returns what it printed.
fn succeeds(args: &[&str]) -> String {
    let out = droidmesh().args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn the_demo_runs_on_simulators_and_says_it_is_a_replay() {
    let text = succeeds(&["run", "Open Settings and turn on Wi-Fi"]);
    assert!(text.contains("Replaying a recorded session"), "{text}");
    assert!(text.contains("replayed"), "{text}");
    assert!(text.contains("SUCCEEDED after 3 steps"), "{text}");
    assert!(
        text.contains("answer: Wi-Fi is on: the switch in Settings reads ON"),
        "{text}"
    );
}

#[test]
fn the_reasoning_demo_plans_acts_and_says_it_is_a_replay() {
    let text = succeeds(&["run", "--reasoning", "Open Settings and turn on Wi-Fi"]);
    assert!(text.contains("in reasoning mode"), "{text}");
    // The manager plans, the executor acts on the simulator, the manager ends the task.
    assert!(
        text.contains("handoff manager -> executor: Open the Settings app"),
        "{text}"
    );
    assert!(
        text.contains("-> executor: started com.android.settings"),
        "{text}"
    );
    assert!(text.contains("-> executor: tapped element 5"), "{text}");
    assert!(text.contains("manager model recorded-demo-model"), "{text}");
    assert!(text.contains("SUCCEEDED after 2 steps"), "{text}");
    assert!(text.contains("(5 model calls"), "{text}");
    assert!(
        text.contains("answer: Wi-Fi is on: the switch in Settings reads ON."),
        "{text}"
    );
}

#[test]
fn run_with_llm_url_drives_the_simulator_with_that_model() {
    use droidmesh_llm::WireFormat;
    use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let reply =
        |text: &str| MockResponse::success(WireFormat::Openai, text, "local-model", 500, 20);
    let llm = rt
        .block_on(MockLlmServer::start([
            reply("```javascript\nopen_app('Settings')\n```"),
            reply(
                "```javascript\nconst w = ui_state.find(e => e.text === 'Bluetooth');\ntap(w.index);\ncomplete(true, 'Bluetooth toggled')\n```",
            ),
        ]))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("bluetooth.json");
    let cassette_arg = cassette.to_str().unwrap();
    let out = droidmesh()
        .args([
            "run",
            "--llm-url",
            &format!("{}/v1", llm.url()),
            "--model",
            "local-model",
            "--record",
            cassette_arg,
            "Turn on Bluetooth",
        ])
        .env_remove("CI")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("Replaying"), "{text}");
    assert!(text.contains("SUCCEEDED after 2 steps"), "{text}");
    assert!(text.contains("answer: Bluetooth toggled"), "{text}");
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].json()["model"], "local-model");
    assert!(requests[0].header("authorization").is_none());

    // The recording replays the same run with the model server gone.
    drop(llm);
    drop(rt);
    let recorded = droidmesh_llm::Cassette::load(&cassette).unwrap();
    assert_eq!(recorded.interactions.len(), 2);
    let out = droidmesh()
        .args(["run", "--replay", cassette_arg, "Turn on Bluetooth"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("2 recorded answers from cli"), "{text}");
    assert!(text.contains("replayed"), "{text}");
    assert!(text.contains("SUCCEEDED after 2 steps"), "{text}");
    assert!(text.contains("answer: Bluetooth toggled"), "{text}");
}

#[test]
fn record_needs_a_live_model_and_replay_a_readable_cassette() {
    let out = droidmesh()
        .args([
            "run",
            "--record",
            "/tmp/never-written.json",
            "Open Settings",
        ])
        .env_remove("DROIDMESH_CONFIG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--record needs a live model"), "{err}");

    let out = droidmesh()
        .args([
            "run",
            "--replay",
            "/nonexistent/cassette.json",
            "Open Settings",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/cassette.json"), "{err}");
}

#[test]
fn llm_url_without_a_model_is_refused() {
    let out = droidmesh()
        .args(["run", "--llm-url", "http://127.0.0.1:9/v1", "Open Settings"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--llm-url needs --model"), "{err}");
}

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    // As `droidmesh run … | head -0`: the pipe's reading end is closed before anything is
    // written, so the first line meets a broken pipe.
    let mut child = droidmesh()
        .args(["run", "Open Settings and turn on Wi-Fi"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );
}
