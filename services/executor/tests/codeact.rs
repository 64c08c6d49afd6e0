//! CodeAct runs end to end: the model's JavaScript drives the simulator through the device
//! service; errors go back to the model; variables persist; budgets end runs.
use std::time::{Duration, Instant};

use droidmesh_executor::ExecutorConfig;
use droidmesh_llm::testkit::MockResponse;
use droidmesh_proto::v1::{
    AgentEvent, AgentFinished, CodeActInput, CodeActStart, DeviceBinding, LlmOverride, agent_event,
    code_act_input,
};
use tokio_stream::StreamExt;

use crate::rig::{Rig, reply, rig, rig_provider, rig_with};

/// Leases the device and runs a CodeAct task to its end; returns every event.
pub(crate) async fn run(rig: &Rig, goal: &str, max_steps: u32) -> Vec<AgentEvent> {
    run_with(rig, goal, max_steps, None, |_| {}).await
}

/// [`run`] with the start message adjusted.
pub(crate) async fn run_with(
    rig: &Rig,
    goal: &str,
    max_steps: u32,
    human: Option<&str>,
    adjust: impl FnOnce(&mut CodeActStart),
) -> Vec<AgentEvent> {
    let (_device, lease) = rig.lease().await;
    let start = CodeActStart {
        task_id: "t-1".into(),
        goal: goal.into(),
        device: Some(DeviceBinding {
            endpoint: rig.device_ep.clone(),
            lease: Some(lease),
        }),
        max_steps,
        ..CodeActStart::default()
    };
    let mut start = start;
    adjust(&mut start);
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tx.send(CodeActInput {
        kind: Some(code_act_input::Kind::Start(start)),
    })
    .await
    .unwrap();
    let mut exec = rig.executor.clone();
    let input = tokio_stream::wrappers::ReceiverStream::new(rx);
    let mut stream = exec.run_code_act(input).await.unwrap().into_inner();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, stream.next()).await {
        let ev = ev.unwrap();
        let done = matches!(ev.kind, Some(agent_event::Kind::Finished(_)));
        // A test's human answers every request for help, when the task asks for one.
        if let (Some(agent_event::Kind::HumanHelp(_)), Some(answer)) = (&ev.kind, human) {
            tx.send(CodeActInput {
                kind: Some(code_act_input::Kind::HumanReply(answer.into())),
            })
            .await
            .unwrap();
        }
        events.push(ev);
        if done {
            break;
        }
    }
    events
}

pub(crate) fn finished(events: &[AgentEvent]) -> &AgentFinished {
    match events.last().and_then(|e| e.kind.as_ref()) {
        Some(agent_event::Kind::Finished(f)) => f,
        other => panic!("no finished event at the end: {other:?}"),
    }
}

fn user_prompt(rig: &Rig, i: usize) -> String {
    let req = &rig.llm.requests()[i];
    let body = req.json();
    body["messages"][1]["content"].to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_model_s_javascript_turns_wifi_on() {
    let rig = rig(vec![
        reply("Settings first.\n```javascript\nopen_app('Settings')\n```"),
        reply("```js\nconst wifi = ui_state.find(e => e.text === 'Wi-Fi');\ntap(wifi.index);\ncomplete(true, 'Wi-Fi is on')\n```"),
    ])
    .await;
    let events = run(&rig, "Open Settings and turn on Wi-Fi", 10).await;
    let done = finished(&events);
    assert!(done.success, "{done:?}");
    assert_eq!((done.answer.as_str(), done.steps), ("Wi-Fi is on", 2));
    assert_eq!(done.usage.unwrap().calls, 2);
    let out = rig.fleet.devices()[0].shell("settings get global wifi_on");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    let tools: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(agent_event::Kind::ToolResult(r)) if r.result.as_ref().unwrap().success => {
                Some(r.tool.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(tools, ["open_app", "tap", "complete"]);
    assert!(events.iter().any(
        |e| matches!(&e.kind, Some(agent_event::Kind::Thought(t)) if t.text == "Settings first.")
    ));
    // The second prompt shows the Settings screen and what step 1 did.
    let second = user_prompt(&rig, 1);
    assert!(
        second.contains("Wi-Fi") && second.contains("open_app"),
        "{second}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn prose_then_broken_code_are_reported_to_the_model_then_good_code_runs() {
    let rig = rig(vec![
        reply("I believe the task is already done."),
        reply("```javascript\ntap(\n```"),
        reply("```javascript\nlet n = ui_state.length;\ncomplete(true, 'saw ' + n + ' elements')\n```"),
    ])
    .await;
    let events = run(&rig, "Look at the screen", 10).await;
    let done = finished(&events);
    assert!(done.success, "{done:?}");
    assert_eq!(done.steps, 3);
    assert!(done.answer.starts_with("saw "), "{}", done.answer);
    assert!(
        user_prompt(&rig, 1).contains("no JavaScript found"),
        "{}",
        user_prompt(&rig, 1)
    );
    assert!(
        user_prompt(&rig, 2).contains("Syntax"),
        "{}",
        user_prompt(&rig, 2)
    );
    // The user reads what happened, not the instructions written for the model.
    let errors: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(agent_event::Kind::Observation(o)) => o.error.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(
        errors[0],
        "nothing ran: the model's reply held no JavaScript"
    );
    assert!(
        errors[1].starts_with("the model's code does not parse at line "),
        "{}",
        errors[1]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_ends_on_failures_gives_the_user_their_words() {
    let rig = rig(vec![]).await;
    rig.llm.set_fallback(reply("I think it is done now."));
    let events = run(&rig, "Look at the screen", 10).await;
    let done = finished(&events);
    assert!(!done.success);
    assert_eq!(
        done.answer,
        "3 steps in a row failed; the last: nothing ran: the model's reply held no JavaScript"
    );
    // The model was told what to write.
    assert!(user_prompt(&rig, 2).contains("write the next actions in a ```javascript block"));
}

#[tokio::test(flavor = "multi_thread")]
async fn variables_persist_across_steps() {
    let rig = rig(vec![
        reply("```js\nlet count = 41;\nconsole.log('set')\n```"),
        reply("```js\ncount += 1;\ncomplete(true, String(count))\n```"),
    ])
    .await;
    let events = run(&rig, "Count", 5).await;
    assert_eq!(finished(&events).answer, "42");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_step_budget_and_repeated_failures_end_runs() {
    let slow = self::rig(vec![]).await;
    slow.llm
        .set_fallback(reply("```js\nconsole.log('still looking')\n```"));
    let events = run(&slow, "Never finishes", 2).await;
    let done = finished(&events);
    assert!(!done.success);
    assert!(done.answer.contains("step limit (2)"), "{}", done.answer);

    let down = self::rig(vec![]).await;
    down.llm
        .set_fallback(MockResponse::error(500, "upstream exploded"));
    let events = run(&down, "LLM is down", 10).await;
    let done = finished(&events);
    assert!(!done.success);
    assert!(
        done.answer.contains("3 steps in a row failed"),
        "{}",
        done.answer
    );
    assert!(done.answer.contains("upstream exploded"), "{}", done.answer);

    // A refused key is not retried step after step: the run ends at the first step, saying why.
    let refused = self::rig(vec![]).await;
    refused
        .llm
        .set_fallback(MockResponse::error(401, "invalid api key"));
    let events = run(&refused, "Wrong key", 10).await;
    let done = finished(&events);
    assert!(!done.success);
    assert_eq!(done.steps, 1, "{done:?}");
    assert!(
        done.answer.contains("the model cannot be used") && done.answer.contains("invalid api key"),
        "{}",
        done.answer
    );
    assert_eq!(
        refused.llm.requests().len(),
        1,
        "401 is neither retried nor repeated"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_hangs_fails_each_step_at_its_deadline_and_the_reason_says_so() {
    // The provider would wait 30 s per attempt; the step deadline (1.5 s) cuts it short.
    let cfg = ExecutorConfig {
        step_timeout_ms: 1_000,
        step_deadline_ms: 1_500,
        ..ExecutorConfig::default()
    };
    let provider = "timeout = \"30s\"\ncall_timeout = \"60s\"";
    let rig = rig_provider(vec![], cfg, Default::default(), provider).await;
    rig.llm
        .set_fallback(reply("```js\ncomplete(true, 'late')\n```").delay(Duration::from_secs(30)));
    let started = Instant::now();
    let events = run(&rig, "Hang", 10).await;
    let took = started.elapsed();
    let done = finished(&events);
    assert!(!done.success);
    assert_eq!(done.steps, 3, "three failed steps end the run: {done:?}");
    assert!(
        done.answer.contains("3 steps in a row failed")
            && done
                .answer
                .contains("did not answer within the step deadline of 1s 500ms"),
        "{}",
        done.answer
    );
    assert!(
        took < Duration::from_secs(15),
        "bounded by 3 step deadlines: {took:?}"
    );
    assert_eq!(rig.llm.requests().len(), 3, "one request per step");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timed_out_attempt_is_not_retried_and_the_reason_gives_the_real_wait() {
    let provider = "timeout = \"300ms\"\nretry = { max_attempts = 3, initial_backoff = \"10ms\", max_backoff = \"10ms\" }";
    let rig = rig_provider(
        vec![],
        ExecutorConfig::default(),
        Default::default(),
        provider,
    )
    .await;
    rig.llm
        .set_fallback(reply("```js\ncomplete(true, 'late')\n```").delay(Duration::from_secs(30)));
    let events = run(&rig, "Slow model", 10).await;
    let done = finished(&events);
    assert!(!done.success);
    assert!(
        done.answer.contains("no reply after 3") && done.answer.contains("ms (1 attempt)"),
        "{}",
        done.answer
    );
    assert_eq!(rig.llm.requests().len(), 3, "three steps, no retries");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_last_step_stopped_by_the_code_timeout_is_named_in_the_final_reason() {
    let cfg = ExecutorConfig {
        step_timeout_ms: 300,
        ..ExecutorConfig::default()
    };
    let rig = rig_with(vec![], cfg).await;
    rig.llm.set_fallback(reply("```js\nwhile (true) {}\n```"));
    let events = run(&rig, "Spin", 2).await;
    let done = finished(&events);
    assert!(!done.success);
    assert!(
        done.answer.contains("step limit (2)") && done.answer.contains("ran longer than 300ms"),
        "{}",
        done.answer
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_typed_secret_never_reaches_a_later_prompt_or_event() {
    let secret = "hunter2-Secret";
    let secrets = std::collections::HashMap::from([("pin".to_owned(), secret.to_owned())]);
    let cfg = ExecutorConfig {
        step_timeout_ms: 5_000,
        ..ExecutorConfig::default()
    };
    let rig = crate::rig::rig_full(
        vec![
            reply("```js\nopen_app('com.droidmesh.notes')\n```"),
            reply("```js\nconst field = ui_state.find(e => e.editable);\ntype_secret('pin', field.index)\n```"),
            // The model looks at the screen, the field and the phone state in every way it can.
            reply("```js\nconsole.log(JSON.stringify(ui_state))\n```"),
            reply("```js\nconst f = ui_state.find(e => e.editable); f.text\n```"),
            reply("```js\ncomplete(true, 'typed')\n```"),
        ],
        cfg,
        secrets,
    )
    .await;
    let events = run_with(&rig, "Type the PIN", 6, None, |s| {
        s.secret_ids = vec!["pin".into()];
    })
    .await;
    assert!(finished(&events).success, "{:?}", finished(&events));
    // The phone really holds it.
    let dump = rig.fleet.devices()[0].shell("uiautomator dump /dev/tty");
    assert!(String::from_utf8_lossy(&dump.stdout).contains(secret));
    let requests = rig.llm.requests();
    assert_eq!(requests.len(), 5);
    for (i, request) in requests.iter().enumerate() {
        let body = request.json().to_string();
        assert!(!body.contains(secret), "request {i} carries the secret");
    }
    // What the model read back is the mask.
    let last = user_prompt(&rig, 4);
    assert!(
        last.contains(&"\u{2022}".repeat(secret.chars().count())),
        "{last}"
    );
    for event in &events {
        assert!(!format!("{event:?}").contains(secret), "{event:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fractional_index_is_a_type_error_the_model_sees() {
    let rig = rig(vec![
        reply("```js\ntap(2.7)\n```"),
        reply("```js\ncomplete(false, 'gave up')\n```"),
    ])
    .await;
    let events = run(&rig, "Tap something", 5).await;
    assert_eq!(finished(&events).steps, 2);
    let second = user_prompt(&rig, 1);
    assert!(
        second.contains("TypeError") && second.contains("`index` must be an integer"),
        "{second}"
    );
    // Nothing was rounded and tapped: the call never reached the tool.
    assert!(
        !events
            .iter()
            .any(|e| matches!(&e.kind, Some(agent_event::Kind::ToolCall(c)) if c.tool == "tap")),
        "{events:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_override_naming_an_unknown_provider_ends_the_run_before_any_call() {
    let rig = rig(vec![reply("```js\ncomplete(true, 'no')\n```")]).await;
    let events = run_with(&rig, "Anything", 5, None, |s| {
        s.llm = Some(LlmOverride {
            provider: "nowhere".into(),
            ..LlmOverride::default()
        });
    })
    .await;
    let done = finished(&events);
    assert!(!done.success);
    assert!(
        done.answer.contains("the model override is not usable") && done.answer.contains("nowhere"),
        "{}",
        done.answer
    );
    assert_eq!(rig.llm.request_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_for_help_carries_reason_and_instructions_and_the_reply_reaches_the_model() {
    let rig = rig(vec![
        reply("```js\nrequest_human_help('the app asks for a login code', 'read the code from the SMS and send it')\n```"),
        reply("```js\ncomplete(true, 'logged in')\n```"),
    ])
    .await;
    let events = run_with(&rig, "Log in", 5, Some("the code is 4711"), |_| {}).await;
    let done = finished(&events);
    assert!(done.success, "{done:?}");
    let help: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(agent_event::Kind::HumanHelp(h)) => Some(h.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(help.len(), 1, "{events:#?}");
    assert_eq!(help[0].agent, "codeact");
    assert_eq!(help[0].reason, "the app asks for a login code");
    assert_eq!(
        help[0].instructions,
        "read the code from the SMS and send it"
    );
    let second = user_prompt(&rig, 1);
    assert!(second.contains("the code is 4711"), "{second}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_for_help_nobody_answers_ends_the_run_at_the_deadline() {
    let rig = rig_with(
        vec![reply("```js\nrequest_human_help('a CAPTCHA')\n```")],
        ExecutorConfig {
            step_timeout_ms: 5_000,
            human_wait_ms: 1_000,
            ..ExecutorConfig::default()
        },
    )
    .await;
    let events = run(&rig, "Sign up", 5).await;
    let done = finished(&events);
    assert!(!done.success);
    assert_eq!(done.answer, "no human answered within 1 s");
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        Some(agent_event::Kind::HumanHelp(h)) if h.reason == "a CAPTCHA" && h.instructions.is_empty()
    )));
    assert_eq!(rig.llm.request_count(), 1);
}

/// Opens a CodeAct stream whose first messages are `first` (then closed) and returns the RPC's
/// refusal.
async fn refused(rig: &Rig, first: Vec<CodeActInput>) -> tonic::Status {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    for m in first {
        tx.send(m).await.unwrap();
    }
    drop(tx);
    let mut exec = rig.executor.clone();
    let input = tokio_stream::wrappers::ReceiverStream::new(rx);
    match exec.run_code_act(input).await {
        Ok(_) => panic!("the stream was accepted"),
        Err(s) => s,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_code_act_streams_are_refused_before_anything_runs() {
    let rig = rig(vec![]).await;
    let (_device, lease) = rig.lease().await;
    let start = |adjust: fn(&mut CodeActStart)| {
        let mut s = CodeActStart {
            task_id: "t-bad".into(),
            goal: "Open Settings".into(),
            device: Some(DeviceBinding {
                endpoint: rig.device_ep.clone(),
                lease: Some(lease.clone()),
            }),
            max_steps: 5,
            ..CodeActStart::default()
        };
        adjust(&mut s);
        CodeActInput {
            kind: Some(code_act_input::Kind::Start(s)),
        }
    };
    let cases: Vec<(&str, Vec<CodeActInput>, &str)> = vec![
        (
            "no message",
            vec![],
            "the input stream closed before `start`",
        ),
        (
            "a reply before start",
            vec![CodeActInput {
                kind: Some(code_act_input::Kind::HumanReply("hi".into())),
            }],
            "the first message must be `start`",
        ),
        (
            "empty goal",
            vec![start(|s| s.goal = " \n".into())],
            "goal is empty",
        ),
        (
            "too many steps",
            vec![start(|s| s.max_steps = 1_000_000)],
            "max_steps must be at most 10000, got 1000000",
        ),
        ("no device", vec![start(|s| s.device = None)], "device"),
    ];
    for (name, first, says) in cases {
        let s = refused(&rig, first).await;
        assert_eq!(s.code(), tonic::Code::InvalidArgument, "{name}: {s:?}");
        assert!(
            s.message().contains(says),
            "{name}: '{}' does not say '{says}'",
            s.message()
        );
    }
    assert_eq!(
        rig.llm.request_count(),
        0,
        "a refused stream called the model"
    );
}

/// Starts take turns (`start_places`): with one place, a run whose first device read hangs
/// keeps the place for `start_hold_ms` and no longer; the run queued behind it then starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_start_stuck_on_its_device_holds_back_the_next_start_for_the_hold_only() {
    let hold = Duration::from_millis(600);
    // A device service that accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cfg = ExecutorConfig {
        step_timeout_ms: 5_000,
        device_call_timeout_ms: 30_000,
        start_places: Some(1),
        start_hold_ms: u64::try_from(hold.as_millis()).unwrap(),
        device_endpoints: vec![format!("http://{}", silent.local_addr().unwrap())],
        ..ExecutorConfig::default()
    };
    let rig = rig_with(vec![], cfg).await;
    rig.llm
        .set_fallback(reply("```js\ncomplete(true, 'done')\n```"));
    let stuck = CodeActStart {
        task_id: "t-stuck".into(),
        goal: "Wait on a silent device".into(),
        device: Some(DeviceBinding {
            endpoint: format!("http://{}", silent.local_addr().unwrap()),
            lease: Some(droidmesh_proto::v1::LeaseRef {
                serial: "silent".into(),
                lease_id: "l-silent".into(),
            }),
        }),
        max_steps: 1,
        ..CodeActStart::default()
    };
    let (stuck_tx, rx) = tokio::sync::mpsc::channel(1);
    stuck_tx
        .send(CodeActInput {
            kind: Some(code_act_input::Kind::Start(stuck)),
        })
        .await
        .unwrap();
    let mut exec = rig.executor.clone();
    let _stuck_events = exec
        .run_code_act(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap();
    // Its first device read has begun: it holds the place from here on (at least).
    let (_held_open, _) = tokio::time::timeout(Duration::from_secs(10), silent.accept())
        .await
        .expect("the stuck run never called its device")
        .unwrap();
    let queued = Instant::now();
    let events = run(&rig, "Start behind the stuck one", 1).await;
    assert!(finished(&events).success, "{:?}", finished(&events));
    let first_call = rig.llm.arrivals()[0];
    let waited = first_call.duration_since(queued);
    // The stuck run took its place before `queued`, up to a few tens of ms before.
    assert!(
        waited >= hold - Duration::from_millis(200),
        "the next start went ahead while the place was held: its model call came {waited:?} after it queued"
    );
    assert!(
        waited < Duration::from_secs(10),
        "the next start waited on the stuck device, not the hold: {waited:?}"
    );
}
