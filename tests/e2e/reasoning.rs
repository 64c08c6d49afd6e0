//! Reasoning mode across processes: the gateway, manager, executor, scripter, text manipulator
//! and device service each a `droidmesh serve` process, simulators through Debian's adb, one
//! scripted model double on loopback answering every agent in call order. Assertions read the
//! phone the way one reads a phone (`adb shell`), the HTTP servers' own logs, and the prompts
//! the model double received.
use std::sync::{Arc, Mutex};

use droidmesh_llm::testkit::{MockLlmServer, ReceivedRequest};
use droidmesh_proto::v1::{Mode, SendMessageRequest, send_message_request};

use super::*;

pub(super) fn reasoning(goal: &str, device: &str) -> TaskRequest {
    TaskRequest {
        goal: goal.into(),
        device: device.into(),
        mode: Mode::Reasoning as i32,
        ..TaskRequest::default()
    }
}

/// The text the model was sent (every message's text, in order).
fn prompt(r: &ReceivedRequest) -> String {
    r.json()["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| match &m["content"] {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Which agent sent a request, from its prompt's first words.
fn agent_of(text: &str) -> &'static str {
    if text.starts_with("You are the planner") {
        "manager"
    } else if text.starts_with("You carry out one step") {
        "executor"
    } else if text.starts_with("You complete one task that needs no phone screen") {
        "scripter"
    } else if text.starts_with("You rewrite the content of one text field") {
        "text_manipulator"
    } else {
        "other"
    }
}

/// The prompts each agent sent, in order: `(agent, prompt)`.
pub(super) fn prompts(llm: &MockLlmServer) -> Vec<(&'static str, String)> {
    llm.requests()
        .iter()
        .map(|r| {
            let p = prompt(r);
            (agent_of(&p), p)
        })
        .collect()
}

pub(super) fn of(prompts: &[(&'static str, String)], agent: &str) -> Vec<String> {
    prompts
        .iter()
        .filter(|(a, _)| *a == agent)
        .map(|(_, p)| p.clone())
        .collect()
}

pub(super) fn act(action: &str) -> MockResponse {
    reply(&format!(
        "### Thought\nThis is the subgoal's action.\n\n### Action\n{action}\n\n### Description\nThe action."
    ))
}

pub(super) fn plan_reply(items: &str) -> MockResponse {
    reply(&format!(
        "<thought>\nNext step.\n</thought>\n<plan>\n{items}\n</plan>"
    ))
}

pub(super) fn done(success: bool, answer: &str) -> MockResponse {
    reply(&format!(
        "<thought>\nFinished.\n</thought>\n<request_accomplished success=\"{success}\">\n{answer}\n</request_accomplished>"
    ))
}

fn handoffs(events: &[TaskEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(task_event::Kind::Handoff(h)) => Some((h.from_agent.clone(), h.to_agent.clone())),
            _ => None,
        })
        .collect()
}

/// A loopback HTTP server that records every request (method, path, body) and answers each
/// with `answer(path)`: a status and either a body or a `Location` to redirect to.
struct Hook {
    addr: std::net::SocketAddr,
    got: Arc<Mutex<Vec<(String, String, String)>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl Hook {
    async fn start(answer: fn(&str) -> (u16, String)) -> Hook {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let log = got.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    // Read the head, then as much body as Content-Length says.
                    let (head, body_start) = loop {
                        let Ok(n) = s.read(&mut chunk).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break (String::from_utf8_lossy(&buf[..i]).to_string(), i + 4);
                        }
                    };
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    while buf.len() < body_start + len {
                        let Ok(n) = s.read(&mut chunk).await else {
                            return;
                        };
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    let body = String::from_utf8_lossy(&buf[body_start..]).to_string();
                    let mut first = head.lines().next().unwrap_or("").split(' ');
                    let method = first.next().unwrap_or("").to_owned();
                    let path = first.next().unwrap_or("").to_owned();
                    let (status, out) = answer(&path);
                    log.lock().unwrap().push((method, path, body));
                    let resp = if (300..400).contains(&status) {
                        format!(
                            "HTTP/1.1 {status} Redirect\r\nLocation: {out}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        )
                    } else {
                        format!(
                            "HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{out}",
                            out.len()
                        )
                    };
                    let _ = s.write_all(resp.as_bytes()).await;
                });
            }
        });
        Hook {
            addr,
            got,
            _task: task,
        }
    }

    fn requests(&self) -> Vec<(String, String, String)> {
        self.got.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reasoning_mode_plans_acts_remembers_and_answers_follow_ups() {
    if !require_adb("cross-process tests") {
        return;
    }
    let mesh = start_with(
        vec![
            // Task 1: Wi-Fi on (manager → executor → manager → executor → manager).
            plan_reply("1. Open the Settings app\n2. Tap the Wi-Fi switch"),
            act(r#"{"action": "open_app", "name_or_package": "Settings"}"#),
            plan_reply("1. Tap the Wi-Fi switch (element 5)"),
            act(r#"{"action": "tap", "index": 5}"#),
            done(true, "Wi-Fi is on"),
            // Task 2: two failed taps in a row, then the manager gives up.
            plan_reply("1. Tap the Hotspot switch"),
            act(r#"{"action": "tap", "index": 400}"#),
            plan_reply("1. Tap the Hotspot switch"),
            act(r#"{"action": "tap", "index": 401}"#),
            done(false, "There is no Hotspot switch on this screen"),
            // Task 3: a follow-up question in the conversation of task 1.
            reply("<thought>\nThe user asks about the earlier run.\n</thought>\n<direct_response>\nI turned on Wi-Fi.\n</direct_response>"),
        ],
        Extra::default(),
    )
    .await;
    let serial = mesh.serials[0].clone();
    let wifi = || {
        mesh.adb
            .shell(&serial, "settings get global wifi_on")
            .unwrap()
    };
    assert_eq!(wifi().trim(), "0");

    let first = TaskRequest {
        conversation_id: "chat-1".into(),
        ..reasoning("Turn on Wi-Fi", &serial)
    };
    let events = run(&mesh, first).await;
    let c = completed(&events);
    assert!(c.success, "{c:?}");
    assert_eq!(c.answer, "Wi-Fi is on");
    assert_eq!(c.steps, 2);
    assert_eq!(wifi().trim(), "1", "the phone's Wi-Fi setting is on");
    assert_eq!(
        handoffs(&events),
        [
            ("manager".to_owned(), "executor".to_owned()),
            ("manager".to_owned(), "executor".to_owned())
        ]
    );
    let p = prompts(&mesh.llm);
    let kinds: Vec<&str> = p.iter().map(|(a, _)| *a).collect();
    assert_eq!(
        kinds,
        ["manager", "executor", "manager", "executor", "manager"]
    );
    // The manager's second plan saw the executor's outcome; the executor saw its subgoal.
    let managers = of(&p, "manager");
    assert!(
        managers[1].contains("started com.android.settings"),
        "{}",
        managers[1]
    );
    assert!(managers[1].contains("Open the Settings app"));
    let executors = of(&p, "executor");
    assert!(executors[1].contains("Tap the Wi-Fi switch (element 5)"));
    assert!(lease_holder(&mesh, &serial).await.is_none());

    // Two executor failures in a row: the next manager request carries the error history.
    let events = run(&mesh, reasoning("Turn on the hotspot", &serial)).await;
    let c = completed(&events);
    assert!(!c.success);
    assert_eq!(c.error, "There is no Hotspot switch on this screen");
    let p = prompts(&mesh.llm);
    let managers = of(&p, "manager");
    let (second, third) = (&managers[4], &managers[5]);
    assert!(
        second.contains("FAILED") && !second.contains("## Repeated failures"),
        "{second}"
    );
    assert!(third.contains("## Repeated failures"), "{third}");
    assert!(third.contains("The last 2 attempts failed"), "{third}");
    assert!(third.contains("400") && third.contains("401"), "{third}");

    // A follow-up question in task 1's conversation: answered from it, no device action.
    let before = p.len();
    let follow = TaskRequest {
        conversation_id: "chat-1".into(),
        ..reasoning("What did you just turn on?", &serial)
    };
    let events = run(&mesh, follow).await;
    let c = completed(&events);
    assert!(c.success && c.answered_directly, "{c:?}");
    assert_eq!(c.answer, "I turned on Wi-Fi.");
    let p = prompts(&mesh.llm);
    assert_eq!(p.len(), before + 1, "one manager call, no other agent");
    let last = &p[before].1;
    assert!(last.contains("## Earlier in this conversation"), "{last}");
    assert!(last.contains("Turn on Wi-Fi") && last.contains("Wi-Fi is on"));
    assert!(
        !last.contains("Turn on the hotspot"),
        "another conversation's task leaked in"
    );
    assert!(handoffs(&events).is_empty());
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, Some(task_event::Kind::SubgoalResult(_))))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_script_posts_what_the_screen_shows_and_refused_addresses_are_reported() {
    if !require_adb("cross-process tests") {
        return;
    }
    // The webhook (allowed by the config), a redirector served as `localhost` (allowed) that
    // sends scripts on to 127.0.0.1 (not allowed), and the target it points at.
    let hook = Hook::start(|_| (200, r#"{"ok": true}"#.into())).await;
    let secret = Hook::start(|_| (200, r#"{"secret": "token"}"#.into())).await;
    static SECRET_PORT: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    SECRET_PORT.set(secret.addr.port()).unwrap();
    let redirector = Hook::start(|_| {
        (
            302,
            format!("http://127.0.0.1:{}/internal", SECRET_PORT.get().unwrap()),
        )
    })
    .await;
    let hook_url = format!("http://127.0.0.1:{}/hook", hook.addr.port());
    let redirect_url = format!("http://localhost:{}/start", redirector.addr.port());
    let toml = format!(
        "[scripter.http]\nallow_hosts = [\"127.0.0.1:{}\", \"localhost:{}\"]\n",
        hook.addr.port(),
        redirector.addr.port()
    );
    let mesh = start_with(
        vec![
            // Read the battery level in Settings, then send it to the webhook.
            plan_reply("1. Open the Settings app"),
            act(r#"{"action": "open_app", "name_or_package": "Settings"}"#),
            reply(&format!(
                "<thought>\nSettings shows Battery 87%.\n</thought>\n<add_memory>\nThe battery level is 87% (read at step 1).\n</add_memory>\n<plan>\n<script>\nPOST {{\"battery\": 87}} as JSON to {hook_url} and report the status code.\n</script>\n</plan>"
            )),
            reply(&format!(
                "I will post the value.\n```js\nconst r = await fetch(\"{hook_url}\", {{ method: \"POST\", json: {{ battery: 87 }} }});\nconsole.log(r.status, await r.text());\n```"
            )),
            reply("Posted {\"battery\": 87}; the webhook answered 200 {\"ok\": true}."),
            done(true, "Sent the battery level (87%) to the webhook; it answered 200."),
            // Second task: two fetches the address policy refuses.
            reply("<thought>\nThis needs no screen.\n</thought>\n<plan>\n<script>\nFetch http://169.254.169.254/latest/meta-data/ and the redirecting URL; report what came back.\n</script>\n</plan>"),
            reply(&format!(
                "```js\nfor (const u of [\"http://169.254.169.254/latest/meta-data/\", \"{redirect_url}\"]) {{\n  try {{ const r = await fetch(u); console.log(u, r.status); }} catch (e) {{ console.log(u, 'refused:', e.message); }}\n}}\n```"
            )),
            reply("FAILED: both requests were refused by the address policy."),
            done(false, "The scripter was not allowed to fetch those addresses."),
        ],
        Extra {
            toml: &toml,
            ..Extra::default()
        },
    )
    .await;
    let serial = mesh.serials[0].clone();
    let events = run(
        &mesh,
        reasoning("Send my battery level to the webhook", &serial),
    )
    .await;
    let c = completed(&events);
    assert!(c.success, "{c:?}");
    // The webhook received exactly the JSON, once.
    let got = hook.requests();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "POST");
    assert_eq!(got[0].1, "/hook");
    let body: serde_json::Value = serde_json::from_str(&got[0].2).unwrap();
    assert_eq!(body, serde_json::json!({"battery": 87}));
    // The value came from the screen: the manager was shown "87%" before it planned the script.
    let p = prompts(&mesh.llm);
    let managers = of(&p, "manager");
    assert!(
        managers[1].contains("\"87%\""),
        "the battery row is on the screen it saw"
    );
    // The script's outcome went back to the manager, which ended the task with it.
    assert!(
        managers[2].contains("## Result of the last delegated task"),
        "{}",
        managers[2]
    );
    assert!(managers[2].contains("the webhook answered 200"));
    assert_eq!(
        handoffs(&events),
        [
            ("manager".to_owned(), "executor".to_owned()),
            ("manager".to_owned(), "scripter".to_owned())
        ]
    );

    // The metadata address and the redirect to loopback are refused; the manager is told.
    let events = run(&mesh, reasoning("Read the cloud metadata", &serial)).await;
    assert!(!completed(&events).success);
    assert!(
        secret.requests().is_empty(),
        "the redirect target was reached"
    );
    assert_eq!(
        redirector.requests().len(),
        1,
        "the allowed first hop was made"
    );
    let p = prompts(&mesh.llm);
    let scripter = of(&p, "scripter");
    let step2 = scripter.last().unwrap();
    assert!(
        step2.contains("refused: 169.254.169.254 is a link-local/metadata address"),
        "{step2}"
    );
    assert!(
        step2.contains("127.0.0.1") && step2.matches("refused").count() >= 2,
        "{step2}"
    );
    let managers = of(&p, "manager");
    let last = managers.last().unwrap();
    assert!(last.contains("scripter failed"), "{last}");
    assert!(last.contains("refused by the address policy"), "{last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_text_task_turns_a_note_into_a_bulleted_list() {
    if !require_adb("cross-process tests") {
        return;
    }
    let mesh = start_with(
        vec![
            plan_reply("1. Open the Notes app"),
            act(r#"{"action": "open_app", "name_or_package": "Notes"}"#),
            plan_reply("1. Type \"milk, eggs, bread\" into the note field"),
            act(r#"{"action": "type_text", "text": "milk, eggs, bread", "index": 1}"#),
            plan_reply("TEXT_TASK: Turn the comma-separated items into a bulleted list, one item per line\n2. Tap Save"),
            reply("```js\nconst items = ORIGINAL.split(\",\").map(s => s.trim()).filter(s => s.length > 0)\ninput_text(items.map(s => \"- \" + s).join(\"\\n\"))\n```"),
            plan_reply("1. Tap the Save button"),
            act(r#"{"action": "tap", "index": 2}"#),
            done(true, "The note is a bulleted list and saved"),
        ],
        Extra::default(),
    )
    .await;
    let serial = mesh.serials[1].clone();
    let events = run(
        &mesh,
        reasoning("Make my shopping note a bulleted list", &serial),
    )
    .await;
    let c = completed(&events);
    assert!(c.success, "{c:?}");
    let saved = mesh
        .adb
        .shell(&serial, "cat /sdcard/Notes/note.txt")
        .unwrap();
    assert_eq!(saved, "- milk\n- eggs\n- bread");
    assert!(handoffs(&events).contains(&("manager".to_owned(), "text_manipulator".to_owned())));
    // The text manipulator was shown the field's text as ORIGINAL.
    let p = prompts(&mesh.llm);
    let text = of(&p, "text_manipulator");
    assert_eq!(text.len(), 1);
    assert!(text[0].contains("milk, eggs, bread"), "{}", text[0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn human_help_goal_changes_and_the_human_timeout() {
    if !require_adb("cross-process tests") {
        return;
    }
    let mesh = start_with(
        vec![
            // Task 1: asks a person, then uses the reply.
            reply("<thought>\nA code was sent by SMS; only the user has it.\n</thought>\n<request_human_help reason=\"a one-time code is needed\">\nTell me the code you received by SMS.\n</request_human_help>"),
            done(true, "Logged in with code 4711"),
            // Task 2: the goal changes while the executor works (its reply is slow).
            plan_reply("1. Open the Settings app"),
            act(r#"{"action": "open_app", "name_or_package": "Settings"}"#)
                .delay(Duration::from_millis(1500)),
            done(true, "Bluetooth is on"),
            // Task 3: asks a person; nobody answers.
            reply("<thought>\nA CAPTCHA.\n</thought>\n<request_human_help reason=\"a CAPTCHA must be solved\">\nSolve it on the phone.\n</request_human_help>"),
        ],
        Extra {
            gateway: "human_wait_ms = 1500",
            ..Extra::default()
        },
    )
    .await;
    let serial = mesh.serials[0].clone();
    let mut g = mesh.gateway.clone();
    let send = |id: String, kind| SendMessageRequest {
        task_id: id,
        kind: Some(kind),
    };

    // Human help: the task waits (lease kept), the reply resumes it.
    let (id, mut watch) = submit_until(&mesh, reasoning("Log in to the bank app", &serial), |e| {
        matches!(e.kind, Some(task_event::Kind::HumanHelp(_)))
    })
    .await;
    assert_eq!(task_state(&mesh, &id).await, TaskState::WaitingForHuman);
    assert_eq!(
        lease_holder(&mesh, &serial).await.as_deref(),
        Some(id.as_str())
    );
    let r = g
        .send_message(send(
            id.clone(),
            send_message_request::Kind::HumanReply("4711".into()),
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(r.accepted, "{r:?}");
    let rest = rest_of(&mut watch).await;
    let c = completed(&rest);
    assert!(c.success);
    assert_eq!(c.answer, "Logged in with code 4711");
    let p = prompts(&mesh.llm);
    assert!(p[1].1.contains("4711") && p[1].1.contains("a one-time code is needed"));

    // A goal change mid-run: the next manager call plans for the new goal.
    let (id, mut watch) = submit_until(
        &mesh,
        reasoning("Turn on Wi-Fi", &serial),
        |e| matches!(&e.kind, Some(task_event::Kind::Handoff(h)) if h.to_agent == "executor"),
    )
    .await;
    let r = g
        .send_message(send(
            id.clone(),
            send_message_request::Kind::ChangeGoal("Turn on Bluetooth instead".into()),
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(r.accepted);
    let c = completed(&rest_of(&mut watch).await).clone();
    assert!(c.success);
    let p = prompts(&mesh.llm);
    let managers = of(&p, "manager");
    let replanned = &managers[3];
    assert!(
        replanned.contains("## The request\nTurn on Bluetooth instead"),
        "{replanned}"
    );
    assert!(replanned.contains("changed the goal"), "{replanned}");
    // The history so far carries over.
    assert!(replanned.contains("Open the Settings app"), "{replanned}");

    // Nobody answers: the task fails at the timeout and frees the device.
    let events = run(&mesh, reasoning("Sign up", &serial)).await;
    let c = completed(&events);
    assert!(!c.success);
    assert!(
        c.error.contains("no human answered within 2 s"),
        "{}",
        c.error
    );
    assert!(lease_holder(&mesh, &serial).await.is_none());
}
