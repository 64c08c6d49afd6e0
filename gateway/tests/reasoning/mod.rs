//! Reasoning mode through the public API, with scripted agents: the routing loop, results back
//! to the manager, error history after repeated failures, handoffs, agents that are down,
//! limits, loops. Human help and control of a running task are in `reasoning_control`.
mod failures;
mod handoffs;
mod loops;
mod routing;
mod scripter_affinity;

use droidmesh_proto::v1::{
    GetTaskRequest, Mode, SendMessageRequest, Task, TaskEvent, TaskRequest, TaskState,
    send_message_request, task_event,
};

use super::harness::*;

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
