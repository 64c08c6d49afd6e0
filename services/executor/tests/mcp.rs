//! Tools of MCP servers the executor starts over stdio (`[executor.mcp.<server>]`), called
//! from CodeAct: the server is `mcp-echo`, a real process speaking MCP (tests/mcp_echo), the
//! model is the scripted double, the phone the simulator behind the real device service.
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use droidmesh_executor::Executor;
use droidmesh_executor::{ExecutorConfig, Secrets};
use droidmesh_llm::LlmClient;
use droidmesh_proto::v1::executor_service_server::ExecutorServiceServer;

use crate::codeact::{finished, run, run_with};
use crate::custom_tools::{calls, config, prompt};
use crate::rig::{Rig, reply, rig_full};

/// The test server's path (built by cargo for these tests).
pub(crate) const ECHO: &str = env!("CARGO_BIN_EXE_mcp-echo");

/// `[mcp.echo]` running the test server, with `extra` TOML lines.
fn echo_server(extra: &str) -> String {
    format!("[mcp.echo]\ncommand = \"{ECHO}\"\n{extra}\n")
}

async fn echo_rig(extra: &str, script: Vec<&str>) -> Rig {
    rig_full(
        script.into_iter().map(reply).collect(),
        config(&echo_server(extra)),
        HashMap::new(),
    )
    .await
}

/// Whether process `pid` exists (a zombie still does: it has not been waited for).
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether process `pid` runs (exists and is not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the command's closing parenthesis.
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// Waits up to 10 s for `pid` to be gone.
async fn gone(pid: u32) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// The number the script logged after `label ` in the step prompt `text` (the last
/// occurrence: the step's code, shown before its output, has the label too).
fn logged_number(text: &str, label: &str) -> u32 {
    let at = text
        .rfind(&format!("{label} "))
        .unwrap_or_else(|| panic!("no {label} in {text}"));
    text[at + label.len() + 1..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_of_a_stdio_mcp_server_is_called_from_codeact_and_its_answer_read_next_step() {
    let rig = echo_rig(
        r#"include_tools = ["say", "add", "fail"]"#,
        vec![
            "```js\nconst r = echo_say({ text: 'hi' });\nconsole.log('said ' + r);\nconsole.log('sum ' + echo_add({ a: 2, b: 3 }).sum);\ntry { echo_fail() } catch (e) { console.log('fail: ' + e.message) }\ntry { echo_say({ text: 5 }) } catch (e) { console.log('bad: ' + e.message) }\ntry { echo_pid() } catch (e) { console.log('pid: ' + e.message) }\n```",
            "```js\ncomplete(true, 'the server said hi back')\n```",
        ],
    )
    .await;
    let events = run(&rig, "Say hi through the echo server", 5).await;
    assert!(finished(&events).success, "{:?}", finished(&events));

    // The prompt shows the server's tools under their new names, with the server's schema
    // and description; include_tools left the others out.
    let system = prompt(&rig, 0, 0);
    assert!(
        system.contains("echo_say(args: { text: string }): any — Says the text back.")
            && system.contains("echo_add(args: { a: number, b: number }): any — Adds two numbers.")
            && system.contains("echo_fail(args?: {}): any — Always fails."),
        "{system}"
    );
    assert!(!system.contains("echo_pid"), "{system}");

    let step2 = prompt(&rig, 1, 1);
    assert!(step2.contains("said echo: hi"), "{step2}");
    assert!(step2.contains("sum 5"), "{step2}");
    assert!(
        step2.contains(
            "fail: echo_fail: the server `echo` answered with an error: the echo server failed on purpose"
        ),
        "{step2}"
    );
    assert!(
        step2.contains(
            "bad: echo_say: the arguments do not fit the tool's schema: at /text: 5 is not of type"
        ),
        "{step2}"
    );
    assert!(step2.contains("pid: echo_pid is not defined"), "{step2}");

    // Each call is a ToolCall and a ToolResult; the misfit one never reached the server.
    let says = calls(&events, "echo_say");
    assert_eq!(says.len(), 2, "{says:?}");
    assert_eq!(says[0].0, r#"{"text":"hi"}"#);
    assert!(says[0].1 && !says[1].1, "{says:?}");
    let fails = calls(&events, "echo_fail");
    assert_eq!(fails.len(), 1);
    assert!(!fails[0].1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prefix_and_exclude_tools_name_the_tools_and_the_task_s_list_selects_among_them() {
    let rig = echo_rig(
        r#"prefix = "e_"
exclude_tools = ["exit", "slow", "big"]"#,
        vec![
            "```js\nconsole.log('said ' + e_say({ text: 'yo' }));\ntry { e_add({ a: 1, b: 2 }) } catch (e) { console.log('add: ' + e.message) }\ntry { e_exit() } catch (e) { console.log('exit: ' + e.message) }\ntry { echo_say({ text: 'x' }) } catch (e) { console.log('old: ' + e.message) }\n```",
            "```js\ncomplete(true, 'done')\n```",
        ],
    )
    .await;
    let events = run_with(&rig, "Say yo", 5, None, |start| {
        start.tools = vec!["complete".into(), "e_say".into()];
    })
    .await;
    assert!(finished(&events).success);
    let system = prompt(&rig, 0, 0);
    let listed = system.split("## Finishing").next().unwrap();
    assert!(
        listed.contains("e_say(args: { text: string })") && !listed.contains("e_add("),
        "{listed}"
    );
    let step2 = prompt(&rig, 1, 1);
    assert!(step2.contains("said echo: yo"), "{step2}");
    assert!(
        step2.contains(
            "add: e_add: not one of this task's tools (they are: complete, e_say); nothing was done"
        ),
        "{step2}"
    );
    assert!(step2.contains("exit: e_exit is not defined"), "{step2}");
    assert!(step2.contains("old: echo_say is not defined"), "{step2}");
    assert!(calls(&events, "e_add").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_exits_is_started_again_on_the_next_call() {
    let rig = echo_rig(
        "",
        vec![
            "```js\nconsole.log('pid_before ' + echo_pid());\ntry { echo_exit() } catch (e) { console.log('exit: ' + e.message) }\nconsole.log('pid_after ' + echo_pid());\n```",
            "```js\ncomplete(true, 'done')\n```",
        ],
    )
    .await;
    let events = run(&rig, "Restart the server", 5).await;
    assert!(finished(&events).success);
    let step2 = prompt(&rig, 1, 1);
    assert!(
        step2.contains(
            "exit: echo_exit: the server `echo` exited during the call (exit status: 3); it is started again on the next call"
        ),
        "{step2}"
    );
    let (first, second) = (
        logged_number(&step2, "pid_before"),
        logged_number(&step2, "pid_after"),
    );
    assert_ne!(first, second, "{step2}");
    // The first process was waited for, not left behind as a zombie.
    assert!(gone(first).await, "process {first} is still there");
    assert!(alive(second));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_past_its_restarts_reports_a_clear_error() {
    let rig = echo_rig(
        "max_restarts = 0",
        vec![
            "```js\ntry { echo_exit() } catch (e) { console.log('exit: ' + e.message) }\ntry { echo_say({ text: 'hi' }) } catch (e) { console.log('say: ' + e.message) }\n```",
            "```js\ncomplete(false, 'the server is down')\n```",
        ],
    )
    .await;
    let events = run(&rig, "Use a dead server", 5).await;
    assert_eq!(finished(&events).steps, 2);
    let step2 = prompt(&rig, 1, 1);
    assert!(
        step2.contains(
            "exit: echo_exit: the server `echo` exited during the call (exit status: 3); it is not started again (executor.mcp.echo.max_restarts = 0)"
        ),
        "{step2}"
    );
    assert!(
        step2.contains(
            "say: echo_say: the server `echo` is down (it exited during a call (exit status: 3)) and is not started again: the 0 restarts in a row that executor.mcp.echo.max_restarts allows are spent; restart the executor to use it again"
        ),
        "{step2}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_call_times_out_a_large_answer_is_refused_and_the_server_answers_again() {
    let rig = echo_rig(
        // Long enough for the server to be started again within a call on a busy machine.
        "call_timeout_ms = 2000\nmax_response_bytes = 2000",
        vec![
            "```js\ntry { echo_slow({ ms: 20000 }) } catch (e) { console.log('slow: ' + e.message) }\nconsole.log('after slow ' + echo_say({ text: 'a' }));\ntry { echo_big({ bytes: 5000 }) } catch (e) { console.log('big: ' + e.message) }\nconsole.log('after big ' + echo_say({ text: 'b' }));\nconsole.log('small ' + echo_big({ bytes: 10 }));\n```",
            "```js\ncomplete(true, 'done')\n```",
        ],
    )
    .await;
    let events = run(&rig, "Try the limits", 5).await;
    assert!(finished(&events).success);
    let step2 = prompt(&rig, 1, 1);
    assert!(
        step2.contains(
            "slow: echo_slow: the server `echo` did not answer within 2000 ms (executor.mcp.echo.call_timeout_ms); the call was cancelled"
        ),
        "{step2}"
    );
    assert!(step2.contains("after slow echo: a"), "{step2}");
    assert!(
        step2.contains(
            "big: echo_big: the server `echo` sent a message longer than 2000 bytes (executor.mcp.echo.max_response_bytes); it was stopped and is started again on the next call"
        ),
        "{step2}"
    );
    assert!(step2.contains("after big echo: b"), "{step2}");
    assert!(step2.contains("small xxxxxxxxxx"), "{step2}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_reaches_the_server_in_its_environment_and_nothing_else_of_the_executor_s_does() {
    const TOKEN: &str = "mcp-tok-0c9b1e27d4";
    // Cargo sets this for the test process; the server must not inherit it.
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    let secrets = HashMap::from([("mcp_token".to_owned(), TOKEN.to_owned())]);
    let rig = rig_full(
        vec![
            reply(
                "```js\nfor (const name of ['TOKEN', 'PLAIN', 'PATH', 'CARGO_MANIFEST_DIR']) {\n  console.log(name + ' = ' + JSON.stringify(echo_env({ name }).value));\n}\n```",
            ),
            reply("```js\ncomplete(true, 'done')\n```"),
        ],
        config(&echo_server(
            r#"env = { TOKEN = "Bearer {secret:mcp_token}", PLAIN = "plain text" }"#,
        )),
        secrets,
    )
    .await;
    let events = run(&rig, "Read the server's environment", 5).await;
    assert!(finished(&events).success);
    let step2 = prompt(&rig, 1, 1);
    // The server held the secret (it came back where the value was) and the model never
    // read it.
    assert!(
        step2.contains("TOKEN = \\\"Bearer [REDACTED]\\\""),
        "{step2}"
    );
    assert!(step2.contains("PLAIN = \\\"plain text\\\""), "{step2}");
    assert!(!step2.contains("PATH = null"), "{step2}");
    assert!(step2.contains("CARGO_MANIFEST_DIR = null"), "{step2}");
    for request in rig.llm.requests() {
        assert!(!request.json().to_string().contains(TOKEN));
    }
    for event in &events {
        assert!(!format!("{event:?}").contains(TOKEN), "{event:?}");
    }
}

/// An executor built (not served) from `[executor]` TOML; its model is never called.
fn build_from(toml_text: &str) -> Result<ExecutorServiceServer<Executor>, String> {
    let llm = LlmClient::from_config(
        &droidmesh_llm::LlmConfig::from_toml_str(
            "[providers.p]\nwire = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n[profiles.codeact]\nprovider = \"p\"\nmodel = \"m\"\n",
        )
        .unwrap(),
    )
    .unwrap();
    let cfg: ExecutorConfig = config(toml_text);
    droidmesh_executor::executor_service(
        cfg,
        llm,
        "http://127.0.0.1:9".into(),
        Secrets::from(HashMap::new()),
    )
}

/// An executor built with `[mcp.echo]` and `extra` lines.
fn build(extra: &str) -> Result<ExecutorServiceServer<Executor>, String> {
    build_from(&echo_server(extra))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_server_is_killed_and_waited_for_when_the_executor_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let executor = build(&format!(
        "env = {{ MCP_ECHO_PID_FILE = \"{}\" }}",
        pid_file.display()
    ))
    .unwrap();
    // The server was started with the executor, before any task.
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    drop(executor);
    // Dropping waits for the child: it is gone at once, not a zombie.
    assert!(!alive(pid), "process {pid} outlived the executor");
}

#[tokio::test(flavor = "multi_thread")]
async fn what_the_server_started_is_killed_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (server_pid, helper_pid) = (dir.path().join("server"), dir.path().join("helper"));
    // A launcher (as `npx` or `uvx` would be) that leaves a helper process running and then
    // becomes the server.
    let script = "sleep 600 & echo $! > \"$HELPER_PID\"; exec \"$0\"";
    let executor = build_from(&format!(
        "[mcp.echo]\ncommand = \"sh\"\nargs = [\"-c\", '{script}', \"{ECHO}\"]\nenv = {{ MCP_ECHO_PID_FILE = \"{}\", HELPER_PID = \"{}\" }}\n",
        server_pid.display(),
        helper_pid.display()
    ))
    .unwrap();
    let read = |path: &Path| -> u32 {
        std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (server, helper) = (read(&server_pid), read(&helper_pid));
    assert!(running(server) && running(helper));
    drop(executor);
    assert!(!alive(server), "the server {server} outlived the executor");
    // The helper is not the executor's child to wait for: whoever adopted it reaps it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while running(helper) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !running(helper),
        "the helper {helper} outlived the executor"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_stops_the_executor_from_starting_naming_its_key() {
    let e = build("").err();
    assert!(e.is_none(), "{e:?}");
    let e = build_from("[mcp.gone]\ncommand = \"/nonexistent/mcp-server\"\n")
        .err()
        .unwrap();
    assert!(
        e.starts_with("executor.mcp.gone.command `/nonexistent/mcp-server` could not be started: "),
        "{e}"
    );
    // Every problem at once: a name the server does not offer, a server that does not start.
    let e = build_from(&format!(
        "{}[mcp.gone]\ncommand = \"/nonexistent/mcp-server\"\n",
        echo_server("include_tools = [\"say\", \"nope\"]")
    ))
    .err()
    .unwrap();
    let problems: Vec<&str> = e.split("; executor.").collect();
    assert_eq!(problems.len(), 2, "{e}");
    assert_eq!(
        problems[0],
        "executor.mcp.echo.include_tools names `nope`, which the server does not offer (it offers: say, add, fail, pid, env, big, slow, exit)"
    );
    assert!(
        problems[1].starts_with("mcp.gone.command `/nonexistent/mcp-server` could not be started"),
        "{e}"
    );
    let e = build("env = { MCP_ECHO_ODD_NAME = \"1\" }").err().unwrap();
    assert!(
        e.starts_with("executor.mcp.echo: the tool `odd-name` cannot be offered: its function's name `echo_odd-name` is not a JavaScript identifier"),
        "{e}"
    );
    assert!(build("env = { MCP_ECHO_ODD_NAME = \"1\" }\nexclude_tools = [\"odd-name\"]").is_ok());
    // A name taken by the config's own tool, or by another server's.
    let e = build_from(&format!(
        "[tools.say]\ndescription = \"d\"\njs = \"(a) => 1\"\n{}",
        echo_server("prefix = \"\"")
    ))
    .err()
    .unwrap();
    assert!(
        e.starts_with("executor.mcp.echo: the tool `say` cannot be offered: its function's name `say` is taken by executor.tools.say; leave it out with exclude_tools or set another prefix"),
        "{e}"
    );
    let e = build_from(&format!(
        "{}[mcp.echo2]\ncommand = \"{ECHO}\"\nprefix = \"e_\"\ninclude_tools = [\"say\", \"add\"]\n",
        echo_server("prefix = \"e_\"")
    ))
    .err()
    .unwrap();
    assert_eq!(
        e,
        "executor.mcp.echo2: the tool `say` cannot be offered: its function's name `e_say` is taken by executor.mcp.echo's tool `say`; leave it out with exclude_tools or set another prefix; executor.mcp.echo2: the tool `add` cannot be offered: its function's name `e_add` is taken by executor.mcp.echo's tool `add`; leave it out with exclude_tools or set another prefix"
    );
    let e =
        build_from("[mcp.slow]\ncommand = \"sleep\"\nargs = [\"30\"]\nstart_timeout_ms = 300\n")
            .err()
            .unwrap();
    assert!(
        e.starts_with("executor.mcp.slow did not finish its start (initialize, then tools/list) within start_timeout_ms (300 ms)"),
        "{e}"
    );
}
