#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt as _};

use super::io::{LINES_PER_WINDOW, Tail, WINDOW, log_stderr};
use super::*;
use crate::config::ExecutorConfig;

fn servers(toml_text: &str) -> BTreeMap<String, McpServerConfig> {
    let cfg: ExecutorConfig = toml::from_str(toml_text).unwrap();
    cfg.mcp
}

fn no_secrets() -> Secrets {
    Secrets::from(HashMap::new())
}

#[test]
fn every_problem_of_every_server_is_reported_each_naming_its_key() {
    let cfg = ExecutorConfig {
        mcp: servers(
            r#"
[mcp.files]
command = " "
args = ["a\u0000b"]
env = { "A=B" = "x", TOKEN = "Bearer {secret:tok" }
include_tools = ["read", ""]
exclude_tools = ["read"]
prefix = "1f_"
start_timeout_ms = 0
call_timeout_ms = 70000
max_response_bytes = 100
max_calls_per_run = 0
max_restarts = 101

[mcp."my-server"]
command = "server"

[mcp.fine]
command = "server"
prefix = ""

[mcp.none]
command = "server"
include_tools = []
"#,
        ),
        ..ExecutorConfig::default()
    };
    let problems = cfg.problems();
    let expected = [
        "executor.mcp.files.command is empty",
        "executor.mcp.files: the command and its args cannot hold a NUL character",
        "executor.mcp.files.env: `A=B` is not an environment variable's name",
        "executor.mcp.files.env.TOKEN has a `{secret:` without its closing `}`",
        "executor.mcp.files.prefix `1f_` starts with a digit",
        "executor.mcp.files.include_tools has an empty name",
        "executor.mcp.files.exclude_tools names `read`, which include_tools names too",
        "executor.mcp.files.start_timeout_ms must be between 10 and 300000, got 0",
        "executor.mcp.files.call_timeout_ms must be between 10 and executor.step_timeout_ms (60000), got 70000",
        "executor.mcp.files.max_response_bytes must be between 1024 and 16777216, got 100",
        "executor.mcp.files.max_calls_per_run must be at least 1, got 0",
        "executor.mcp.files.max_restarts must be at most 100, got 101",
        "executor.mcp.none.include_tools is empty, so no tool would be offered",
        "executor.mcp.my-server: the default prefix `my-server_` holds characters a JavaScript identifier cannot; set `prefix`",
    ];
    for want in expected {
        assert!(
            problems.iter().any(|p| p.starts_with(want)),
            "no problem starts with {want:?}: {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    let unknown = toml::from_str::<ExecutorConfig>("[mcp.x]\ncommand = \"s\"\ncwd = \"/\"\n")
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("unknown field `cwd`"), "{unknown}");
}

#[test]
fn a_secret_the_environment_names_must_be_held_before_anything_starts() {
    let cfg = servers(
        "[mcp.echo]\ncommand = \"/nonexistent/server\"\nenv = { TOKEN = \"{secret:mcp_token}\" }\n",
    );
    let e = McpHub::start(&cfg, &no_secrets()).unwrap_err();
    assert_eq!(
        e,
        "executor.mcp.echo.env.TOKEN names the secret `mcp_token`, which this executor does not hold: set the environment variable DROIDMESH_SECRET_MCP_TOKEN or put a file named `mcp_token` in the `[secrets] dir`"
    );
}

/// Whether process `pid` exists (a zombie does).
fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_failed_start_says_why_with_the_server_s_stderr_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let cfg = servers(&format!(
        r#"
[mcp.broken]
command = "sh"
args = ["-c", "echo 'config file missing' >&2; exit 4"]

[mcp.silent]
command = "sh"
args = ["-c", "echo $$ > {}; echo waiting >&2; exec sleep 30"]
start_timeout_ms = 2000

[mcp.gone]
command = "/nonexistent/server"
"#,
        pid_file.display()
    ));
    let (hub, listed) = McpHub::start(&cfg, &no_secrets()).unwrap();
    let problems: Vec<String> = listed.into_iter().map(Result::unwrap_err).collect();
    assert_eq!(
        problems[0],
        "executor.mcp.broken exited during its start (exit status: 4); its last stderr lines: config file missing"
    );
    assert!(
        problems[1].starts_with(
            "executor.mcp.gone.command `/nonexistent/server` could not be started: No such file or directory"
        ),
        "{problems:?}"
    );
    assert_eq!(
        problems[2],
        "executor.mcp.silent did not finish its start (initialize, then tools/list) within start_timeout_ms (2000 ms); its last stderr lines: waiting"
    );
    drop(hub);
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(pid), "the silent server {pid} was left running");
}

#[test]
fn an_answer_is_its_structured_content_or_its_text_and_an_error_result_throws() {
    let used = vec!["s3cr3t".to_owned()];
    let text = CallToolResult::success(vec![
        ContentBlock::text("line one"),
        ContentBlock::image("aGk=", "image/png"),
        ContentBlock::text("token s3cr3t"),
    ]);
    let a = server::answer_of(text, &used, "echo", "say").unwrap();
    assert_eq!(
        a.value,
        json!("line one\n[an image (image/png) left out]\ntoken [REDACTED]")
    );
    assert!(
        a.summary
            .starts_with("the server `echo` answered say: line one"),
        "{}",
        a.summary
    );
    let structured = CallToolResult::structured(json!({"sum": 5, "token": "s3cr3t"}));
    let a = server::answer_of(structured, &used, "echo", "add").unwrap();
    assert_eq!(a.value, json!({"sum": 5, "token": "[REDACTED]"}));
    let e = server::answer_of(
        CallToolResult::error(vec![ContentBlock::text("no such file s3cr3t")]),
        &used,
        "files",
        "read",
    )
    .unwrap_err();
    assert_eq!(
        e,
        "the server `files` answered with an error: no such file [REDACTED]"
    );
    let e = server::answer_of(CallToolResult::error(vec![]), &used, "files", "read").unwrap_err();
    assert_eq!(e, "the server `files` answered with an error");
}

/// The messages of every event logged.
#[derive(Clone, Default)]
struct Logged(Arc<Mutex<Vec<String>>>);

struct Message<'a>(&'a mut String);

impl Visit for Message<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Logged {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut message = String::new();
        event.record(&mut Message(&mut message));
        self.0.lock().unwrap().push(message);
    }
}

#[tokio::test(start_paused = true)]
async fn a_chatty_server_s_stderr_is_logged_within_its_bound() {
    let logged = Logged::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(logged.clone()));
    let (mut write, read) = tokio::io::duplex(1 << 16);
    let reader = tokio::spawn(log_stderr(
        "chatty".into(),
        read,
        Arc::new(Tail::default()),
        Vec::new(),
    ));
    use tokio::io::AsyncWriteExt as _;
    for i in 0..250 {
        write
            .write_all(format!("burst {i}\n").as_bytes())
            .await
            .unwrap();
    }
    write.flush().await.unwrap();
    tokio::time::sleep(WINDOW).await;
    write.write_all(b"later\n").await.unwrap();
    drop(write);
    reader.await.unwrap();
    let logged = logged.0.lock().unwrap().clone();
    let bursts = logged
        .iter()
        .filter(|m| m.starts_with("stderr: burst"))
        .count();
    assert_eq!(bursts, LINES_PER_WINDOW as usize, "{logged:#?}");
    assert!(
        logged
            .contains(&"150 more stderr lines were not logged (at most 100 every 10 s)".to_owned()),
        "{logged:#?}"
    );
    assert_eq!(logged.last().map(String::as_str), Some("stderr: later"));
}
