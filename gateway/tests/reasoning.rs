//! Reasoning mode through the public API, with scripted agents: the routing loop, results back
//! to the manager, error history after repeated failures, handoffs, agents that are down,
//! limits. Human help and control of a running task are in `reasoning_control`.
use droidmesh_proto::v1::{
    ActionResult, FileDetail, GetTaskRequest, ManipulateResponse, Mode, SendMessageRequest, Task,
    TaskEvent, TaskRequest, TaskState, send_message_request, subgoal::Kind, task_event,
};
use tonic::Code;

use super::harness::*;
use super::minds::{self, Act, Minds, Script, accomplished, fail, ok, plan};

pub(super) fn reasoning(goal: &str, device: &str) -> TaskRequest {
    TaskRequest {
        goal: goal.into(),
        device: device.into(),
        mode: Mode::Reasoning as i32,
        ..TaskRequest::default()
    }
}

pub(super) async fn run_to_end(stack: &Stack, req: TaskRequest) -> Vec<TaskEvent> {
    let mut g = stack.gateway.clone();
    let s = g.run_task(req).await.unwrap().into_inner();
    tokio::time::timeout(std::time::Duration::from_secs(60), collect(s))
        .await
        .expect("the task did not end within 60 s")
}

pub(super) async fn task(stack: &Stack, id: &str) -> Task {
    let mut g = stack.gateway.clone();
    g.get_task(GetTaskRequest { task_id: id.into() })
        .await
        .unwrap()
        .into_inner()
}

pub(super) async fn submit(stack: &Stack, req: TaskRequest) -> String {
    let mut g = stack.gateway.clone();
    g.submit_task(req).await.unwrap().into_inner().task_id
}

pub(super) async fn wait_state(stack: &Stack, id: &str, want: TaskState) -> Task {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let t = task(stack, id).await;
        if t.state == want as i32 {
            return t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {id} never reached {want:?}; it is {:?}",
            TaskState::try_from(t.state)
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

pub(super) async fn send(stack: &Stack, id: &str, kind: send_message_request::Kind) -> bool {
    let mut g = stack.gateway.clone();
    g.send_message(SendMessageRequest {
        task_id: id.into(),
        kind: Some(kind),
    })
    .await
    .unwrap()
    .into_inner()
    .accepted
}

pub(super) fn kinds(events: &[TaskEvent]) -> Vec<&'static str> {
    events
        .iter()
        .filter_map(|e| e.kind.as_ref())
        .map(|k| match k {
            task_event::Kind::Status(_) => "status",
            task_event::Kind::Plan(_) => "plan",
            task_event::Kind::Thought(_) => "thought",
            task_event::Kind::Code(_) => "code",
            task_event::Kind::ToolCall(_) => "tool_call",
            task_event::Kind::ToolResult(_) => "tool_result",
            task_event::Kind::Observation(_) => "observation",
            task_event::Kind::Screenshot(_) => "screenshot",
            task_event::Kind::Handoff(_) => "handoff",
            task_event::Kind::HumanHelp(_) => "human_help",
            task_event::Kind::Message(_) => "message",
            task_event::Kind::Usage(_) => "usage",
            task_event::Kind::Completed(_) => "completed",
            task_event::Kind::StepStarted(_) => "step",
            task_event::Kind::SubgoalResult(_) => "subgoal_result",
        })
        .collect()
}

/// Ground truth, read the way one reads a phone: `settings get global wifi_on`.
pub(super) fn wifi_on(shared: &Shared, serial: &str) -> bool {
    let out = shared
        .adb
        .shell(serial, "settings get global wifi_on")
        .unwrap();
    out.trim() == "1"
}

#[tokio::test(flavor = "multi_thread")]
async fn wifi_on_through_manager_executor_manager() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    let serial = shared.serials[9].clone();
    // The device starts on the launcher; put Settings in front.
    minds.plan(plan(&[
        (Kind::Action, "Open the Settings app"),
        (Kind::Action, "Tap the Wi-Fi switch"),
    ]));
    minds.act(Act::Result(ok("opened Settings")));
    minds.plan(plan(&[(Kind::Action, "Tap the Wi-Fi switch")]));
    minds.act(Act::TapText("Wi-Fi".into()));
    minds.plan(accomplished(true, "Wi-Fi is on"));
    // Settings must really be open for the tap to land: open it as the "opened Settings" act
    // claims (through the device service, outside the gateway).
    open_settings(&stack, &serial).await;
    let before = wifi_on(shared, &serial);

    let req = TaskRequest {
        stream_screenshots: true,
        ..reasoning("Turn on Wi-Fi", &serial)
    };
    let events = run_to_end(&stack, req).await;
    let done = completed(&events);
    assert!(done.success, "{done:?}");
    assert_eq!(done.answer, "Wi-Fi is on");
    // The screen after each subgoal, as a PNG.
    let shots: Vec<&[u8]> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(task_event::Kind::Screenshot(s)) => Some(s.png.as_slice()),
            _ => None,
        })
        .collect();
    assert_eq!(shots.len(), 2);
    assert!(shots.iter().all(|p| p.starts_with(b"\x89PNG")));
    assert_eq!(done.steps, 2);
    assert_ne!(wifi_on(shared, &serial), before, "the tap toggled Wi-Fi");

    // manager → executor → manager → executor → manager: each subgoal a handoff and a result.
    let k = kinds(&events);
    assert_eq!(k.iter().filter(|k| **k == "handoff").count(), 2, "{k:?}");
    assert_eq!(k.iter().filter(|k| **k == "subgoal_result").count(), 2);
    assert_eq!(k.iter().filter(|k| **k == "plan").count(), 2);
    let handoff = events
        .iter()
        .find_map(|e| match &e.kind {
            Some(task_event::Kind::Handoff(h)) => Some(h.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        (handoff.from_agent.as_str(), handoff.to_agent.as_str()),
        ("manager", "executor")
    );
    assert_eq!(handoff.reason, "Open the Settings app");

    // The manager saw each outcome; the executor got the plan and its subgoal.
    let plans = minds.plan_requests();
    assert_eq!(plans.len(), 3);
    assert!(plans[0].action_history.is_empty());
    assert_eq!(plans[1].action_history.len(), 1);
    assert!(plans[1].action_history[0].success);
    assert_eq!(
        plans[1].previous_plan,
        "1. Open the Settings app\n2. Tap the Wi-Fi switch"
    );
    assert_eq!(plans[2].action_history.len(), 2);
    assert!(plans.iter().all(|p| p.error_history.is_empty()));
    let acts = minds.act_requests();
    assert_eq!(acts[1].subgoal, "Tap the Wi-Fi switch");
    assert_eq!(acts[1].instruction, "Turn on Wi-Fi");
    assert_eq!(acts[1].action_history.len(), 1);
    assert!(acts[1].device.as_ref().unwrap().lease.is_some());
    // Usage from every agent call is on the task; the lease is gone.
    let id = &events[0].task_id;
    let t = task(&stack, id).await;
    assert_eq!(t.usage.unwrap().calls, 5);
    assert!(holder(&stack, &serial).await.is_none());
}

pub(super) async fn open_settings(stack: &Stack, serial: &str) {
    use droidmesh_proto::v1::{
        AcquireLeaseRequest, LeaseRef, ReleaseLeaseRequest, StartAppRequest, start_app_request,
    };
    let mut d = stack.device.clone();
    let lease = d
        .acquire_lease(AcquireLeaseRequest {
            serial: serial.into(),
            holder: "test-setup".into(),
            ttl_ms: 5_000,
        })
        .await
        .unwrap()
        .into_inner();
    let r = LeaseRef {
        serial: serial.into(),
        lease_id: lease.lease_id,
    };
    d.start_app(StartAppRequest {
        lease: Some(r.clone()),
        app: Some(start_app_request::App::Label("Settings".into())),
        activity: String::new(),
    })
    .await
    .unwrap();
    d.release_lease(ReleaseLeaseRequest { lease: Some(r) })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn two_failures_in_a_row_put_the_error_history_in_front_of_the_manager() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    for _ in 0..3 {
        minds.plan(plan(&[(Kind::Action, "Tap the Bluetooth switch")]));
    }
    minds.act(Act::Result(fail("element 42 does not exist")));
    minds.act(Act::Result(fail("element 43 does not exist")));
    minds.act(Act::Result(ok("tapped Bluetooth")));
    minds.plan(accomplished(false, "Bluetooth could not be reached"));

    let events = run_to_end(&stack, reasoning("Toggle Bluetooth", &shared.serials[10])).await;
    let done = completed(&events);
    assert!(!done.success);
    assert_eq!(done.error, "Bluetooth could not be reached");
    let plans = minds.plan_requests();
    assert_eq!(plans.len(), 4);
    // One failure: history only. Two in a row: the error history, both attempts with feedback.
    assert!(plans[1].error_history.is_empty());
    assert_eq!(plans[2].error_history.len(), 2);
    assert_eq!(
        plans[2].error_history[0].feedback,
        "element 42 does not exist"
    );
    assert_eq!(
        plans[2].error_history[1].feedback,
        "element 43 does not exist"
    );
    assert!(plans[2].error_history.iter().all(|e| !e.success));
    // A success clears it.
    assert!(plans[3].error_history.is_empty());
    assert_eq!(plans[3].action_history.len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn script_and_text_subgoals_reach_their_agents_and_results_come_back() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    minds.plan(plan(&[
        (
            Kind::Script,
            "Fetch the forecast and save it to forecast.json",
        ),
        (Kind::TextTask, "Put the forecast at the top"),
    ]));
    let mut scripted = ok("fetched the forecast");
    scripted.files.push(FileDetail {
        path: "/tmp/ws/t/forecast.json".into(),
        name: "forecast.json".into(),
        size_bytes: 120,
        mime_type: "application/json".into(),
        location: "host".into(),
    });
    minds.script(Script::Finish(scripted, "Sunny, 21 °C".into()));
    minds.plan(plan(&[(Kind::TextTask, "Put the forecast at the top")]));
    minds.text(ManipulateResponse {
        result: Some(ok("rewrote the focused field")),
        text_to_type: "Sunny, 21 °C\nnotes".into(),
        code_ran: "input_text('Sunny, 21 °C\\n' + ORIGINAL)".into(),
        attempts: 1,
        usage: None,
    });
    minds.plan(accomplished(true, "The forecast is in the note"));

    let events = run_to_end(
        &stack,
        reasoning("Put the forecast in my note", &shared.serials[11]),
    )
    .await;
    assert!(completed(&events).success);
    let scripts = minds.script_requests.lock().unwrap().clone();
    assert_eq!(scripts.len(), 1);
    assert_eq!(
        scripts[0].task,
        "Fetch the forecast and save it to forecast.json"
    );
    assert_eq!(scripts[0].instruction, "Put the forecast in my note");
    let texts = minds.text_requests.lock().unwrap().clone();
    assert_eq!(texts.len(), 1);
    assert!(texts[0].apply && texts[0].original.is_none());
    assert_eq!(texts[0].subgoal, "Put the forecast at the top");
    assert!(texts[0].device.as_ref().unwrap().lease.is_some());
    // The manager sees the scripter's answer and file.
    let plans = minds.plan_requests();
    assert!(
        plans[1].last_handoff_result.contains("Sunny, 21 °C"),
        "{}",
        plans[1].last_handoff_result
    );
    assert!(plans[1].last_handoff_result.contains("forecast.json"));
    assert_eq!(plans[1].files.len(), 1);
    assert!(
        plans[2]
            .last_handoff_result
            .contains("text_manipulator finished")
    );
    // The task carries the file; the scripter's stream was relayed.
    let t = task(&stack, &events[0].task_id).await;
    assert_eq!(t.files.len(), 1);
    assert_eq!(completed(&events).files.len(), 1);
    let handoffs: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(task_event::Kind::Handoff(h)) => Some(h.to_agent.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(handoffs, ["scripter", "text_manipulator"]);
    assert!(events.iter().any(|e| matches!(&e.kind,
        Some(task_event::Kind::StepStarted(s)) if s.agent == "scripter")));
    assert!(events.iter().any(|e| matches!(&e.kind,
        Some(task_event::Kind::Code(c)) if c.agent == "text_manipulator")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_requested_handoff_goes_to_the_suggested_agent_with_its_context() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    minds.plan(plan(&[(
        Kind::Action,
        "Send today's exchange rate to the webhook",
    )]));
    let context = droidmesh_proto::json_to_struct(&serde_json::json!({
        "subgoal": "Send today's exchange rate to the webhook",
        "url": "https://hooks.example/rates"
    }));
    minds.act(Act::Result(ActionResult {
        success: true,
        action_taken: "handed over".into(),
        handoff_requested: true,
        suggested_agent: Some("scripter".into()),
        handoff_reason: Some("needs no screen".into()),
        handoff_context: Some(context.clone()),
        ..ActionResult::default()
    }));
    minds.script(Script::Finish(ok("posted the rate"), "posted 1.08".into()));
    minds.plan(accomplished(true, "sent"));

    let events = run_to_end(&stack, reasoning("Send the rate", &shared.serials[12])).await;
    assert!(completed(&events).success);
    let scripts = minds.script_requests.lock().unwrap().clone();
    assert_eq!(scripts.len(), 1);
    assert_eq!(scripts[0].handoff_context, Some(context));
    assert_eq!(scripts[0].task, "Send today's exchange rate to the webhook");
    let handoffs: Vec<(String, String, String)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(task_event::Kind::Handoff(h)) => {
                Some((h.from_agent.clone(), h.to_agent.clone(), h.reason.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        handoffs[1],
        (
            "executor".into(),
            "scripter".into(),
            "needs no screen".into()
        )
    );
    // Both results reach the manager, oldest first.
    let plans = minds.plan_requests();
    let agents: Vec<&str> = plans[1]
        .action_history
        .iter()
        .map(|a| a.agent.as_str())
        .collect();
    assert_eq!(agents, ["executor", "scripter"]);
    assert_eq!(plans[1].action_history[1].feedback, "posted 1.08");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_is_down_or_dies_is_an_observation_for_the_manager() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), true).await;
    minds.plan(plan(&[(Kind::Script, "Fetch the rate")]));
    minds.plan(accomplished(false, "the scripter is down"));
    let events = run_to_end(&stack, reasoning("Get the rate", &shared.serials[18])).await;
    assert_eq!(completed(&events).error, "the scripter is down");
    let plans = minds.plan_requests();
    let seen = &plans[1].action_history[0];
    assert!(!seen.success);
    assert_eq!(seen.agent, "scripter");
    assert!(
        seen.feedback.contains("scripter at http://127.0.0.1:")
            && seen.feedback.contains("could not be reached"),
        "{}",
        seen.feedback
    );
    assert!(plans[1].last_handoff_result.contains("scripter failed"));

    // A scripter killed mid-run: its stream breaks; the manager is told.
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    minds.plan(plan(&[(Kind::Script, "Fetch the rate")]));
    minds.script(Script::Die);
    minds.plan(accomplished(false, "gave up"));
    let events = run_to_end(&stack, reasoning("Get the rate", &shared.serials[18])).await;
    assert!(!completed(&events).success);
    let plans = minds.plan_requests();
    let seen = &plans[1].action_history[0];
    assert!(
        seen.feedback.contains("broke off") && seen.feedback.contains("went away"),
        "{}",
        seen.feedback
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unusable_manager_replies_are_shown_to_it_then_fail_the_task() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    for _ in 0..3 {
        minds.plan(minds::unusable());
    }
    let events = run_to_end(&stack, reasoning("Do it", &shared.serials[19])).await;
    let done = completed(&events);
    assert!(!done.success);
    assert!(
        done.error.contains("could not be used 3 times in a row"),
        "{}",
        done.error
    );
    let plans = minds.plan_requests();
    assert_eq!(plans.len(), 3);
    assert!(
        plans[1]
            .notes
            .iter()
            .any(|n| n.contains("could not be used") && n.contains("no tags"))
    );
    assert!(minds.act_requests().is_empty());
    assert_eq!(
        kinds(&events)
            .iter()
            .filter(|k| **k == "observation")
            .count(),
        3
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_step_limit_bounds_the_loop_and_a_dead_manager_fails_the_task() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    *minds.plan_fallback.lock().unwrap() = Some(plan(&[(Kind::Action, "Scroll down")]));
    for _ in 0..3 {
        minds.act(Act::Result(ok("scrolled")));
    }
    let req = TaskRequest {
        max_steps: Some(2),
        ..reasoning("Find the end", &shared.serials[20])
    };
    let events = run_to_end(&stack, req).await;
    let done = completed(&events);
    assert!(!done.success);
    assert!(done.error.contains("step limit (2)"), "{}", done.error);
    assert_eq!(minds.act_requests().len(), 2);

    // A manager with nothing to say (INTERNAL) fails the task, naming it.
    *minds.plan_fallback.lock().unwrap() = None;
    let events = run_to_end(&stack, reasoning("Anything", &shared.serials[20])).await;
    let done = completed(&events);
    assert!(
        done.error
            .starts_with("the manager could not plan: manager failed"),
        "{}",
        done.error
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_reasoning_requests_are_refused() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    let mut g = stack.gateway.clone();
    let long = TaskRequest {
        conversation_id: "c".repeat(200),
        ..reasoning("Hi", &shared.serials[21])
    };
    let e = g.submit_task(long).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("conversation_id"), "{}", e.message());
    let e = g
        .submit_task(TaskRequest {
            mode: 7,
            ..reasoning("Hi", &shared.serials[21])
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(minds.plan_requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subgoal_no_agent_takes_is_sent_back_to_the_manager() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let stack = reasoning_stack(shared, &minds, test_config(), false).await;
    minds.plan(plan(&[(Kind::Unspecified, "Think about it")]));
    minds.plan(plan(&[(Kind::Done, "DONE")]));
    minds.plan(accomplished(true, "nothing needed doing"));
    let events = run_to_end(&stack, reasoning("Relax", &shared.serials[22])).await;
    let done = completed(&events);
    assert!(done.success, "{done:?}");
    assert_eq!(done.steps, 0);
    assert!(minds.act_requests().is_empty());
    let plans = minds.plan_requests();
    assert!(
        plans[1]
            .notes
            .iter()
            .any(|n| n.contains("Think about it") && n.contains("no kind")),
        "{:?}",
        plans[1].notes
    );
    assert!(
        plans[2]
            .notes
            .iter()
            .any(|n| n.contains("DONE") && n.contains("<request_accomplished>")),
        "{:?}",
        plans[2].notes
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_does_not_answer_in_time_is_a_failed_subgoal() {
    let Some(shared) = shared() else { return };
    let minds = Minds::new();
    let cfg = droidmesh_gateway::GatewayConfig {
        agent_call_timeout_ms: 300,
        ..test_config()
    };
    let stack = reasoning_stack(shared, &minds, cfg, false).await;
    minds.plan(plan(&[(Kind::Action, "Open Settings")]));
    // Held and never released: the executor never answers.
    minds.act(Act::Hold(ok("too late")));
    minds.plan(accomplished(false, "the executor is stuck"));
    let events = run_to_end(&stack, reasoning("Open Settings", &shared.serials[23])).await;
    assert_eq!(completed(&events).error, "the executor is stuck");
    let seen = &minds.plan_requests()[1].action_history[0];
    assert!(!seen.success);
    assert_eq!(
        seen.feedback,
        "executor did not answer in time: no answer within 300 ms"
    );
    assert!(holder(&stack, &shared.serials[23]).await.is_none());
}
