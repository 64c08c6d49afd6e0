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

/// The lines a run printed about its steps (indented event lines and step headers), with what
/// only a replay says removed, to compare a live run with its replay.
fn step_lines(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with("  ") || l.starts_with("step "))
        .map(|l| l.replace(", replayed", ""))
        .collect()
}

#[test]
fn llm_url_keeps_the_config_flags_win_and_a_failed_call_replays_as_failed() {
    use droidmesh_llm::WireFormat;
    use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let reply =
        |text: &str| MockResponse::success(WireFormat::Openai, text, "local-model", 500, 20);
    // Step 1 answers on its second attempt; step 2's call is refused; step 3 completes.
    let llm = rt
        .block_on(MockLlmServer::start([
            MockResponse::error(503, "loading model"),
            reply("```javascript\nopen_app('Settings')\n```"),
            MockResponse::error(400, "unsupported value for 'stop'"),
            reply("```javascript\ncomplete(true, 'Settings is open')\n```"),
        ]))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("droidmesh.toml");
    std::fs::write(
        &config,
        r#"
[llm.providers.local]
wire = "openai"
base_url = "http://gpu-box.invalid:8080/v1"
headers = { X-Org = "lab" }
retry = { max_attempts = 1, initial_backoff = "10ms", max_backoff = "10ms" }

[llm.profiles.default]
provider = "local"
model = "old-model"
max_tokens = 300
"#,
    )
    .unwrap();
    let cassette = dir.path().join("run.json");
    let out = droidmesh()
        .args([
            "--config",
            config.to_str().unwrap(),
            "run",
            "--llm-url",
            &format!("{}/v1", llm.url()),
            "--model",
            "local-model",
            "--llm-attempts",
            "2",
            "--record",
            cassette.to_str().unwrap(),
            "Open Settings",
        ])
        .env_remove("CI")
        .output()
        .unwrap();
    let live = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{live}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(live.contains("SUCCEEDED after 3 steps"), "{live}");
    // The retry shows on the step's usage line; the refusal is step 2's error.
    assert!(
        live.lines()
            .any(|l| l.contains("model local-model: 500 tokens in, 20 out")
                && l.contains(", 2 attempts, ")
                && l.ends_with(" in all")),
        "{live}"
    );
    assert!(
        live.contains(
            "error: the model call failed: provider rejected the request (http 400): unsupported value for 'stop'"
        ),
        "{live}"
    );
    // The config's header and max_tokens reached the server given by --llm-url.
    let requests = llm.requests();
    assert_eq!(requests.len(), 4);
    for r in &requests {
        assert_eq!(r.header("x-org"), Some("lab"));
        assert_eq!(r.json()["max_tokens"], 300);
        assert_eq!(r.json()["model"], "local-model");
    }

    // The replay, with the server gone, goes the same way, failure included.
    drop(llm);
    drop(rt);
    let out = droidmesh()
        .args([
            "run",
            "--replay",
            cassette.to_str().unwrap(),
            "Open Settings",
        ])
        .output()
        .unwrap();
    let replay = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{replay}");
    assert!(
        replay.contains("2 recorded answers and 1 failed call from cli"),
        "{replay}"
    );
    assert_eq!(step_lines(&replay), step_lines(&live), "{replay}");
}

#[test]
fn model_flags_are_explained_and_bad_values_refused_before_anything_starts() {
    let help = succeeds(&["run", "--help"]);
    for flag in [
        "--llm-timeout <DURATION>",
        "--llm-call-timeout <DURATION>",
        "--llm-attempts <N>",
        "--llm-retry-on-timeout [<BOOL>]",
        "--max-tokens <TOKENS>",
        "--context-tokens <TOKENS>",
        "flags win over [llm] config",
    ] {
        assert!(help.contains(flag), "{flag} in:\n{help}");
    }
    for (args, says) in [
        (&["--llm-timeout", "0s"][..], "--llm-timeout"),
        (&["--llm-attempts", "0"][..], "--llm-attempts"),
        (
            &[
                "--llm-url",
                "http://127.0.0.1:9/v1",
                "--model",
                "m",
                "--llm-timeout",
                "6m",
            ][..],
            "raise that with --llm-call-timeout",
        ),
        (&["--llm-attempts", "2"][..], "none is configured"),
        (
            &["--replay", "x.json", "--llm-attempts", "2"][..],
            "cannot be used with",
        ),
    ] {
        let out = droidmesh()
            .arg("run")
            .args(args)
            .arg("Open Settings")
            .env_remove("DROIDMESH_CONFIG")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("mesh: started"),
            "{args:?}: refused before the mesh started"
        );
    }
}

#[test]
fn a_small_local_model_s_refusals_and_slowness_are_named() {
    use droidmesh_llm::testkit::{LlamaOptions, LlamaServer};
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A context far smaller than the CodeAct prompt: llama.cpp refuses it with a 400.
    let tiny = rt
        .block_on(LlamaServer::start(LlamaOptions {
            context_tokens: 256,
            ..LlamaOptions::default()
        }))
        .unwrap();
    let run = |url: String, extra: &[&str]| {
        droidmesh()
            .args([
                "run",
                "--llm-url",
                &url,
                "--model",
                "gemma-3-270m-it",
                "--max-steps",
                "1",
            ])
            .args(extra)
            .arg("Open Settings")
            .output()
            .unwrap()
    };
    let out = run(tiny.base_url(), &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    // The refusal teaches the context's size; the prompt cannot fit it even without earlier
    // steps, so the task ends saying so instead of sending it again.
    assert!(
        text.contains(
            "the prompt does not fit the model's context of 256 tokens even without earlier steps"
        ),
        "{text}"
    );
    assert_eq!(tiny.requests().len(), 1, "an overflow is not sent again");

    // A model slower than --llm-timeout: one attempt, given up after the deadline.
    let slow = rt
        .block_on(LlamaServer::start(LlamaOptions {
            delay: std::time::Duration::from_secs(20),
            ..LlamaOptions::default()
        }))
        .unwrap();
    let started = std::time::Instant::now();
    let out = run(
        slow.base_url(),
        &["--llm-timeout", "1s", "--llm-attempts", "3"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("error: the model call failed: the model did not answer: no reply after 1s"),
        "{text}"
    );
    assert!(
        text.contains("(1 attempt)"),
        "a timed-out attempt is not retried: {text}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_damaged_task_store_stops_the_gateway_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.sqlite");
    std::fs::write(&file, vec![0x5a; 8192]).unwrap();
    let out = droidmesh()
        .args(["serve", "gateway"])
        .env("DROIDMESH_GATEWAY__DATA_DIR", dir.path())
        .env("DROIDMESH_LISTEN__GATEWAY", "0")
        .env("DROIDMESH_LISTEN__ADMIN", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(
        err.contains("not a SQLite database or it is damaged"),
        "{err}"
    );
}

#[test]
fn an_unreachable_postgres_store_stops_the_gateway_naming_it_without_the_password() {
    // Nothing listens on this port once the listener is dropped.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = std::time::Instant::now();
    let out = droidmesh()
        .args(["serve", "gateway"])
        .env(
            "DROIDMESH_GATEWAY__STORE",
            format!("postgres://droidmesh:hunter2@127.0.0.1:{port}/tasks"),
        )
        .env("DROIDMESH_LISTEN__GATEWAY", "0")
        .env("DROIDMESH_LISTEN__ADMIN", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "task store postgres://droidmesh@127.0.0.1:{port}/tasks: cannot connect"
        )),
        "{err}"
    );
    let all = format!("{err}{}", String::from_utf8_lossy(&out.stdout));
    assert!(!all.contains("hunter2"), "{all}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_gateway_beyond_loopback_without_keys_refuses_to_start() {
    let mut child = droidmesh()
        .args(["serve", "gateway", "--listen", "0.0.0.0:0"])
        .env("DROIDMESH_GATEWAY__STORE", "memory")
        .env("DROIDMESH_LISTEN__GATEWAY_HTTP", "0")
        .env("DROIDMESH_LISTEN__ADMIN", "0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the gateway started beyond loopback without keys");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    assert!(!status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("0.0.0.0, beyond loopback, with no API keys")
            && err.contains("gateway.auth.keys_file")
            && err.contains("gateway.auth.open = true"),
        "{err}"
    );
}

/// Kills the child when dropped, so a failed assertion leaves no server behind.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn run_sends_its_api_key_to_a_gateway_with_keys() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    let out = droidmesh()
        .args(["keys", "new", "--tenant", "acme"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    let key = text
        .split_whitespace()
        .find(|w| w.starts_with("dmk_"))
        .unwrap()
        .to_owned();
    let entry = &text[text.find("[[key]]").unwrap()..text.find("clients send").unwrap()];
    assert!(!entry.contains(&key), "{entry}");
    std::fs::write(&keys, entry).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let gateway = Killed(
        droidmesh()
            .args(["serve", "gateway", "--listen", &listen])
            .env("DROIDMESH_GATEWAY__STORE", "memory")
            .env("DROIDMESH_GATEWAY__AUTH__KEYS_FILE", &keys)
            .env("DROIDMESH_LISTEN__GATEWAY_HTTP", "0")
            .env("DROIDMESH_LISTEN__ADMIN", "0")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(&listen).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the gateway did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let endpoint = format!("http://{listen}");
    let run = |key: Option<&str>| {
        let mut c = droidmesh();
        c.args(["run", "--gateway", &endpoint, "open settings"]);
        c.env_remove("DROIDMESH_API_KEY");
        if let Some(k) = key {
            c.env("DROIDMESH_API_KEY", k);
        }
        let out = c.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(None);
    assert!(err.contains("no API key"), "{err}");
    let err = run(Some("dmk_wrong"));
    assert!(
        err.contains("not known") && !err.contains("dmk_wrong"),
        "{err}"
    );
    // With its key the call gets past the gateway's door: no device service answers here.
    let err = run(Some(&key));
    assert!(!err.contains("API key") && err.contains("device"), "{err}");
    drop(gateway);
}

#[test]
fn a_gateway_without_keys_on_loopback_says_it_is_open() {
    use std::io::BufRead as _;
    let mut gateway = Killed(
        droidmesh()
            .args(["serve", "gateway", "--listen", "127.0.0.1:0"])
            .env("DROIDMESH_GATEWAY__STORE", "memory")
            .env("DROIDMESH_LISTEN__GATEWAY_HTTP", "0")
            .env("DROIDMESH_LISTEN__ADMIN", "0")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The line comes before the server runs; a gateway that never says it ends the read when
    // it is killed (the reader thread sees end of file).
    let stdout = gateway.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("open to anyone on this machine") => break,
            Ok(_) => {}
            Err(_) => panic!("serve gateway never said it is open to anyone on this machine"),
        }
    }
    drop(gateway);
}

#[test]
fn a_service_whose_ports_outgrow_the_open_file_limit_refuses_to_start_naming_the_keys() {
    // A hard limit of 2000 descriptors cannot hold 5000 connections (and the gateway's HTTP
    // face on top): the process says so before it listens, instead of running out later.
    let mut child = Command::new("prlimit")
        .arg("--nofile=2000:2000")
        .arg(env!("CARGO_BIN_EXE_droidmesh"))
        .args(["serve", "gateway", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "error")
        .env("DROIDMESH_GRPC__MAX_CONNECTIONS", "5000")
        .env("DROIDMESH_LISTEN__GATEWAY_HTTP", "0")
        .env("DROIDMESH_LISTEN__ADMIN", "0")
        .env("DROIDMESH_GATEWAY__STORE", "memory")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the gateway started anyway");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(
        err.contains("grpc.max_connections let this process's ports hold up to 5625")
            && err.contains("it may open 2000 (its hard limit is 2000)")
            && err.contains("lower grpc.max_connections"),
        "{err}"
    );
}

#[test]
fn run_with_app_cards_gives_the_model_the_card_of_the_app_in_front() {
    use droidmesh_llm::WireFormat;
    use droidmesh_llm::testkit::{MockLlmServer, MockResponse};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let reply =
        |text: &str| MockResponse::success(WireFormat::Openai, text, "local-model", 500, 20);
    let llm = rt
        .block_on(MockLlmServer::start([
            reply("```javascript\nopen_app('Settings')\n```"),
            reply("```javascript\ncomplete(true, 'opened')\n```"),
        ]))
        .unwrap();
    let cards = tempfile::tempdir().unwrap();
    let android = cards.path().join("android");
    std::fs::create_dir_all(&android).unwrap();
    std::fs::write(
        android.join("app_cards.json"),
        r#"{"com.android.settings": "settings.md"}"#,
    )
    .unwrap();
    std::fs::write(
        android.join("settings.md"),
        "# Settings\nMy own note on Settings.",
    )
    .unwrap();
    let out = droidmesh()
        .args([
            "run",
            "--llm-url",
            &format!("{}/v1", llm.url()),
            "--model",
            "local-model",
        ])
        .arg("--app-cards")
        .arg(cards.path())
        .arg("Turn on Bluetooth")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prompts: Vec<String> = llm
        .requests()
        .iter()
        .map(|r| {
            r.json()["messages"][1]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert!(
        !prompts[0].contains("My own note on Settings."),
        "{}",
        prompts[0]
    );
    assert!(
        prompts[1].contains("My own note on Settings."),
        "{}",
        prompts[1]
    );

    let out = droidmesh()
        .args(["run", "--app-cards", "/no/cards", "x"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--app-cards /no/cards: not a directory"),
        "{err}"
    );
}
