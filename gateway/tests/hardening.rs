//! The gateway under outside use: a queue for busy devices with a deadline, watchers that
//! reconnect after the end, requests too large to keep, clients that flood a task with
//! messages, and agents that die mid-call.
use std::time::Duration;

use droidmesh_proto::v1::executor_service_server::ExecutorServiceServer;
use droidmesh_proto::v1::{
    AcquireLeaseRequest, CancelTaskRequest, GetTaskRequest, Lease, LeaseRef, ReleaseLeaseRequest,
    SendMessageRequest, TaskEvent, TaskState, WatchTaskRequest, send_message_request, task_event,
};
use tonic::Code;

use super::agents::ScriptedExecutor;
use super::harness::*;

/// Leases every device of the stack's device service to someone other than the gateway,
/// except `spare`.
async fn lease_all(stack: &Stack, shared: &Shared, spare: Option<&str>) -> Vec<Lease> {
    let mut d = stack.device.clone();
    let mut leases = Vec::new();
    for serial in shared.serials.iter().filter(|s| Some(s.as_str()) != spare) {
        let lease = d
            .acquire_lease(AcquireLeaseRequest {
                serial: serial.clone(),
                holder: "someone-else".into(),
                ttl_ms: 120_000,
            })
            .await
            .unwrap()
            .into_inner();
        leases.push(lease);
    }
    leases
}

async fn release(stack: &Stack, lease: &Lease) {
    let mut d = stack.device.clone();
    d.release_lease(ReleaseLeaseRequest {
        lease: Some(LeaseRef {
            serial: lease.serial.clone(),
            lease_id: lease.lease_id.clone(),
        }),
    })
    .await
    .unwrap();
}

async fn release_all(stack: &Stack, leases: &[Lease]) {
    for l in leases {
        release(stack, l).await;
    }
}

fn status_detail(ev: &TaskEvent) -> Option<(i32, &str)> {
    match &ev.kind {
        Some(task_event::Kind::Status(s)) => Some((s.state, s.detail.as_str())),
        _ => None,
    }
}

async fn task_of(stack: &Stack, id: &str) -> droidmesh_proto::v1::Task {
    let mut g = stack.gateway.clone();
    g.get_task(GetTaskRequest { task_id: id.into() })
        .await
        .unwrap()
        .into_inner()
}

/// Submits a task and waits until its first step has started; returns its id.
async fn submit_until_a_step(stack: &Stack, goal: &str, serial: &str) -> String {
    let mut g = stack.gateway.clone();
    let id = g
        .submit_task(request(goal, serial))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    watch_until(stack, &id, |e| {
        matches!(e.kind, Some(task_event::Kind::StepStarted(_)))
    })
    .await;
    id
}

async fn wait_final(stack: &Stack, id: &str) -> droidmesh_proto::v1::Task {
    for _ in 0..400 {
        let t = task_of(stack, id).await;
        if t.state >= TaskState::Succeeded as i32 {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("task {id} did not end within 10 s");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_for_any_device_waits_for_the_first_that_frees() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let leases = lease_all(&stack, shared, None).await;
    let mut queued = request("answer: queued", "");
    queued.wait_for_device = true;
    let mut g = stack.gateway.clone();
    let id = g.submit_task(queued).await.unwrap().into_inner().task_id;
    let waiting = watch_until(&stack, &id, |e| {
        status_detail(e).is_some_and(|(_, d)| d.starts_with("waiting for a device"))
    })
    .await;
    assert_eq!(
        status_detail(&waiting),
        Some((
            TaskState::Pending as i32,
            format!("waiting for a device: all {FLEET} leased").as_str()
        ))
    );
    assert_eq!(task_of(&stack, &id).await.state, TaskState::Pending as i32);
    // Another device service user lets go of one phone: the queued task takes it.
    let freed = leases[FLEET / 2].clone();
    release(&stack, &freed).await;
    let task = wait_final(&stack, &id).await;
    assert_eq!(task.state, TaskState::Succeeded as i32, "{task:?}");
    assert_eq!(task.device, freed.serial);
    assert_eq!(holder(&stack, &freed.serial).await, None);
    let others: Vec<Lease> = leases
        .into_iter()
        .filter(|l| l.serial != freed.serial)
        .collect();
    release_all(&stack, &others).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queued_task_is_woken_when_a_task_of_the_gateway_releases_its_device() {
    let Some(shared) = shared() else { return };
    // Polls an hour apart: only the release itself can wake the queued task in time.
    let cfg = droidmesh_gateway::GatewayConfig {
        device_poll_ms: 3_600_000,
        ..test_config()
    };
    let stack = stack_with(shared, None, cfg).await;
    let spare = shared.serials[9].clone();
    let leases = lease_all(&stack, shared, Some(&spare)).await;
    let mut g = stack.gateway.clone();
    let first = g
        .submit_task(request("slow work", &spare))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let mut queued = request("answer: next", "");
    queued.wait_for_device = true;
    let second = g.submit_task(queued).await.unwrap().into_inner().task_id;
    watch_until(&stack, &second, |e| {
        status_detail(e).is_some_and(|(_, d)| d.starts_with("waiting for a device"))
    })
    .await;
    g.cancel_task(CancelTaskRequest {
        task_id: first,
        reason: String::new(),
    })
    .await
    .unwrap();
    let task = wait_final(&stack, &second).await;
    assert_eq!(task.state, TaskState::Succeeded as i32, "{task:?}");
    assert_eq!(task.device, spare);
    release_all(&stack, &leases).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn watching_past_the_last_event_ends_or_is_refused() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let mut g = stack.gateway.clone();
    let events = collect(
        g.run_task(request("answer: done", &shared.serials[10]))
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    let id = events[0].task_id.clone();
    let last = events.last().unwrap().seq;
    // A client that saw the final event and reconnects with last + 1: the stream ends at once.
    let after = tokio::time::timeout(
        Duration::from_secs(5),
        collect(
            g.watch_task(WatchTaskRequest {
                task_id: id.clone(),
                from_seq: last + 1,
            })
            .await
            .unwrap()
            .into_inner(),
        ),
    )
    .await
    .expect("the stream of a finished task did not end");
    assert!(after.is_empty(), "{after:?}");
    // Further than that is a client's mistake, finished task or not.
    let err = g
        .watch_task(WatchTaskRequest {
            task_id: id,
            from_seq: last + 2,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    assert!(
        err.message().contains(&format!("last event is seq {last}")),
        "{}",
        err.message()
    );
    let running = g
        .submit_task(request("slow work", &shared.serials[10]))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    let err = g
        .watch_task(WatchTaskRequest {
            task_id: running.clone(),
            from_seq: 1_000_000,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    g.cancel_task(CancelTaskRequest {
        task_id: running,
        reason: String::new(),
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_goal_is_refused_with_its_size_and_the_limit() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let mut g = stack.gateway.clone();
    let goal = format!("answer: {}", "x".repeat(3 * 1024 * 1024));
    let err = g
        .submit_task(request(&goal, &shared.serials[11]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let limit = droidmesh_gateway::GatewayConfig::default().max_goal_bytes;
    assert!(
        err.message().contains(&goal.len().to_string())
            && err.message().contains(&limit.to_string()),
        "{}",
        err.message()
    );
    assert_eq!(holder(&stack, &shared.serials[11]).await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_that_takes_no_messages_refuses_more_once_its_queue_is_full() {
    let Some(shared) = shared() else { return };
    let stack = stack(shared, None).await;
    let serial = &shared.serials[12];
    let mut g = stack.gateway.clone();
    // The executor stops reading its input: notes pile up in front of it.
    let id = g
        .submit_task(request("deaf", serial))
        .await
        .unwrap()
        .into_inner()
        .task_id;
    watch_until(&stack, &id, |e| {
        matches!(e.kind, Some(task_event::Kind::StepStarted(_)))
    })
    .await;
    let note = "n".repeat(16 * 1024);
    let mut refused = None;
    for _ in 0..400 {
        let r = g
            .send_message(SendMessageRequest {
                task_id: id.clone(),
                kind: Some(send_message_request::Kind::Note(note.clone())),
            })
            .await;
        if let Err(e) = r {
            refused = Some(e);
            break;
        }
    }
    let err = refused.expect("400 notes were all queued");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(
        err.message().contains("messages waiting"),
        "{}",
        err.message()
    );
    // A cancel still gets through.
    let task = g
        .cancel_task(CancelTaskRequest {
            task_id: id,
            reason: "flooded".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(task.state, TaskState::Cancelled as i32, "{task:?}");
    assert_eq!(holder(&stack, serial).await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_dies_mid_step_is_named_with_its_endpoint() {
    let Some(shared) = shared() else { return };
    let executor = serve(
        tonic::transport::Server::builder()
            .add_service(ExecutorServiceServer::new(ScriptedExecutor)),
    )
    .await;
    let proxy = Proxy::start(&executor).await;
    let stack = stack(shared, Some(proxy.endpoint.clone())).await;
    let serial = &shared.serials[13];
    let id = submit_until_a_step(&stack, "slow work", serial).await;
    proxy.kill();
    let task = wait_final(&stack, &id).await;
    assert_eq!(task.state, TaskState::Failed as i32, "{task:?}");
    assert!(
        task.error.contains(&format!(
            "executor at {} went away mid-step",
            proxy.endpoint
        )),
        "{}",
        task.error
    );
    assert!(!task.error.contains("h2"), "{}", task.error);
    assert_eq!(holder(&stack, serial).await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_stops_answering_mid_step_is_named_within_the_keepalive_bound() {
    let Some(shared) = shared() else { return };
    let executor = serve(
        tonic::transport::Server::builder()
            .add_service(ExecutorServiceServer::new(ScriptedExecutor)),
    )
    .await;
    let proxy = Proxy::start(&executor).await;
    let cfg = droidmesh_gateway::GatewayConfig {
        peer_keepalive_ms: 200,
        ..test_config()
    };
    let stack = stack_with(shared, Some(proxy.endpoint.clone()), cfg).await;
    let serial = &shared.serials[24];
    let id = submit_until_a_step(&stack, "slow work", serial).await;
    // A stopped process keeps its connections open and answers nothing, not even pings.
    let frozen_at = std::time::Instant::now();
    proxy.freeze();
    let task = wait_final(&stack, &id).await;
    let took = frozen_at.elapsed();
    assert_eq!(task.state, TaskState::Failed as i32, "{task:?}");
    assert!(
        task.error
            .contains(&format!("executor at {} stopped answering", proxy.endpoint)),
        "{}",
        task.error
    );
    // Keep-alive pings every 200 ms, each given 400 ms: noticed well within 3 s.
    assert!(took < Duration::from_secs(3), "noticed after {took:?}");
    assert_eq!(holder(&stack, serial).await, None);
}
