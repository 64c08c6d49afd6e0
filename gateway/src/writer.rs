//! The task store's writer and the recovery of tasks a stopped gateway left running.
//!
//! The writer takes the tasks whose records or logs changed, gives the store each one's record
//! and new events in one transaction per batch, and then shows those events to watchers. While
//! the store fails, tasks run on: their events wait in memory (each log within its bounds,
//! the oldest dropped first), the writer tries again with backoff and logs the failure, and
//! tells watchers ([`WriteFailure`]): one waiting for events the store has not taken
//! ends with the error, at once when it lasts until someone acts (a damaged or full store),
//! after a bound when it may pass by itself (a database restarting).
//!
//! With a store several gateway processes share, each renews its heartbeat there and, again
//! and again, ends the tasks of replicas that stopped renewing theirs ([`spawn_replica`]).
use std::sync::Arc;
use std::time::Duration;

use droidmesh_proto::v1::device_service_client::DeviceServiceClient;
use droidmesh_proto::v1::{
    ReleaseLeaseRequest, Task, TaskCompleted, TaskEvent, TaskState, TaskStatus, task_event,
};
use droidmesh_runtime::TracedChannel;
use prost::Message as _;
use tokio::time::Instant;

use crate::entry::Limits;
use crate::limits::Retention;
use crate::persist::{Orphan, StoreError, StoredEvent, TaskStore, TaskWrite, WriteFailure};
use crate::record::{compact, is_final, now_ms};
use crate::store::Store;

/// This process, as a task store knows it: unique, and naming the host when it is known (a
/// pod's name in Kubernetes), so that a task failed because its replica stopped says which.
pub(crate) fn owner() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty() && h.len() <= 64)
        .map(|h| format!("@{h}"))
        .unwrap_or_default();
    format!(
        "gateway-{}-{}{host}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    )
}

/// A store whose tasks are kept in `backend`, with its writer. An embedded store's tasks left
/// unfinished by a stopped gateway are recovered now (RPCs wait for it, `done`); with a shared
/// store this process renews its heartbeat and recovers the tasks of stopped replicas while it
/// runs.
pub(crate) fn durable(
    device: &DeviceServiceClient<TracedChannel>,
    retention: Retention,
    limits: Limits,
    backend: Arc<dyn TaskStore>,
    owner: String,
    done: tokio::sync::watch::Sender<bool>,
) -> Arc<Store> {
    tracing::info!(store = %backend.describe(), owner = %owner, "tasks are kept in the task store");
    let shared = backend.replica_timeout().is_some();
    let store = Arc::new(Store::durable(retention, limits, backend, owner.clone()));
    spawn(&store);
    if shared {
        spawn_replica(&store, owner, device.clone());
        done.send_replace(true);
        return store;
    }
    let (s, device) = (store.clone(), device.clone());
    tokio::spawn(async move {
        match recover(&s, &owner, device).await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                tasks = n,
                "tasks left unfinished by a stopped gateway are marked FAILED"
            ),
            Err(e) => {
                tracing::error!(error = %e, "cannot recover the tasks a stopped gateway left unfinished")
            }
        }
        done.send_replace(true);
    });
    store
}

/// Most tasks written in one transaction.
const MAX_BATCH: usize = 256;
/// Retention is applied this often.
const PRUNE_EVERY: Duration = Duration::from_secs(10);
/// Longest pause between two tries of a failing store.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// While many tasks run, the writer gathers before it writes again: this long for each task
/// its last write held beyond the first, at most [`MAX_GATHER`]. Each task's events then go to
/// the store in fewer, larger writes (its record rewritten fewer times, fewer commits), for
/// that much more delay before watchers see them; a lone task's events, and the event that
/// ends a task, are written at once.
/// (Each commit writes every page it touched to the log: with 50 tasks changing, gathering up
/// to 25 ms rather than 8 took the store's share of the gateway's CPU per task from about
/// 175 µs to 10–70 µs in `MESH_BENCH_ROUNDS=2 cargo bench -p droidmesh-e2e --bench mesh --
/// store`, two runs each.)
const GATHER_PER_TASK: Duration = Duration::from_micros(500);
const MAX_GATHER: Duration = Duration::from_millis(25);

/// How long the writer gathers changes before its next write, after one that held `tasks`.
fn gather_after(tasks: usize) -> Duration {
    let beyond_first = u32::try_from(tasks.saturating_sub(1)).unwrap_or(u32::MAX);
    GATHER_PER_TASK.saturating_mul(beyond_first).min(MAX_GATHER)
}

/// Starts the writer of `store`'s task store (nothing when it has none). It stops once the
/// store is dropped.
pub fn spawn(store: &Arc<Store>) {
    let Some((_, dirty)) = store.backend() else {
        return;
    };
    let dirty = dirty.clone();
    let store = Arc::downgrade(store);
    tokio::spawn(async move {
        let mut failures = 0u32;
        let mut next_prune = Instant::now() + PRUNE_EVERY;
        // When the last write started and how many tasks it held.
        let mut last = (Instant::now(), 0);
        loop {
            tokio::select! {
                () = dirty.wake.notified() => {}
                () = tokio::time::sleep_until(next_prune) => {}
            }
            // Only when there is time to wait: a sleep already due still waits for the
            // timer's next tick (a millisecond). A task that ends cuts the gathering short.
            let gathered = last.0 + gather_after(last.1);
            if gathered > Instant::now() && !dirty.is_urgent() {
                tokio::select! {
                    () = tokio::time::sleep_until(gathered) => {}
                    () = dirty.hurry.notified() => {}
                }
            }
            let Some(store) = store.upgrade() else { return };
            if Instant::now() >= next_prune {
                next_prune = Instant::now() + PRUNE_EVERY;
                prune(&store).await;
            }
            let started = Instant::now();
            match flush(&store).await {
                Ok(0) => last = (started, 0),
                Ok(tasks) => {
                    if failures > 0 {
                        tracing::info!(failures, "the task store takes the tasks' changes again");
                    }
                    failures = 0;
                    last = (started, tasks);
                    dirty.failing.send_if_modified(|f| f.take().is_some());
                }
                Err(e) => {
                    failures += 1;
                    if failures == 1 || failures.is_multiple_of(20) {
                        tracing::error!(error = %e, failures, "cannot write tasks to the task store; their events wait in memory, and watchers waiting for them end with the error (at once, unless it may pass by itself)");
                    }
                    // Told at each failure: a watcher whose task's events were in this write
                    // looks again.
                    dirty.failing.send_modify(|f| {
                        let since = f.as_ref().map_or_else(Instant::now, |f| f.since);
                        *f = Some(WriteFailure { error: e, since });
                    });
                    let pause = Duration::from_millis(50) * 2u32.saturating_pow(failures.min(7));
                    tokio::time::sleep(pause.min(MAX_BACKOFF)).await;
                }
            }
        }
    });
}

/// Writes every marked task; on failure marks them again. Returns how many it wrote.
async fn flush(store: &Store) -> Result<usize, StoreError> {
    let (Some((backend, dirty)), Some(owner)) = (store.backend(), store.owner()) else {
        return Ok(0);
    };
    let marked: Vec<u64> = dirty.take().into_iter().collect();
    for (i, chunk) in marked.chunks(MAX_BATCH).enumerate() {
        let entries: Vec<_> = chunk.iter().filter_map(|ord| store.live(*ord)).collect();
        let (batch, covers): (Vec<TaskWrite>, Vec<_>) =
            entries.iter().map(|e| e.unwritten()).unzip();
        let lost = match backend.write(owner, batch).await {
            Ok(lost) => lost,
            Err(e) => {
                for ord in &marked[i * MAX_BATCH..] {
                    dirty.mark(*ord);
                }
                return Err(e);
            }
        };
        for (entry, covered) in entries.iter().zip(covers) {
            if lost.contains(&entry.id) && !is_final(entry.state()) {
                // Another replica took this one for stopped and ended the task in the store;
                // its run here stops too (the lease was given back).
                tracing::warn!(task = %entry.id, "another gateway replica ended this task after this one went without reaching the task store; its run here stops");
                entry.cancel(
                    "another gateway replica took this one for stopped (it could not reach the task store for too long) and ended the task"
                        .into(),
                );
            }
            if entry.written(covered) {
                store.forget(entry);
            }
        }
    }
    Ok(marked.len())
}

async fn prune(store: &Store) {
    let Some((backend, _)) = store.backend() else {
        return;
    };
    match backend.prune(store.retention(), now_ms()).await {
        Ok(0) => {}
        Ok(n) => tracing::debug!(tasks = n, "retention forgot ended tasks"),
        Err(e) => tracing::warn!(error = %e, "retention could not forget ended tasks"),
    }
}

/// Ends every task a stopped gateway left unfinished: FAILED with the reason, a status and a
/// completed event in its log; then gives their leases back (in the background: a lease also
/// expires by its ttl). Returns how many tasks it ended.
pub async fn recover(
    store: &Store,
    owner: &str,
    device: DeviceServiceClient<TracedChannel>,
) -> Result<usize, StoreError> {
    let Some((backend, _)) = store.backend() else {
        return Ok(0);
    };
    let timeout = backend.replica_timeout();
    let orphans = backend.orphans(owner).await?;
    if orphans.is_empty() {
        return Ok(0);
    }
    let n = orphans.len();
    let mut leases = Vec::new();
    let mut batch = Vec::new();
    for Orphan {
        task,
        lease,
        lost_replica,
    } in orphans
    {
        tracing::warn!(task = %task.id, state = ?TaskState::try_from(task.state).unwrap_or_default(), replica = lost_replica.as_deref().unwrap_or("this one, before it restarted"), "the gateway that ran this task stopped: it is marked FAILED");
        leases.extend(lease);
        batch.push(orphan_ended(task, lost_replica.as_deref(), timeout));
    }
    for chunk in batch.chunks(MAX_BATCH) {
        backend.write(owner, chunk.to_vec()).await?;
    }
    if !leases.is_empty() {
        tokio::spawn(release_all(device, leases));
    }
    Ok(n)
}

/// The record and events of a task whose gateway stopped while it ran: this one before it
/// restarted, or `lost_replica` of those sharing the store, which went `timeout` without a
/// heartbeat.
fn orphan_ended(
    mut task: Task,
    lost_replica: Option<&str>,
    timeout: Option<Duration>,
) -> TaskWrite {
    let was = TaskState::try_from(task.state).unwrap_or_default();
    let was_name = was
        .as_str_name()
        .trim_start_matches("TASK_STATE_")
        .to_ascii_lowercase()
        .replace('_', " ");
    let reason = match lost_replica {
        None => format!(
            "gateway restarted: the task was {was_name} when the gateway running it stopped, and its run was lost"
        ),
        Some(replica) => format!(
            "gateway replica {replica} stopped: the task was {was_name} when that replica stopped renewing its heartbeat in the task store (for more than {:?}), and its run was lost",
            timeout.unwrap_or_default()
        ),
    };
    let now = now_ms();
    let mut events = Vec::new();
    if !is_final(was) {
        let steps = task.steps;
        let mut event = |kind| {
            task.last_seq += 1;
            events.push(StoredEvent {
                seq: task.last_seq,
                bytes: TaskEvent {
                    task_id: String::new(),
                    seq: task.last_seq,
                    time_ms: now,
                    step: steps,
                    kind: Some(kind),
                }
                .encode_to_vec(),
            });
        };
        event(task_event::Kind::Status(TaskStatus {
            state: TaskState::Failed as i32,
            detail: reason.clone(),
        }));
        event(task_event::Kind::Completed(TaskCompleted {
            success: false,
            answer: String::new(),
            structured_output: None,
            steps: task.steps,
            usage: task.usage,
            duration_ms: u64::try_from(now.saturating_sub(task.created_at_ms)).unwrap_or(0),
            error: reason.clone(),
            answered_directly: false,
            files: task.files.clone(),
        }));
        if task.first_seq == 0 {
            task.first_seq = task.last_seq - 1;
        }
        task.state = TaskState::Failed as i32;
        task.answer.clone_from(&reason);
        task.error = reason;
    }
    task.updated_at_ms = now;
    compact(&mut task);
    TaskWrite {
        task,
        ord: None,
        events,
        lease: None,
        ended_at_ms: Some(now),
    }
}

/// With a store several gateway processes share: renews this process's heartbeat every fifth
/// of the replica timeout and, once it has renewed it without a failure for a whole timeout
/// (so that a replica that lost the store as long as this one did has had time to renew its
/// own), ends the tasks of replicas that stopped renewing theirs and gives their leases back.
/// Nothing for an embedded store. It stops once the store is dropped.
pub fn spawn_replica(
    store: &Arc<Store>,
    owner: String,
    device: DeviceServiceClient<TracedChannel>,
) {
    let Some(timeout) = store.backend().and_then(|(b, _)| b.replica_timeout()) else {
        return;
    };
    let every = (timeout / 5).clamp(Duration::from_millis(100), Duration::from_secs(5));
    let store = Arc::downgrade(store);
    tokio::spawn(async move {
        // The store was opened, and this process's heartbeat first written, just now.
        let mut renewing_since = Some(Instant::now());
        let mut failures = 0u32;
        loop {
            tokio::time::sleep(every).await;
            let Some(store) = store.upgrade() else { return };
            let Some((backend, _)) = store.backend() else {
                return;
            };
            match backend.heartbeat(&owner).await {
                Ok(()) => {
                    if failures > 0 {
                        tracing::info!(
                            failures,
                            "the task store has this gateway's heartbeat again"
                        );
                    }
                    failures = 0;
                    renewing_since.get_or_insert_with(Instant::now);
                }
                Err(e) => {
                    failures += 1;
                    renewing_since = None;
                    if failures == 1 || failures.is_multiple_of(20) {
                        tracing::error!(error = %e, failures, "cannot renew this gateway's heartbeat in the task store; past the replica timeout the other replicas take it for stopped");
                    }
                    continue;
                }
            }
            if renewing_since.is_some_and(|t| t.elapsed() >= timeout) {
                match recover(&store, &owner, device.clone()).await {
                    Ok(0) => {}
                    Ok(n) => tracing::warn!(
                        tasks = n,
                        "tasks of gateway replicas that stopped are marked FAILED"
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot look for the tasks of gateway replicas that stopped")
                    }
                }
            }
        }
    });
}

/// Gives the leases back, trying for a while if the device service is not up yet.
async fn release_all(
    mut device: DeviceServiceClient<TracedChannel>,
    leases: Vec<droidmesh_proto::v1::LeaseRef>,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for lease in leases {
        loop {
            let call = device.release_lease(ReleaseLeaseRequest {
                lease: Some(lease.clone()),
            });
            match tokio::time::timeout(Duration::from_secs(3), call).await {
                Ok(Ok(r)) => {
                    tracing::info!(serial = %lease.serial, released = r.into_inner().released, "gave back the lease of a task the stopped gateway ran");
                    break;
                }
                Ok(Err(s))
                    if !matches!(
                        s.code(),
                        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
                    ) =>
                {
                    // The lease is gone already (expired, or the device service restarted).
                    tracing::info!(serial = %lease.serial, answer = %s.message(), "the lease of a task the stopped gateway ran is not held any more");
                    break;
                }
                _ if Instant::now() >= deadline => {
                    tracing::warn!(serial = %lease.serial, "could not give back the lease of a task the stopped gateway ran; it expires by its ttl");
                    break;
                }
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_gathers_only_while_several_tasks_change() {
        assert_eq!(gather_after(0), Duration::ZERO);
        assert_eq!(gather_after(1), Duration::ZERO);
        assert_eq!(gather_after(3), Duration::from_millis(1));
        assert_eq!(gather_after(17), Duration::from_millis(8));
        assert_eq!(gather_after(51), MAX_GATHER);
        assert_eq!(gather_after(usize::MAX), MAX_GATHER);
    }
}
