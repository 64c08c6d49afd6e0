//! What the gateway keeps is bounded: ListTasks pages of summaries, ended tasks forgotten by
//! count and by age (never a running one), event logs cut to their newest events, the wait
//! for a device cut off at its deadline.
use std::time::Duration;

use droidmesh_gateway::GatewayConfig;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest,
    Task, TaskState, WatchTaskRequest, send_message_request, task_event,
};
use prost::Message as _;
use tonic::Code;

use super::harness::*;

async fn get(stack: &Stack, id: &str) -> Result<Task, tonic::Status> {
    let mut g = stack.gateway.clone();
    g.get_task(GetTaskRequest { task_id: id.into() })
        .await
        .map(|r| r.into_inner())
}

async fn run(stack: &Stack, goal: &str, serial: &str) -> String {
    let mut g = stack.gateway.clone();
    let events = collect(
        g.run_task(request(goal, serial))
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    assert!(completed(&events).success, "{:?}", completed(&events));
    events[0].task_id.clone()
}

async fn wait_until(what: &str, mut ok: impl AsyncFnMut() -> bool) {
    for _ in 0..400 {
        if ok().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{what} did not happen within 10 s");
}

#[tokio::test(flavor = "multi_thread")]
async fn list_tasks_pages_summaries_without_requests() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let mut g = stack.gateway.clone();
    let long = format!("{} answer: ok", "x".repeat(60_000));
    let mut ids = Vec::new();
    for _ in 0..40 {
        let mut r = request(&long, "");
        r.wait_for_device = true;
        ids.push(g.submit_task(r).await.unwrap().into_inner().task_id);
    }
    let ended = |r: &droidmesh_proto::v1::ListTasksResponse| {
        r.summaries
            .iter()
            .filter(|s| s.state == TaskState::Succeeded as i32)
            .count()
    };
    wait_until("40 tasks ending", async || {
        let r = g
            .list_tasks(ListTasksRequest {
                page_size: 100,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        ended(&r) == 40
    })
    .await;
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = Vec::new();
    loop {
        let reply = g
            .list_tasks(ListTasksRequest {
                page_size: 15,
                page_token: token.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        // 40 goals of 60 kB echoed whole would be 2.4 MB; summaries are a few kB.
        assert!(reply.encoded_len() < 16 * 1024, "{}", reply.encoded_len());
        #[allow(deprecated)]
        let whole = reply.tasks.len();
        assert_eq!(whole, 0);
        pages.push(reply.summaries.len());
        for s in &reply.summaries {
            assert_eq!(s.goal.chars().count(), 201, "{}", s.goal);
            assert!(s.success && s.final_reason == "ok", "{s:?}");
        }
        seen.extend(reply.summaries);
        if reply.next_page_token.is_empty() {
            break;
        }
        token = reply.next_page_token;
    }
    assert_eq!(pages, [15, 15, 10]);
    // Newest first: the reverse of the order they were submitted in.
    let listed: Vec<String> = seen.iter().map(|s| s.id.clone()).collect();
    ids.reverse();
    assert_eq!(listed, ids);
    // The older `limit` still sets the page size.
    let r = g
        .list_tasks(ListTasksRequest {
            limit: 5,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.summaries.len(), 5);
    assert!(!r.next_page_token.is_empty());
    // A finished task's record is compact: its goal is cut.
    let t = get(&stack, &ids[0]).await.unwrap();
    assert_eq!(t.request.unwrap().goal.chars().count(), 1_001);
}

#[tokio::test(flavor = "multi_thread")]
async fn ended_tasks_are_forgotten_by_count_and_by_age_but_running_ones_are_kept() {
    let Some(shared) = shared() else { return };
    let cfg = GatewayConfig {
        keep_finished_tasks: 2,
        ..test_config()
    };
    let stack = stack_with(shared, None, cfg).await;
    let serial = &shared.serials[14];
    let mut g = stack.gateway.clone();
    let running = g
        .submit_task(request("slow work", &shared.serials[15]))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let mut ended = Vec::new();
    for i in 0..3 {
        ended.push(run(&stack, &format!("answer: {i}"), serial).await);
    }
    // Ended tasks are forgotten once their run has been recorded as over.
    wait_until("the oldest ended task being forgotten", async || {
        get(&stack, &ended[0]).await.is_err()
    })
    .await;
    let err = get(&stack, &ended[0]).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(get(&stack, &ended[1]).await.is_ok());
    assert!(get(&stack, &ended[2]).await.is_ok());
    assert_eq!(
        get(&stack, &running).await.unwrap().state,
        TaskState::Running as i32
    );
    g.cancel_task(CancelTaskRequest {
        task_id: running,
        reason: String::new(),
    })
    .await
    .unwrap();

    let cfg = GatewayConfig {
        keep_finished_for_ms: 300,
        ..test_config()
    };
    let stack = stack_with(shared, None, cfg).await;
    let id = run(&stack, "answer: brief", serial).await;
    assert!(get(&stack, &id).await.is_ok());
    wait_until("an ended task being forgotten after 300 ms", async || {
        get(&stack, &id).await.is_err()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_log_keeps_its_newest_events_and_the_completed_one() {
    let Some(shared) = shared() else { return };
    let cfg = GatewayConfig {
        max_events_per_task: 10,
        ..test_config()
    };
    let stack = stack_with(shared, None, cfg).await;
    let id = run(&stack, "count:30", &shared.serials[16]).await;
    let task = get(&stack, &id).await.unwrap();
    assert_eq!(task.first_seq, task.last_seq - 9);
    let mut g = stack.gateway.clone();
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
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (task.first_seq..=task.last_seq).collect::<Vec<_>>());
    assert_eq!(completed(&events).answer, "counted to 30");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queued_task_fails_when_no_device_frees_in_time() {
    let Some(shared) = shared() else { return };
    let cfg = GatewayConfig {
        device_wait_ms: 300,
        ..test_config()
    };
    let stack = stack_with(shared, None, cfg).await;
    let serial = &shared.serials[17];
    let mut d = stack.device.clone();
    d.acquire_lease(AcquireLeaseRequest {
        serial: serial.clone(),
        holder: "a-long-job".into(),
        ttl_ms: 60_000,
    })
    .await
    .unwrap();
    let mut r = request("answer: never", serial);
    r.wait_for_device = true;
    let mut g = stack.gateway.clone();
    // A stop for a task still in the queue cancels it: there is no step to let finish.
    let queued = g.submit_task(r.clone()).await.unwrap().into_inner().task_id;
    let reply = g
        .send_message(SendMessageRequest {
            task_id: queued.clone(),
            kind: Some(send_message_request::Kind::Stop("not needed".into())),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(reply.accepted, "{reply:?}");
    wait_until("the queued task ending", async || {
        get(&stack, &queued).await.unwrap().state == TaskState::Cancelled as i32
    })
    .await;
    assert_eq!(get(&stack, &queued).await.unwrap().error, "not needed");
    let events = collect(g.run_task(r).await.unwrap().into_inner()).await;
    let waiting = events.iter().any(|e| match &e.kind {
        Some(task_event::Kind::Status(s)) => {
            // The holder is no task of the caller's: the device is busy, nothing more.
            s.state == TaskState::Pending as i32
                && s.detail == format!("waiting for a device: device {serial} is busy")
        }
        _ => false,
    });
    assert!(waiting, "{events:?}");
    let done = completed(&events);
    assert!(!done.success);
    assert!(
        done.error
            .starts_with("no device became free within 300 ms (gateway.device_wait_ms)")
            && done.error.ends_with(&format!("device {serial} is busy"))
            && !done.error.contains("a-long-job"),
        "{}",
        done.error
    );
}
