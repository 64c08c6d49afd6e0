//! Where tasks outlive the gateway's memory: the [`TaskStore`] trait and its backends. A
//! running task lives in memory (`crate::store`); every change to it is written here in
//! batches by the writer (`crate::writer`), a task record and its new events in one transaction, and a
//! watcher is shown an event only once it is written, so every event a client has seen
//! survives a crash. Ended tasks are read back from here, a restart included.
pub mod pg_pool;
/// A throwaway PostgreSQL for tests: built for this crate's tests and with the `testkit`
/// feature only.
#[cfg(any(test, feature = "testkit"))]
pub mod pg_testkit;
pub mod pg_tls;
pub mod postgres;
mod schema;
pub mod sqlite;
mod sqlite_fault;

#[cfg(test)]
mod conformance;

use droidmesh_proto::v1::{LeaseRef, Task, TaskEvent, TaskRequest};

use crate::limits::{OverLimit, Retention, TenantLimits};

/// Version of the schema this build writes. A store written by a newer one is refused.
pub const SCHEMA_VERSION: u32 = 5;

/// One event as stored: its seq and its encoding without the task id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    pub seq: u64,
    pub bytes: Vec<u8>,
}

/// A task's record as it is now and its events not written yet.
#[derive(Debug, Clone)]
pub struct TaskWrite {
    /// The record. While the task runs the gateway leaves its request out: the store keeps
    /// the request it was given at [`TaskStore::create`] apart, and every read puts it back.
    /// A record that holds a request (an ended task's, compacted) replaces the one kept apart.
    pub task: Task,
    /// The task's creation order in the store, when the writer knows it (a backend may find
    /// the row by it rather than by id).
    pub ord: Option<u64>,
    /// Seqs follow those already written, without gaps, except that the oldest may have been
    /// dropped from the log (they are then below `task.first_seq`, and are dropped here too).
    pub events: Vec<StoredEvent>,
    /// The lease the task holds, so that a gateway that finds it orphaned can give it back.
    pub lease: Option<LeaseRef>,
    /// When the task's run ended (retention counts from it).
    pub ended_at_ms: Option<i64>,
}

/// A task that was not ended when the process that ran it stopped.
#[derive(Debug, Clone)]
pub struct Orphan {
    pub task: Task,
    pub lease: Option<LeaseRef>,
    /// The replica that ran it, when several share the store (an embedded store's orphans
    /// are those of the gateway it restarted after).
    pub lost_replica: Option<String>,
}

/// Whether waiting may mend a store's failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// It may pass by itself: the store locked for a moment, its server restarting or out of
    /// reach, no answer in time.
    Passing,
    /// It lasts until someone acts: the store is damaged (a page, a table, a column) or
    /// cannot be written (permissions, a full disk, an input/output error).
    Lasting,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be opened or used at all; the message names it and says why.
    #[error("{0}")]
    Unusable(String),
    /// One operation failed; the message says what failed, `fault` whether it may pass.
    #[error("task store ({store}): {message}")]
    Failed {
        store: String,
        message: String,
        fault: Fault,
    },
    /// The task was not recorded: its tenant is over a limit counted across every process
    /// sharing the store.
    #[error("{}", .0.message)]
    OverLimit(OverLimit),
    /// A stored record or event does not decode.
    #[error("task store ({store}): a stored {what} does not decode: {message}")]
    Corrupt {
        store: String,
        what: &'static str,
        message: String,
    },
}

impl StoreError {
    /// Whether waiting may mend it; `None` when the store did not fail (a tenant over a
    /// limit).
    pub fn fault(&self) -> Option<Fault> {
        match self {
            StoreError::Failed { fault, .. } => Some(*fault),
            StoreError::Unusable(_) | StoreError::Corrupt { .. } => Some(Fault::Lasting),
            StoreError::OverLimit(_) => None,
        }
    }
}

/// The writer's failure to give the store what changed, while it lasts: watchers of a task
/// whose events wait for the store end with it (at once when it lasts until someone acts,
/// after [`crate::watch`]'s outage bound when it may pass) rather than wait in silence.
#[derive(Debug, Clone)]
pub struct WriteFailure {
    pub error: StoreError,
    /// The first failure of this run of failures.
    pub since: tokio::time::Instant,
}

/// A task store opened for one gateway process (by the composition root, see
/// `droidmesh_gateway::open_store`): the backend, and this process as the store knows it.
pub struct Opened {
    pub backend: std::sync::Arc<dyn TaskStore>,
    pub owner: String,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("owner", &self.owner)
            .finish()
    }
}

/// Tasks kept beyond a process: records, full event logs, leases held, retention.
#[tonic::async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// What and where the store is, for logs and errors (never a password).
    fn describe(&self) -> String;

    /// Records a new task, owned by `owner` (this process), and returns its creation order:
    /// larger for newer tasks, never reused.
    async fn create(&self, task: &Task, owner: &str) -> Result<u64, StoreError>;

    /// [`TaskStore::create`], once the task's tenant is found within `limits` counting the
    /// tasks of every process sharing the store: its tasks not ended and those created in the
    /// minute before `task.created_at_ms`. Else nothing is recorded and the answer is
    /// [`StoreError::OverLimit`]. An embedded store belongs to one process, whose own count
    /// (`crate::quota`) is exact, so it only records the task.
    async fn create_within(
        &self,
        task: &Task,
        owner: &str,
        limits: TenantLimits,
    ) -> Result<u64, StoreError> {
        let _ = limits;
        self.create(task, owner).await
    }

    /// Writes every record and its new events in one transaction, for the process `owner`.
    /// Returns the ids of tasks it did not write because another process has taken them
    /// over (declared their owner stopped); a task forgotten meanwhile is skipped silently.
    async fn write(&self, owner: &str, batch: Vec<TaskWrite>) -> Result<Vec<String>, StoreError>;

    /// The task's record and its creation order.
    async fn task(&self, id: &str) -> Result<Option<(u64, Task)>, StoreError>;

    /// Stored events of the task with `seq >= from`, oldest first, at most `max`.
    async fn events(&self, id: &str, from: u64, max: usize) -> Result<Vec<TaskEvent>, StoreError>;

    /// Records of `tenant` created before `before` (creation order), newest first, in
    /// `states` (every state when empty), at most `size`.
    async fn page(
        &self,
        tenant: &str,
        states: &[i32],
        before: u64,
        size: usize,
    ) -> Result<Vec<(u64, Task)>, StoreError>;

    /// Forgets ended tasks beyond `keep.keep` (oldest ending first) and those that ended more
    /// than `keep.keep_for_ms` before `now_ms`; never one that has not ended. Returns how many.
    async fn prune(&self, keep: Retention, now_ms: i64) -> Result<u64, StoreError>;

    /// Tasks not ended whose owner is not running any more (for an embedded store: every one,
    /// since one process owns it). With a shared store each is claimed for `owner` in the
    /// same transaction, so that exactly one live process ends it.
    async fn orphans(&self, owner: &str) -> Result<Vec<Orphan>, StoreError>;

    /// With a store several gateway processes share: how long a process may go without a
    /// [`TaskStore::heartbeat`] before the others take it for stopped. `None` for an embedded
    /// store, whose one process finds its orphans once, at start.
    fn replica_timeout(&self) -> Option<std::time::Duration> {
        None
    }

    /// Tells the processes sharing the store that `owner` still runs.
    async fn heartbeat(&self, _owner: &str) -> Result<(), StoreError> {
        Ok(())
    }

    /// Tasks kept.
    async fn count(&self) -> Result<u64, StoreError>;

    /// Model tokens (input + output) of `tenant`'s tasks created at or after `since_ms`, as of
    /// their last written records.
    async fn tokens_since(&self, tenant: &str, since_ms: i64) -> Result<u64, StoreError>;
}

/// The model tokens a task has used: input plus output (cached input is part of input).
pub fn tokens_of(task: &Task) -> u64 {
    task.usage
        .as_ref()
        .map_or(0, |u| u.input_tokens.saturating_add(u.output_tokens))
}

/// Decodes a stored event of task `id`.
pub(crate) fn decode_event(store: &str, id: &str, bytes: &[u8]) -> Result<TaskEvent, StoreError> {
    use prost::Message as _;
    let mut ev = TaskEvent::decode(bytes).map_err(|e| StoreError::Corrupt {
        store: store.to_owned(),
        what: "event",
        message: e.to_string(),
    })?;
    ev.task_id = id.to_owned();
    Ok(ev)
}

/// Decodes a stored task record; `request`, the request kept apart, goes back in when the
/// record has none of its own.
pub(crate) fn decode_task(
    store: &str,
    bytes: &[u8],
    request: Option<&[u8]>,
) -> Result<Task, StoreError> {
    use prost::Message as _;
    let corrupt = |what, e: prost::DecodeError| StoreError::Corrupt {
        store: store.to_owned(),
        what,
        message: e.to_string(),
    };
    let mut task = Task::decode(bytes).map_err(|e| corrupt("task record", e))?;
    if task.request.is_none()
        && let Some(request) = request
    {
        task.request = Some(TaskRequest::decode(request).map_err(|e| corrupt("task request", e))?);
    }
    Ok(task)
}

/// A new task's record without its request, and the request, encoded: a store keeps them
/// apart so that the writes of a running task do not carry its request again.
pub(crate) fn encode_apart(task: &Task) -> (Vec<u8>, Option<Vec<u8>>) {
    use prost::Message as _;
    let Some(request) = &task.request else {
        return (task.encode_to_vec(), None);
    };
    let record = Task {
        request: None,
        ..task.clone()
    };
    (record.encode_to_vec(), Some(request.encode_to_vec()))
}
