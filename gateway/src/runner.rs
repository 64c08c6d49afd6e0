//! One task's run, whatever its mode: wait for the device lease (if queued), keep it renewed
//! while the mode's [`Driver`] runs the agents, turn the final answer into structured output
//! when asked, release the lease on every ending and record how the task ended.
use std::sync::Arc;
use std::time::{Duration, Instant};

use droidmesh_proto::v1::{
    Lease, LeaseRef, ReleaseLeaseRequest, RenewLeaseRequest, StructureOutputRequest, TaskRequest,
    TaskState,
};
use tokio::sync::mpsc;
use tonic::Code;

use crate::agents::Agent;
use crate::deps::Deps;
use crate::driver::{Driver, TaskCtx, lease_ref};
use crate::entry::{Control, TaskEntry};
use crate::error::PeerError;
use crate::task_state::{Ending, finish, record_usage, set_state};

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
