//! `droidmesh eval` as a user meets it: the suite's scripted agents drive the real mesh on the
//! built-in simulators, and only the phone's state decides: every oracle passes, the agent that
//! does nothing (while claiming success) passes only the tasks that start satisfied, every near
//! miss fails; a run says what it measures; task files with mistakes are refused naming the
//! file and the field.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::process::Command;

use serde_json::Value;

fn droidmesh() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_droidmesh"));
    c.env_remove("OPENAI_API_KEY").env("RUST_LOG", "error");
    c
}

/// Runs the built-in suite with `agent` (2 seeds unless `extra` says) and returns its JSON
/// report and its output.
fn eval(agent: Option<&str>, extra: &[&str]) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let mut cmd = droidmesh();
    // A recording is refused where CI is set; these runs stand for a developer's machine.
    cmd.env_remove("CI")
        .args(["eval", "--parallel", "3", "--json"])
        .arg(&json)
        .args(extra);
    if !extra.contains(&"--seeds") {
        cmd.args(["--seeds", "2"]);
    }
    if let Some(a) = agent {
        cmd.args(["--agent", a]);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (report, text)
}

fn tasks(report: &Value) -> &Vec<Value> {
    report["tasks"].as_array().unwrap()
}

/// The report's tasks without what the machine's speed decides (times), for comparing runs.
fn without_timings(report: &Value) -> Vec<Value> {
    tasks(report)
        .iter()
        .map(|t| {
            let mut t = t.clone();
            for timing in ["wall_ms", "model_ms", "setup_us"] {
                t.as_object_mut().unwrap().remove(timing);
            }
            t
        })
        .collect()
}

/// The templates of the built-in suite that start satisfied.
fn satisfied_at_start() -> Vec<String> {
    let families = droidmesh_eval::builtin().unwrap();
    families
        .iter()
        .flat_map(|f| {
            f.templates
                .iter()
                .filter(|t| t.satisfied_at_start)
                .map(move |t| format!("{}/{}", f.name, t.id))
        })
        .collect()
}

#[test]
fn without_a_model_the_oracles_run_and_every_check_passes() {
    let (report, text) = eval(None, &[]);
    assert!(text.contains("no model is configured"), "{text}");
    assert!(text.contains("not a model"), "{text}");
    assert_eq!(report["agent"], "scripted oracle");
    let tasks = tasks(&report);
    assert!(tasks.len() >= 16, "{}", tasks.len());
    for t in tasks {
        assert_eq!(t["success"], true, "{t}");
        assert_eq!(t["score"], 1.0, "{t}");
        assert!(t["steps"].as_u64().unwrap() >= 2, "{t}");
        assert!(t["error"].is_null(), "{t}");
    }
    assert_eq!(report["summary"]["successes"], tasks.len());
    assert!(
        text.contains(&format!("{0} of {0} succeeded: 100.0%", tasks.len())),
        "{text}"
    );
}

#[test]
fn the_do_nothing_agent_passes_only_tasks_that_start_satisfied_whatever_it_claims() {
    let (report, _) = eval(Some("noop"), &[]);
    let satisfied = satisfied_at_start();
    assert!(!satisfied.is_empty());
    for t in tasks(&report) {
        let template = t["template"].as_str().unwrap();
        assert_eq!(
            t["success"].as_bool().unwrap(),
            satisfied.iter().any(|s| s == template),
            "{t}"
        );
        assert_eq!(t["agent_claimed_success"], true, "{t}");
    }
}

#[test]
fn every_near_miss_fails_and_a_composite_scores_what_was_done() {
    let (report, _) = eval(Some("near-miss"), &[]);
    for t in tasks(&report) {
        assert_eq!(t["success"], false, "{t}");
        assert!(t["error"].is_null(), "{t}");
    }
    let offline = tasks(&report)
        .iter()
        .find(|t| t["template"] == "settings/offline")
        .unwrap();
    assert!(
        (offline["score"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9,
        "{offline}"
    );
    assert!(
        offline["finding"]
            .as_str()
            .unwrap()
            .contains("2 of 3 parts done; global mobile_data is 1; the task wants 0"),
        "{offline}"
    );
}

#[test]
fn a_run_is_reproducible_from_its_seeds_and_written_as_junit() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("run.xml");
    let (a, _) = eval(
        Some("near-miss"),
        &[
            "--tasks",
            "settings/wifi*",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    let (b, _) = eval(Some("near-miss"), &["--tasks", "settings/wifi*"]);
    assert_eq!(without_timings(&a), without_timings(&b));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuite name=\"droidmesh eval\" tests=\"6\" failures=\"6\""),
        "{xml}"
    );
    assert!(xml.contains("name=\"settings/wifi#0\""), "{xml}");
}

#[test]
fn a_task_file_with_a_mistake_is_refused_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mine.toml"),
        "family = \"mine\"\n[[task]]\nid = \"t\"\ngoal = \"Turn {{state}} Wi-Fi\"\nmax_steps = 3\ncheck.setting = { name = \"global:wifi_on\", equals = \"1\" }\noracle = [\"complete(true, 'x')\"]\n",
    )
    .unwrap();
    let out = droidmesh()
        .args(["eval", "--suite"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mine.toml: task[0] (t).goal"), "{err}");
    assert!(err.contains("{{state}}"), "{err}");
    let out = droidmesh()
        .args(["eval", "--tasks", "nothing/*"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no task matches") && err.contains("settings/wifi"),
        "{err}"
    );
}

#[test]
fn a_recorded_run_replays_to_the_same_result() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("oracle.json");
    let cassette_arg = cassette.to_str().unwrap();
    // Seeds that draw the same goal run one after another, so each answer replays to its task.
    let (recorded, text) = eval(
        Some("oracle"),
        &[
            "--tasks",
            "settings/wifi*",
            "--tasks",
            "settings/dark_theme",
            "--record",
            cassette_arg,
        ],
    );
    assert!(text.contains("recording every model answer"), "{text}");
    let (replayed, text) = eval(
        None,
        &[
            "--tasks",
            "settings/wifi*",
            "--tasks",
            "settings/dark_theme",
            "--replay",
            cassette_arg,
        ],
    );
    assert!(text.contains("no live model is called"), "{text}");
    assert!(
        replayed["agent"].as_str().unwrap().starts_with("replay of"),
        "{}",
        replayed["agent"]
    );
    assert_eq!(without_timings(&recorded), without_timings(&replayed));
    assert!(tasks(&replayed).iter().all(|t| t["success"] == true));
}

#[test]
fn names_in_any_script_need_a_keyboard_app_on_the_phone() {
    let (with, _) = eval(Some("oracle"), &["--tasks", "contacts/add", "--seeds", "8"]);
    let (without, _) = eval(
        Some("oracle"),
        &[
            "--tasks",
            "contacts/add",
            "--seeds",
            "8",
            "--keyboard",
            "none",
        ],
    );
    let ascii = |t: &Value| t["params"]["p"]["name"].as_str().unwrap().is_ascii();
    assert!(tasks(&with).iter().all(|t| t["success"] == true));
    assert!(
        tasks(&with).iter().any(|t| !ascii(t)),
        "no seed drew a non-ASCII name"
    );
    for t in tasks(&without) {
        assert_eq!(t["success"].as_bool().unwrap(), ascii(t), "{t}");
    }
}

#[test]
fn a_run_too_large_to_hold_is_refused_before_anything_starts() {
    let refused = |args: &[&str]| {
        let out = droidmesh().arg("eval").args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refused(&["--seeds", "0"]);
    assert!(err.contains("--seeds") && err.contains("1..=1000"), "{err}");
    let err = refused(&["--seeds", "1001"]);
    assert!(err.contains("1..=1000"), "{err}");
    // Every template 1000 times is more instances than a run makes; nothing is started.
    let err = refused(&["--seeds", "1000", "--list"]);
    assert!(
        err.contains("1000 seeds") && err.contains("at most 10000"),
        "{err}"
    );
    assert!(!err.contains("phone"), "{err}");
    // The same seeds over one template are within the bound.
    let out = droidmesh()
        .args([
            "eval",
            "--tasks",
            "settings/wifi",
            "--seeds",
            "1000",
            "--list",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1000);
}
