//! Task lifecycle through the public API: bad input, a run that drives a simulator, structured
//! output, busy devices, cancel, stop, agent failures, resumable watching, human help.
use std::time::Duration;

use droidmesh_proto::v1::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest, TaskState,
    WatchTaskRequest, send_message_request, task_event,
};
use tokio_stream::StreamExt;
use tonic::Code;

use super::harness::*;

async fn state_of(stack: &Stack, id: &str) -> TaskState {
    let mut g = stack.gateway.clone();
    let t = g
        .get_task(GetTaskRequest { task_id: id.into() })
        .await
        .unwrap()
        .into_inner();
    TaskState::try_from(t.state).unwrap()
}

async fn wait_for(stack: &Stack, id: &str, want: TaskState) {
    for _ in 0..200 {
        if state_of(stack, id).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "task {id} never reached {want:?}; it is {:?}",
        state_of(stack, id).await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_and_create_no_task() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let mut g = stack.gateway.clone();
    let serial = &shared.serials[0];
    let err = g.submit_task(request("  ", serial)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("goal is empty"), "{}", err.message());
    let mut r = request("do it", serial);
    r.max_steps = Some(0);
    let err = g.submit_task(r).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("max_steps must be between 1 and"),
        "{}",
        err.message()
    );
    let mut r = request("do it", serial);
    r.output_schema = Some(r#"{"type": "nonsense"}"#.into());
    let err = g.submit_task(r).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("not a valid JSON Schema"),
        "{}",
        err.message()
    );
    let err = g
        .submit_task(request("do it", "no-such-phone-7"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(
        err.message().contains("no-such-phone-7"),
        "{}",
        err.message()
    );
    let tasks = g
        .list_tasks(ListTasksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .summaries;
    assert!(tasks.is_empty(), "{tasks:?}");
    let err = g
        .get_task(GetTaskRequest {
            task_id: "task-nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_drives_its_device_under_its_lease_and_releases_it() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let serial = &shared.serials[0];
    let before = shared
        .adb
        .shell(serial, "settings get global wifi_on")
        .unwrap();
    let mut g = stack.gateway.clone();
    let events = collect(
        g.run_task(request("turn the wifi on", serial))
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let done = completed(&events);
    assert!(done.success, "{done:?}");
    assert_eq!(done.answer, "Wi-Fi is on");
    assert_eq!(done.steps, 2);
    let tools: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(task_event::Kind::ToolResult(r)) => Some(r.tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tools, ["open_app", "tap"]);
    let after = shared
        .adb
        .shell(serial, "settings get global wifi_on")
        .unwrap();
    assert_ne!(before.trim(), after.trim());
    let task = g
        .get_task(GetTaskRequest {
            task_id: events[0].task_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(task.state, TaskState::Succeeded as i32);
    assert_eq!(&task.device, serial);
    let usage = task.usage.unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.calls),
        (200, 40, 2)
    );
    assert_eq!(
        holder(&stack, serial).await,
        None,
        "the lease was not released"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_is_structured_to_the_schema() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    // The scripted manager keys the answer by the schema's first required property, so the
    // result shows which schema reached it.
    let mut r = request("answer: Barbara Liskov", &shared.serials[1]);
    r.output_schema = Some(
        r#"{"type":"object","properties":{"inventor":{"type":"string"}},"required":["inventor"]}"#
            .into(),
    );
    let mut g = stack.gateway.clone();
    let events = collect(g.run_task(r).await.unwrap().into_inner()).await;
    let done = completed(&events);
    assert!(done.success, "{done:?}");
    let json: serde_json::Value =
        serde_json::from_str(done.structured_output.as_deref().unwrap()).unwrap();
    assert_eq!(json, serde_json::json!({"inventor": "Barbara Liskov"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_device_is_refused_or_queued() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let serial = &shared.serials[2];
    let mut g = stack.gateway.clone();
    let first = g
        .submit_task(request("slow work", serial))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    wait_for(&stack, &first, TaskState::Running).await;
    let err = g
        .submit_task(request("answer: x", serial))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains(&first) && err.message().contains("wait_for_device"),
        "{}",
        err.message()
    );
    let mut queued = request("answer: queued", serial);
    queued.wait_for_device = true;
    let second = g.submit_task(queued).await.unwrap().into_inner().task_id;
    // Refused its lease, the queued task says it waits, and waits.
    watch_until(&stack, &second, |e| {
        matches!(&e.kind, Some(task_event::Kind::Status(s))
            if s.detail.starts_with("waiting for a device"))
    })
    .await;
    assert_eq!(state_of(&stack, &second).await, TaskState::Pending);
    g.cancel_task(CancelTaskRequest {
        task_id: first.clone(),
        reason: String::new(),
    })
    .await
    .unwrap();
    wait_for(&stack, &second, TaskState::Succeeded).await;
    assert_eq!(holder(&stack, serial).await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_mid_run_ends_the_task_and_frees_the_device() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let serial = &shared.serials[3];
    let mut g = stack.gateway.clone();
    let id = g
        .submit_task(request("slow work", serial))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    wait_for(&stack, &id, TaskState::Running).await;
    assert_eq!(holder(&stack, serial).await.as_deref(), Some(id.as_str()));
    // Cancelled once it has taken a step.
    watch_until(&stack, &id, |e| {
        matches!(e.kind, Some(task_event::Kind::StepStarted(_)))
    })
    .await;
    let task = g
        .cancel_task(CancelTaskRequest {
            task_id: id.clone(),
            reason: "changed my mind".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(task.state, TaskState::Cancelled as i32);
    assert_eq!(task.error, "changed my mind");
    assert!(task.steps >= 1);
    assert_eq!(holder(&stack, serial).await, None);
    // The log ends with the completed event.
    let events = collect(
        g.watch_task(WatchTaskRequest {
            task_id: id,
            from_seq: 1,
        })
        .await
        .unwrap()
        .into_inner(),
    )
    .await;
    assert!(!completed(&events).success);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_message_ends_the_task_after_its_step() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let serial = &shared.serials[4];
    let mut g = stack.gateway.clone();
    let id = g
        .submit_task(request("slow work", serial))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    wait_for(&stack, &id, TaskState::Running).await;
    let reply = g
        .send_message(SendMessageRequest {
            task_id: id.clone(),
            kind: Some(send_message_request::Kind::Stop("enough".into())),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(reply.accepted, "{reply:?}");
    wait_for(&stack, &id, TaskState::Cancelled).await;
    assert_eq!(holder(&stack, serial).await, None);
    let late = g
        .send_message(SendMessageRequest {
            task_id: id,
            kind: Some(send_message_request::Kind::Note("hi".into())),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        !late.accepted && late.detail.contains("already ended"),
        "{late:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_executor_that_fails_or_is_gone_fails_the_task_and_frees_the_device() {
    let Some(shared) = shared() else { return };
    let serial = &shared.serials[5];
    let stack1 = stack(shared, None).await;
    let mut g = stack1.gateway.clone();
    let events = collect(
        g.run_task(request("crash now", serial))
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    let done = completed(&events);
    assert!(!done.success);
    assert!(
        done.error.contains("executor is unavailable") && done.error.contains("went away"),
        "{}",
        done.error
    );
    assert_eq!(holder(&stack1, serial).await, None);

    // Nothing listens at the executor endpoint.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let stack2 = stack(shared, Some(dead)).await;
    let mut g = stack2.gateway.clone();
    let events = collect(
        g.run_task(request("answer: x", serial))
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    let done = completed(&events);
    assert!(!done.success);
    assert!(done.error.contains("executor"), "{}", done.error);
    assert_eq!(holder(&stack2, serial).await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_reconnects_gets_every_event_exactly_once() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let mut g = stack.gateway.clone();
    // 40 steps of 20 ms: still running when the first watcher goes away.
    let id = g
        .submit_task(request("count:40", &shared.serials[6]))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let mut first = g
        .watch_task(WatchTaskRequest {
            task_id: id.clone(),
            from_seq: 1,
        })
        .await
        .unwrap()
        .into_inner();
    let mut seen = Vec::new();
    while seen.len() < 6 {
        seen.push(first.next().await.unwrap().unwrap());
    }
    drop(first);
    assert_eq!(state_of(&stack, &id).await, TaskState::Running);
    let from = seen.last().unwrap().seq + 1;
    let rest = collect(
        g.watch_task(WatchTaskRequest {
            task_id: id.clone(),
            from_seq: from,
        })
        .await
        .unwrap()
        .into_inner(),
    )
    .await;
    seen.extend(rest);
    let seqs: Vec<u64> = seen.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seen.len() as u64).collect::<Vec<_>>());
    // The watcher that went away did not cancel the task: it ran to its own end.
    let done = completed(&seen);
    assert!(done.success, "{done:?}");
    assert_eq!(done.answer, "counted to 40");
    let task = g
        .get_task(GetTaskRequest { task_id: id })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(task.state, TaskState::Succeeded as i32);
    assert_eq!(task.last_seq, seen.len() as u64);
}

#[tokio::test(flavor = "multi_thread")]
async fn human_help_pauses_the_task_until_a_reply() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let mut g = stack.gateway.clone();
    let id = g
        .submit_task(request("needs help", &shared.serials[7]))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    wait_for(&stack, &id, TaskState::WaitingForHuman).await;
    let reply = g
        .send_message(SendMessageRequest {
            task_id: id.clone(),
            kind: Some(send_message_request::Kind::HumanReply("alice".into())),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(reply.accepted, "{reply:?}");
    wait_for(&stack, &id, TaskState::Succeeded).await;
    let task = g
        .get_task(GetTaskRequest {
            task_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(task.answer, "used alice");
    // A watcher sees the wait and the resumption as status changes around the request.
    let s = g
        .watch_task(WatchTaskRequest {
            task_id: id,
            from_seq: 1,
        })
        .await
        .unwrap()
        .into_inner();
    let details: Vec<(i32, String)> = collect(s)
        .await
        .into_iter()
        .filter_map(|e| match e.kind {
            Some(task_event::Kind::Status(s)) => Some((s.state, s.detail)),
            Some(task_event::Kind::HumanHelp(h)) => Some((-1, h.reason)),
            _ => None,
        })
        .collect();
    let waiting = details
        .iter()
        .position(|(s, d)| *s == TaskState::WaitingForHuman as i32 && d.contains("which account?"))
        .expect("a waiting status");
    assert_eq!(details[waiting + 1], (-1, "which account?".to_owned()));
    assert_eq!(
        details[waiting + 2],
        (TaskState::Running as i32, "a human replied".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_task_client_that_disconnects_cancels_its_task() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let serial = &shared.serials[8];
    let mut g = stack.gateway.clone();
    let mut s = g
        .run_task(request("slow work", serial))
        .await
        .unwrap()
        .into_inner();
    let first = s.next().await.unwrap().unwrap();
    s.next().await.unwrap().unwrap();
    drop(s);
    wait_for(&stack, &first.task_id, TaskState::Cancelled).await;
    assert_eq!(holder(&stack, serial).await, None);
}
