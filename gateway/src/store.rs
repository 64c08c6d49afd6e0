//! Tasks in memory: each with its record, its append-only event log (sequence numbers 1, 2,
//! 3, ... without gaps) and the channels that steer its run. Watchers read the log from any
//! sequence number and then wait for new events, so a client that reconnects misses nothing
//! and sees nothing twice.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use droidmesh_proto::v1::{Task, TaskEvent, TaskState, task_event};
use tokio::sync::{mpsc, watch};

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A message for a running task, from SendMessage or CancelTask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    HumanReply(String),
    ChangeGoal(String),
    Note(String),
    /// End after the current step.
    Stop(String),
    /// End now.
    Cancel(String),
}

pub fn is_final(state: TaskState) -> bool {
    matches!(
        state,
        TaskState::Succeeded | TaskState::Failed | TaskState::Cancelled
    )
}

struct Data {
    task: Task,
    events: Vec<TaskEvent>,
    step: u32,
}

pub struct TaskEntry {
    pub id: String,
    data: Mutex<Data>,
    last_seq: watch::Sender<u64>,
    control: mpsc::UnboundedSender<Control>,
}

impl TaskEntry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn snapshot(&self) -> Task {
        self.lock().task.clone()
    }

    pub fn state(&self) -> TaskState {
        TaskState::try_from(self.lock().task.state).unwrap_or(TaskState::Unspecified)
    }

    /// Changes the task record.
    pub fn update(&self, f: impl FnOnce(&mut Task)) {
        let mut d = self.lock();
        f(&mut d.task);
        d.task.updated_at_ms = now_ms();
    }

    pub fn set_step(&self, step: u32) {
        let mut d = self.lock();
        d.step = step;
        d.task.steps = d.task.steps.max(step);
    }

    /// Appends an event with the next sequence number and wakes the watchers.
    pub fn push(&self, kind: task_event::Kind) -> u64 {
        let seq = {
            let mut d = self.lock();
            let seq = d.events.len() as u64 + 1;
            let event = TaskEvent {
                task_id: self.id.clone(),
                seq,
                time_ms: now_ms(),
                step: d.step,
                kind: Some(kind),
            };
            d.events.push(event);
            d.task.last_seq = seq;
            d.task.updated_at_ms = now_ms();
            seq
        };
        self.last_seq.send_replace(seq);
        seq
    }

    /// Events with `seq >= from` (1-based), at most `max`.
    pub fn events_from(&self, from: u64, max: usize) -> Vec<TaskEvent> {
        let d = self.lock();
        let start = usize::try_from(from.max(1) - 1).unwrap_or(usize::MAX);
        d.events.iter().skip(start).take(max).cloned().collect()
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.last_seq.subscribe()
    }

    /// Sends a message to the task's run; false when the run is over.
    pub fn control(&self, c: Control) -> bool {
        self.control.send(c).is_ok()
    }
}

/// Every task the gateway knows.
#[derive(Default)]
pub struct Store {
    tasks: RwLock<HashMap<String, Arc<TaskEntry>>>,
    order: Mutex<VecDeque<String>>,
}

impl Store {
    /// Registers a new task; returns its entry and the receiving end of its control channel.
    pub fn insert(
        &self,
        task: Task,
        keep_finished: usize,
    ) -> (Arc<TaskEntry>, mpsc::UnboundedReceiver<Control>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (last_seq, _) = watch::channel(0);
        let id = task.id.clone();
        let entry = Arc::new(TaskEntry {
            id: id.clone(),
            data: Mutex::new(Data {
                task,
                events: Vec::new(),
                step: 0,
            }),
            last_seq,
            control: tx,
        });
        self.tasks
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), entry.clone());
        let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        order.push_back(id);
        self.forget_old(&mut order, keep_finished);
        (entry, rx)
    }

    /// Drops the oldest finished tasks beyond `keep`.
    fn forget_old(&self, order: &mut VecDeque<String>, keep: usize) {
        let mut tasks = self.tasks.write().unwrap_or_else(|p| p.into_inner());
        let finished = order
            .iter()
            .filter(|id| tasks.get(*id).is_some_and(|t| is_final(t.state())))
            .count();
        let mut excess = finished.saturating_sub(keep);
        order.retain(|id| {
            if excess > 0 && tasks.get(id).is_some_and(|t| is_final(t.state())) {
                tasks.remove(id);
                excess -= 1;
                false
            } else {
                true
            }
        });
    }

    pub fn get(&self, id: &str) -> Option<Arc<TaskEntry>> {
        self.tasks
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// Tasks, newest first.
    pub fn list(&self) -> Vec<Arc<TaskEntry>> {
        let order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        let tasks = self.tasks.read().unwrap_or_else(|p| p.into_inner());
        order
            .iter()
            .rev()
            .filter_map(|id| tasks.get(id).cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use droidmesh_proto::v1::TaskStatus;

    fn status() -> task_event::Kind {
        task_event::Kind::Status(TaskStatus::default())
    }

    #[test]
    fn events_are_numbered_without_gaps_and_read_from_any_point() {
        let store = Store::default();
        let (t, _rx) = store.insert(
            Task {
                id: "t1".into(),
                ..Task::default()
            },
            10,
        );
        for _ in 0..5 {
            t.push(status());
        }
        let seqs: Vec<u64> = t.events_from(0, 100).iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        assert_eq!(t.events_from(4, 100).len(), 2);
        assert_eq!(t.events_from(9, 100).len(), 0);
        assert_eq!(t.snapshot().last_seq, 5);
        assert_eq!(*t.subscribe().borrow(), 5);
    }

    #[test]
    fn only_the_oldest_finished_tasks_are_forgotten() {
        let store = Store::default();
        for i in 0..4 {
            let (t, _) = store.insert(
                Task {
                    id: format!("t{i}"),
                    ..Task::default()
                },
                2,
            );
            if i < 3 {
                t.update(|task| task.state = TaskState::Succeeded as i32);
            }
        }
        // t0..t2 finished, t3 running; inserting t4 keeps two finished ones.
        store.insert(
            Task {
                id: "t4".into(),
                ..Task::default()
            },
            2,
        );
        let ids: Vec<String> = store.list().iter().map(|t| t.id.clone()).collect();
        assert_eq!(ids, vec!["t4", "t3", "t2", "t1"]);
    }
}
