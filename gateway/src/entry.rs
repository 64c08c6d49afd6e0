//! One task in memory: its record, its event log (sequence numbers 1, 2, 3, ... without gaps,
//! the newest kept within a count and a byte budget), the bounded queue of messages for its
//! run, and its cancel signal. Watchers read the log from any sequence number and then wait
//! for new events, so a client that reconnects misses nothing kept and sees nothing twice.
use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use droidmesh_proto::v1::{LeaseRef, Task, TaskEvent, TaskState, TaskSummary, task_event};
use prost::Message;
use tokio::sync::{Notify, mpsc, watch};

use crate::persist::{StoredEvent, TaskWrite, WriteFailure};
use crate::record::{compact, is_final, now_ms};

/// A message for a running task, from SendMessage: the steering contract's message, the same
/// in both modes.
pub use droidmesh_agent::steer::Steer as Control;

/// Why a message did not reach the task's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// This many messages already wait for the run to take them.
    Full(usize),
    /// The run is over.
    Ended,
}

/// Bounds of one task's log and message queue.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_events: usize,
    pub max_event_bytes: usize,
    pub max_queued: usize,
}

/// Where a watcher starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEnd {
    /// The latest event's seq (0: none yet).
    pub last_seq: u64,
    /// The completed event is in the log: nothing follows it.
    pub ended: bool,
}

struct Data {
    task: Task,
    /// The kept events, encoded without their task id (held once, in `TaskEntry::id`): an
    /// event in memory is its encoded size, where the decoded message is 344 bytes and more.
    /// Their seqs run from `task.first_seq` without gaps.
    events: VecDeque<Vec<u8>>,
    /// Sum of the lengths in `events`.
    bytes: usize,
    step: u32,
    ended: bool,
    /// Dropped once the task has ended.
    control: Option<mpsc::Sender<Control>>,
    /// With a task store: the latest seq written to it, and the count of changes to the
    /// record (a write is complete when no change followed it).
    written_seq: u64,
    changes: u64,
    /// The lease the task holds (for a store, so an orphaned task's lease can be given back).
    lease: Option<LeaseRef>,
    /// When the task reached its final state.
    ended_at_ms: Option<i64>,
    /// The run is over and the record compact: nothing changes any more.
    run_over: bool,
}

/// The tasks whose changes a task store has not yet been given, by creation order, and the
/// signal that wakes the writer. Holds at most one mark per task in memory.
#[derive(Default)]
pub struct Dirty {
    marked: Mutex<BTreeSet<u64>>,
    pub wake: Notify,
    /// A marked change ended a task: the writer writes at once rather than gathering more
    /// (a client waiting for its task's end is not kept waiting for other tasks' steps).
    urgent: AtomicBool,
    pub hurry: Notify,
    /// The writer's failure while its writes fail (`None` once one succeeds); told again at
    /// each failed write, so that watchers whose events wait look again.
    pub failing: watch::Sender<Option<WriteFailure>>,
}

impl Dirty {
    pub fn mark(&self, ord: u64) {
        self.marked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ord);
        self.wake.notify_one();
    }

    /// Marks a change that ends a task: the next write is not put off.
    pub fn mark_urgent(&self, ord: u64) {
        self.urgent.store(true, Ordering::SeqCst);
        self.mark(ord);
        self.hurry.notify_one();
    }

    /// Whether a change marked since the last [`Dirty::take`] ended a task.
    pub fn is_urgent(&self) -> bool {
        self.urgent.load(Ordering::SeqCst)
    }

    pub fn take(&self) -> BTreeSet<u64> {
        self.urgent.store(false, Ordering::SeqCst);
        std::mem::take(&mut *self.marked.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// What a write to the task store covered of one task.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    seq: u64,
    changes: u64,
}

pub struct TaskEntry {
    pub id: String,
    /// The tenant that created it (never changes).
    pub tenant: String,
    /// Creation order in the store (newer is larger).
    pub(crate) ord: u64,
    limits: Limits,
    data: Mutex<Data>,
    /// The latest event watchers may see: the latest pushed, or with a task store the latest
    /// written to it, so that every event a client has seen survives a crash.
    last_seq: watch::Sender<u64>,
    cancel: watch::Sender<Option<String>>,
    /// Set when a task store keeps the task: changes are marked here for its writer.
    dirty: Option<Arc<Dirty>>,
}

impl TaskEntry {
    /// A new entry and the receiving end of its message queue.
    pub(crate) fn new(
        task: Task,
        ord: u64,
        limits: Limits,
        dirty: Option<Arc<Dirty>>,
    ) -> (Self, mpsc::Receiver<Control>) {
        let (control, rx) = mpsc::channel(limits.max_queued.max(1));
        let entry = Self {
            id: task.id.clone(),
            tenant: task.tenant.clone(),
            ord,
            limits,
            data: Mutex::new(Data {
                task,
                events: VecDeque::new(),
                bytes: 0,
                step: 0,
                ended: false,
                control: Some(control),
                written_seq: 0,
                changes: 0,
                lease: None,
                ended_at_ms: None,
                run_over: false,
            }),
            last_seq: watch::channel(0).0,
            cancel: watch::channel(None).0,
            dirty,
        };
        (entry, rx)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The record, as far as watchers may see its log.
    pub fn snapshot(&self) -> Task {
        let mut task = self.lock().task.clone();
        task.last_seq = task.last_seq.min(self.visible_seq());
        task
    }

    /// The record's summary, as far as watchers may see its log.
    pub fn summary(&self) -> TaskSummary {
        let mut s = self.with_task(crate::record::summary);
        s.last_seq = s.last_seq.min(self.visible_seq());
        s
    }

    /// The latest event watchers may see.
    pub fn visible_seq(&self) -> u64 {
        *self.last_seq.borrow()
    }

    /// Whether events were pushed that watchers may not see yet (the task store has not
    /// taken them).
    pub fn unshown(&self) -> bool {
        let visible = self.visible_seq();
        self.lock().task.last_seq > visible
    }

    /// The task store writer's failures, when a task store keeps the task.
    pub fn store_failures(&self) -> Option<watch::Receiver<Option<WriteFailure>>> {
        self.dirty.as_ref().map(|d| d.failing.subscribe())
    }

    /// Marks a change for the task store's writer, if there is one.
    fn changed(&self, d: &mut Data) {
        if let Some(dirty) = &self.dirty {
            d.changes += 1;
            dirty.mark(self.ord);
        }
    }

    /// [`TaskEntry::changed`] for the change that ends the task: written without delay.
    fn ending(&self, d: &mut Data) {
        if let Some(dirty) = &self.dirty {
            d.changes += 1;
            dirty.mark_urgent(self.ord);
        }
    }

    /// Records the lease the task holds (none once given back).
    pub fn set_lease(&self, lease: Option<LeaseRef>) {
        let mut d = self.lock();
        d.lease = lease;
        self.changed(&mut d);
    }

    /// Reads the record without copying it.
    pub fn with_task<T>(&self, f: impl FnOnce(&Task) -> T) -> T {
        f(&self.lock().task)
    }

    pub fn state(&self) -> TaskState {
        TaskState::try_from(self.lock().task.state).unwrap_or(TaskState::Unspecified)
    }

    /// Changes the task record.
    pub fn update(&self, f: impl FnOnce(&mut Task)) {
        let mut d = self.lock();
        f(&mut d.task);
        d.task.updated_at_ms = now_ms();
        let state = TaskState::try_from(d.task.state).unwrap_or(TaskState::Unspecified);
        if is_final(state) && d.ended_at_ms.is_none() {
            d.ended_at_ms = Some(d.task.updated_at_ms);
        }
        self.changed(&mut d);
    }

    pub fn set_step(&self, step: u32) {
        let mut d = self.lock();
        d.step = step;
        d.task.steps = d.task.steps.max(step);
        self.changed(&mut d);
    }

    /// Appends an event with the next sequence number, drops the oldest beyond the log's
    /// bounds (never the newest), and wakes the watchers.
    pub fn push(&self, kind: task_event::Kind) -> u64 {
        let seq = {
            let mut d = self.lock();
            let seq = d.task.last_seq + 1;
            let ends = matches!(kind, task_event::Kind::Completed(_));
            d.ended |= ends;
            let event = TaskEvent {
                task_id: String::new(),
                seq,
                time_ms: now_ms(),
                step: d.step,
                kind: Some(kind),
            }
            .encode_to_vec();
            d.bytes += event.len();
            d.events.push_back(event);
            if d.task.first_seq == 0 {
                d.task.first_seq = seq;
            }
            while d.events.len() > 1
                && (d.events.len() > self.limits.max_events
                    || d.bytes > self.limits.max_event_bytes)
            {
                if let Some(old) = d.events.pop_front() {
                    d.bytes -= old.len();
                    d.task.first_seq += 1;
                }
            }
            d.task.last_seq = seq;
            d.task.updated_at_ms = now_ms();
            if ends {
                self.ending(&mut d);
            } else {
                self.changed(&mut d);
            }
            seq
        };
        if self.dirty.is_none() {
            self.last_seq.send_replace(seq);
        }
        seq
    }

    /// The record and the events the task store has not been given yet.
    pub fn unwritten(&self) -> (TaskWrite, Written) {
        let mut d = self.lock();
        let first = d.task.first_seq.max(1);
        let skip = usize::try_from((d.written_seq + 1).saturating_sub(first)).unwrap_or(usize::MAX);
        let events = d
            .events
            .iter()
            .skip(skip)
            .zip((d.written_seq + 1).max(first)..)
            .map(|(bytes, seq)| StoredEvent {
                seq,
                bytes: bytes.clone(),
            })
            .collect();
        // The store has the request from the task's creation: a running task's record goes
        // without it (up to `gateway.max_request_bytes` less to copy and write each time),
        // an ended one's with it, compacted.
        let request = if d.run_over {
            None
        } else {
            d.task.request.take()
        };
        let task = d.task.clone();
        if request.is_some() {
            d.task.request = request;
        }
        let write = TaskWrite {
            task,
            ord: Some(self.ord),
            events,
            lease: d.lease.clone(),
            ended_at_ms: d.ended_at_ms,
        };
        let covers = Written {
            seq: d.task.last_seq,
            changes: d.changes,
        };
        (write, covers)
    }

    /// Records that the store has what `unwritten` gave, and shows its events to watchers.
    /// True when the task will not change any more and the store has all of it.
    pub fn written(&self, w: Written) -> bool {
        let done = {
            let mut d = self.lock();
            d.written_seq = d.written_seq.max(w.seq);
            d.run_over && d.changes == w.changes
        };
        self.last_seq.send_if_modified(|s| {
            let newer = w.seq > *s;
            *s = (*s).max(w.seq);
            newer
        });
        done
    }

    /// Kept events with `seq >= from` that watchers may see, at most `max`. Events dropped
    /// from the log are skipped: the first one returned may have a larger seq than `from`.
    pub fn events_from(&self, from: u64, max: usize) -> Vec<TaskEvent> {
        let visible = self.visible_seq();
        let d = self.lock();
        let skip = usize::try_from(from.saturating_sub(d.task.first_seq)).unwrap_or(usize::MAX);
        let shown = usize::try_from((visible + 1).saturating_sub(from.max(d.task.first_seq)))
            .unwrap_or(usize::MAX);
        d.events
            .iter()
            .skip(skip)
            .take(max.min(shown))
            .filter_map(|bytes| match TaskEvent::decode(bytes.as_slice()) {
                Ok(mut ev) => {
                    ev.task_id.clone_from(&self.id);
                    Some(ev)
                }
                Err(e) => {
                    // Encoded by `push` above; cannot happen short of a prost bug.
                    tracing::error!(task = %self.id, error = %e, "a logged event does not decode");
                    None
                }
            })
            .collect()
    }

    /// The log's end, read at once (no event can slip between the two fields).
    pub fn log_end(&self) -> LogEnd {
        let visible = self.visible_seq();
        let d = self.lock();
        LogEnd {
            last_seq: visible,
            // Nothing is pushed after the completed event: it is visible when the last is.
            ended: d.ended && visible >= d.task.last_seq,
        }
    }

    /// Events and their encoded bytes kept now.
    pub fn log_size(&self) -> (usize, usize) {
        let d = self.lock();
        (d.events.len(), d.bytes)
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.last_seq.subscribe()
    }

    /// Queues a message for the task's run without waiting.
    pub fn control(&self, c: Control) -> Result<(), Refused> {
        let d = self.lock();
        let Some(control) = &d.control else {
            return Err(Refused::Ended);
        };
        control.try_send(c).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => Refused::Full(self.limits.max_queued),
            mpsc::error::TrySendError::Closed(_) => Refused::Ended,
        })
    }

    /// Asks the run to end now. Never queued behind messages and never refused; the first
    /// reason wins.
    pub fn cancel(&self, reason: String) {
        self.cancel.send_if_modified(|r| {
            if r.is_some() {
                return false;
            }
            *r = Some(reason);
            true
        });
    }

    /// Waits until the task is cancelled; returns the reason.
    pub async fn cancelled(&self) -> String {
        let mut rx = self.cancel.subscribe();
        loop {
            if let Some(r) = rx.borrow_and_update().clone() {
                return r;
            }
            // The sender lives as long as `self`, so this only waits.
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Trims the record of an ended task to what is worth keeping (see `Task` in
    /// gateway.proto): the full answer and structured output stay in the completed event.
    pub(crate) fn compact(&self) {
        let mut d = self.lock();
        compact(&mut d.task);
        d.control = None;
        d.events.shrink_to_fit();
        d.run_over = true;
        self.changed(&mut d);
    }
}

#[cfg(test)]
#[path = "entry_tests.rs"]
mod tests;
