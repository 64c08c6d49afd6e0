//! The binary as a platform team sets it up: a config's problems named with their keys and
//! where each value came from, all at once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::process::Command;

fn droidmesh() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_droidmesh"));
    c.env_remove("OPENAI_API_KEY")
        .env_remove("DROIDMESH_CONFIG")
        .env("RUST_LOG", "error");
    c
}

/// Runs `droidmesh` with `args`, expects it to fail, and returns its standard error.
fn fails(c: &mut Command) -> String {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "it succeeded: {err}");
    err
}

#[test]
fn config_problems_name_each_key_where_it_came_from_and_its_value_all_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("droidmesh.toml");
    std::fs::write(
        &file,
        "[listen]\ngateway = \"nine\"\ndevice = 70000\n\n[gateway]\ndefault_max_stepz = 3\n\n\
         [device]\ncommand_timeout_ms = 0\n",
    )
    .unwrap();
    let path = file.display().to_string();
    let err = fails(droidmesh().arg("--config").arg(&file).arg("devices"));
    for part in [
        format!("listen.gateway: expected u16, found string \"nine\" ({path}, line 2)"),
        format!("listen.device: expected u16, found integer `70000` ({path}, line 3)"),
        format!(
            "gateway.default_max_stepz: unknown key ({path}, line 6); did you mean `default_max_steps`?"
        ),
        format!("device.command_timeout_ms must be greater than 0 ({path}, line 9)"),
    ] {
        assert!(err.contains(&part), "{part:?} is not in:\n{err}");
    }
    // Said once, not once per layer of the error.
    assert_eq!(err.matches("listen.gateway").count(), 1, "{err}");

    // The same value from the environment names the variable.
    let err = fails(
        droidmesh()
            .arg("devices")
            .env("DROIDMESH_LISTEN__GATEWAY", "nine")
            .env("DROIDMESH_DEVICE__COMMAND_TIMEOUT_MS", "0"),
    );
    for part in [
        "listen.gateway: expected u16, found string \"nine\" (from DROIDMESH_LISTEN__GATEWAY)",
        "device.command_timeout_ms must be greater than 0 (from DROIDMESH_DEVICE__COMMAND_TIMEOUT_MS)",
    ] {
        assert!(err.contains(part), "{part:?} is not in:\n{err}");
    }
}

/// A loopback port nothing listens on (once the listener is dropped).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn run_against_a_gateway_that_is_not_there_says_so_once_in_words() {
    let port = free_port();
    let gateway = format!("http://127.0.0.1:{port}");
    let err = fails(droidmesh().args(["run", "--gateway", &gateway, "open settings"]));
    assert!(
        err.contains(&format!(
            "no gateway answers at {gateway}: connection refused; start one with `droidmesh up` or check --gateway"
        )),
        "{err}"
    );
    assert!(!err.contains("tcp connect error"), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{err}"
    );
    assert_eq!(err.matches("connection refused").count(), 1, "{err}");
}

#[test]
fn a_failing_run_logs_without_colour_codes_and_says_its_error_once() {
    // A model nobody serves: the run fails, its retries are logged (warn, run's default).
    let out = droidmesh()
        .env_remove("RUST_LOG")
        .args([
            "run",
            "--llm-url",
            &format!("http://127.0.0.1:{}/v1", free_port()),
            "--model",
            "m",
            "--llm-attempts",
            "2",
            "--max-steps",
            "1",
            "Open Settings",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(err.contains("llm attempt failed"), "a log line: {err}");
    assert!(!err.contains("\x1b["), "colour codes into a pipe: {err:?}");
    // The step says the call failed, and the end says why the task failed: not a third time
    // in a status line.
    assert_eq!(text.matches("the last step failed").count(), 1, "{text}");
}

#[test]
fn serve_gateway_binds_its_ports_before_it_makes_any_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("store");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let serve = |listen: &str, http: &str| {
        let mut c = droidmesh();
        c.args(["serve", "gateway", "--listen", listen])
            .env("RUST_LOG", "info")
            .env("DROIDMESH_GATEWAY__DATA_DIR", &data)
            .env("DROIDMESH_LISTEN__GATEWAY_HTTP", http)
            .env("DROIDMESH_LISTEN__ADMIN", "0");
        fails(&mut c)
    };
    // Its gRPC port taken.
    let err = serve(&format!("127.0.0.1:{port}"), "0");
    assert!(
        err.contains(&format!("cannot bind 127.0.0.1:{port}")) && err.contains("in use"),
        "{err}"
    );
    assert_eq!(err.matches("in use").count(), 1, "said once: {err}");
    assert!(!err.contains("\x1b["), "colour codes into a pipe: {err:?}");
    assert!(
        !data.exists(),
        "the task store was made before the port was bound"
    );
    // Its HTTP face's port taken.
    let err = serve("127.0.0.1:0", &port.to_string());
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.contains("gateway_http"),
        "{err}"
    );
    assert!(
        !data.exists(),
        "the task store was made before the port was bound"
    );
    drop(taken);
}

#[test]
fn a_model_call_in_progress_shows_its_wait_on_a_terminal_only() {
    use droidmesh_llm::testkit::{LlamaOptions, LlamaServer};
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A model that takes 3 s per answer (real time: the wait is what is shown).
    let slow = rt
        .block_on(LlamaServer::start(LlamaOptions {
            delay: std::time::Duration::from_secs(3),
            ..LlamaOptions::default()
        }))
        .unwrap();
    let run = format!(
        "{} run --llm-url {} --model gemma-3-270m-it --max-steps 1 'Open Settings'",
        env!("CARGO_BIN_EXE_droidmesh"),
        slow.base_url()
    );
    // On a terminal (`script` runs it on a pseudo-terminal and copies what it shows).
    let out = Command::new("script")
        .args(["-qec", &run, "/dev/null"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("DROIDMESH_CONFIG")
        .env("RUST_LOG", "error")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("step 1"), "{shown}");
    // Redrawn as it goes: the model takes 3 s, so the wait reads at least 2 s before its end.
    assert!(shown.contains("waiting for the model: 1s"), "{shown}");
    assert!(shown.contains("waiting for the model: 2s"), "{shown}");
    // Into a pipe: the same run prints no waiting line.
    let out = droidmesh()
        .args([
            "run",
            "--llm-url",
            &slow.base_url(),
            "--model",
            "gemma-3-270m-it",
            "--max-steps",
            "1",
            "Open Settings",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("step 1"), "{text}");
    assert!(!text.contains("waiting for the model"), "{text}");
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
fn commands_find_a_device_service_on_the_port_the_config_moved_it_to() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let phone = rt
        .block_on(droidmesh_sim::start(droidmesh_sim::SimOptions {
            base_port: 0,
            ..droidmesh_sim::SimOptions::default()
        }))
        .unwrap();
    let serial = phone.addrs()[0].to_string();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = dir.path().join("droidmesh.toml");
    let device = format!(
        "[device]\nadb_server = \"\"\ndirect_devices = [\"{serial}\"]\nstate_dir = \"{}\"\n",
        dir.path().join("device").display()
    );
    std::fs::write(
        &config,
        format!("[listen]\ndevice = {port}\nadmin = 0\n\n{device}"),
    )
    .unwrap();
    let _service = Killed(
        droidmesh()
            .arg("--config")
            .arg(&config)
            .args(["serve", "device"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the device service did not start on {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // `devices` with the same config, no --endpoint: it calls the moved port.
    let out = droidmesh()
        .arg("--config")
        .arg(&config)
        .arg("devices")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(&serial), "{text}");

    // An [endpoints] entry still wins over [listen].
    let elsewhere = format!("http://127.0.0.1:{}", free_port());
    std::fs::write(
        &config,
        format!(
            "[listen]\ndevice = {port}\nadmin = 0\n[endpoints]\ndevice = \"{elsewhere}\"\n\n{device}"
        ),
    )
    .unwrap();
    let err = fails(droidmesh().arg("--config").arg(&config).arg("devices"));
    assert!(
        err.contains(&format!("no device service answers at {elsewhere}")),
        "{err}"
    );
}
