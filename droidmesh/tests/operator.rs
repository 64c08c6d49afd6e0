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
