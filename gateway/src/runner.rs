//! One task's run, whatever its mode: wait for the device lease (if queued), keep it renewed
//! while the mode's [`Driver`] runs the agents, turn the final answer into structured output
//! when asked, release the lease on every ending and record how the task ended.
use std::sync::Arc;
use std::time::{Duration, Instant};

use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{
    Lease, LeaseRef, ReleaseLeaseRequest, RenewLeaseRequest, StructureOutputRequest, TaskCompleted,
    TaskRequest, TaskState, TaskStatus, TokenUsage, UsageReport, task_event,
};
use droidmesh_runtime::TracedChannel;
use tokio::sync::{Notify, mpsc};
use tonic::Code;

use crate::agents::{Agent, Agents};
use crate::config::GatewayConfig;
use crate::conversations::Conversations;
use crate::driver::{Driver, Ending, TaskCtx, lease_ref};
use crate::error::PeerError;
use crate::store::{Control, TaskEntry};

/// What a task needs from its surroundings.
#[derive(Clone)]
pub struct Deps {
    pub cfg: GatewayConfig,
    pub device: DeviceServiceClient<TracedChannel>,
    pub agents: Agents,
    /// The device endpoint agents are told to use.
    pub device_endpoint: String,
    /// Goals and answers of recent conversations (shared by every task).
    pub conversations: Arc<Conversations>,
    /// Notified whenever a task of this gateway releases a lease (wakes queued tasks).
    pub released: Arc<Notify>,
    /// The task store, once opened: whose task a lease holder is ([`crate::busy`]).
    pub store: Option<Arc<crate::store::Store>>,
}

pub fn set_state(entry: &TaskEntry, state: TaskState, detail: &str) {
    entry.update(|t| t.state = state as i32);
    entry.push(task_event::Kind::Status(TaskStatus {
        state: state as i32,
        detail: detail.to_owned(),
    }));
}

/// Longest wait for the device service to take a lease back when a task ends.
const RELEASE_WAIT: Duration = Duration::from_secs(3);

/// Runs the task to its end under `driver`. `lease` is present when the device was leased up
/// front.
pub async fn run<D: Driver>(
    driver: D,
    deps: Deps,
    entry: Arc<TaskEntry>,
    req: TaskRequest,
    lease: Option<Lease>,
    mut control: mpsc::Receiver<Control>,
    allowed: Option<Vec<String>>,
) {
    let started = Instant::now();
    let lease = match lease {
        Some(l) => Some(l),
        None => crate::queue::wait_for_lease(&deps, &entry, &req.device, allowed.as_deref()).await,
    };
    let Some(lease) = lease else {
        return; // ended while queued; already recorded
    };
    entry.set_lease(Some(lease_ref(&lease)));
    entry.update(|t| t.device = lease.serial.clone());
    // The task's span (see `service::task_span`), when the lease came after it began.
    tracing::Span::current().record("droidmesh.device.serial", lease.serial.as_str());
    set_state(
        &entry,
        TaskState::Running,
        &format!("running on {}", lease.serial),
    );

    let (lost_tx, mut lost_rx) = tokio::sync::oneshot::channel::<String>();
    let renewer = tokio::spawn(renew(
        deps.clone(),
        lease_ref(&lease),
        entry.tenant.clone(),
        lost_tx,
    ));
    let ctx = TaskCtx {
        deps: &deps,
        entry: &entry,
        req: &req,
        lease: &lease,
        control: &mut control,
    };
    // A cancel ends the run at once, whatever the driver is waiting for: dropping its future
    // drops its agent calls.
    let ending = tokio::select! {
        e = driver.drive(ctx) => e,
        lost = &mut lost_rx => Ending::failed(format!("lost the lease on {}: {}", lease.serial, lost.unwrap_or_default())),
        reason = entry.cancelled() => Ending::cancelled(reason),
    };
    renewer.abort();
    let mut device = deps.device.clone();
    // The ttl frees the device anyway, so a device service that does not answer may not hold
    // up the task's ending for longer than this.
    let release = device.release_lease(ReleaseLeaseRequest {
        lease: Some(lease_ref(&lease)),
    });
    match tokio::time::timeout(RELEASE_WAIT, release).await {
        Ok(Ok(_)) => {
            entry.set_lease(None);
            deps.released.notify_waiters()
        }
        Ok(Err(e)) => {
            tracing::warn!(task = %entry.id, error = %e, "lease release failed; it expires by its ttl")
        }
        Err(_) => {
            tracing::warn!(task = %entry.id, "lease release got no answer in time; it expires by its ttl")
        }
    }
    let ending = structure(&deps, &entry, &req, ending).await;
    finish(&entry, ending, started.elapsed());
    remember_turn(&deps, &entry);
}

/// Adds the ended task to its conversation, if it has one.
fn remember_turn(deps: &Deps, entry: &TaskEntry) {
    let task = entry.snapshot();
    let Some(req) = &task.request else { return };
    if req.conversation_id.is_empty() {
        return;
    }
    let success = task.state == TaskState::Succeeded as i32;
    deps.conversations
        .record(&req.conversation_id, &req.goal, &task.answer, success);
}

/// Records the ending: the task record, a status event, then the completed event (the last).
fn finish(entry: &TaskEntry, ending: Ending, took: Duration) {
    entry.update(|t| {
        t.answer = if ending.answer.is_empty() {
            ending.error.clone()
        } else {
            ending.answer.clone()
        };
        t.error = ending.error.clone();
    });
    let detail = if ending.error.is_empty() {
        "finished".to_owned()
    } else {
        ending.error.clone()
    };
    set_state(entry, ending.state, &detail);
    let task = entry.snapshot();
    crate::metrics::task_ended(ending.state, task.steps);
    entry.push(task_event::Kind::Completed(TaskCompleted {
        success: ending.state == TaskState::Succeeded,
        answer: ending.answer,
        structured_output: task.structured_output,
        steps: task.steps,
        usage: task.usage,
        duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        error: ending.error,
        answered_directly: task.answered_directly,
        files: task.files,
    }));
}

/// Records a task that ended before it ran (cancelled while queued, device gone).
pub fn finish_early(entry: &TaskEntry, state: TaskState, reason: &str) {
    finish(
        entry,
        Ending {
            state,
            answer: String::new(),
            error: reason.to_owned(),
        },
        Duration::ZERO,
    );
}

/// Renews the lease every third of its ttl; reports a lease that can no longer be renewed (one
/// another task took is told in words for `tenant`, see [`crate::busy`]).
async fn renew(
    deps: Deps,
    lease: LeaseRef,
    tenant: String,
    lost: tokio::sync::oneshot::Sender<String>,
) {
    let mut device = deps.device.clone();
    let every = Duration::from_millis(u64::from(deps.cfg.lease_ttl_ms / 3));
    let mut failures = 0;
    loop {
        tokio::time::sleep(every).await;
        let req = RenewLeaseRequest {
            lease: Some(lease.clone()),
            ttl_ms: deps.cfg.lease_ttl_ms,
        };
        match device.renew_lease(req).await {
            Ok(_) => failures = 0,
            Err(s) if s.code() == Code::FailedPrecondition => {
                let _ = lost.send(crate::busy::lost(&deps, &tenant, &lease.serial).await);
                return;
            }
            Err(s) if s.code() == Code::NotFound => {
                let _ = lost.send(s.message().to_owned());
                return;
            }
            Err(s) => {
                // The device service may be briefly unreachable; the lease survives until its
                // ttl, so try again before giving up.
                failures += 1;
                if failures >= 2 {
                    let e = PeerError::call_checked("device", &deps.device_endpoint, &s).await;
                    let _ = lost.send(e.to_string());
                    return;
                }
            }
        }
    }
}

/// Adds an agent's usage report to the task's totals and its event log.
pub fn record_usage(entry: &TaskEntry, report: &UsageReport) {
    if let Some(usage) = &report.usage {
        entry.update(|t| add_usage(&mut t.usage, usage));
    }
    entry.push(task_event::Kind::Usage(report.clone()));
}

pub fn add_usage(total: &mut Option<TokenUsage>, u: &TokenUsage) {
    let t = total.get_or_insert_with(TokenUsage::default);
    t.input_tokens += u.input_tokens;
    t.output_tokens += u.output_tokens;
    t.cached_input_tokens += u.cached_input_tokens;
    t.calls += u.calls.max(1);
}

/// With an output schema, asks the manager to structure a successful answer.
async fn structure(deps: &Deps, entry: &TaskEntry, req: &TaskRequest, ending: Ending) -> Ending {
    let Some(schema) = req.output_schema.clone().filter(|s| !s.trim().is_empty()) else {
        return ending;
    };
    if ending.state != TaskState::Succeeded {
        return ending;
    }
    let mut manager = deps.agents.manager.clone();
    let call = manager.structure_output(StructureOutputRequest {
        task_id: entry.id.clone(),
        goal: req.goal.clone(),
        final_answer: ending.answer.clone(),
        json_schema: schema,
        llm: req.models.get("structured_output").cloned(),
    });
    let answer = crate::routing::within(deps, call)
        .await
        .unwrap_or_else(|limit| Err(tonic::Status::deadline_exceeded(limit)));
    match answer {
        Ok(r) => {
            let r = r.into_inner();
            if let Some(u) = &r.usage {
                record_usage(entry, u);
            }
            if r.valid {
                entry.update(|t| t.structured_output = Some(r.json.clone()));
                ending
            } else {
                Ending {
                    error: format!(
                        "the answer could not be structured to the schema after {} attempts: {}",
                        r.attempts,
                        r.validation_errors.join("; ")
                    ),
                    state: TaskState::Failed,
                    answer: ending.answer,
                }
            }
        }
        Err(s) => Ending {
            error: format!(
                "structured output failed: {}",
                PeerError::call("manager", deps.agents.endpoint(Agent::Manager), &s)
            ),
            state: TaskState::Failed,
            answer: ending.answer,
        },
    }
}
