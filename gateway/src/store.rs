//! Every task the gateway knows, in creation order: lookup by id, pages of summaries newest
//! first, and retention — an ended task is made compact and forgotten once more than
//! `keep_finished_tasks` have ended after it or `keep_finished_for_ms` has passed; a task that
//! has not ended is never forgotten.
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use droidmesh_proto::v1::{Task, TaskState, TaskSummary};
use tokio::sync::mpsc;

pub use crate::entry::{Control, Limits, Refused, TaskEntry, cut, is_final, now_ms};
use crate::error::GatewayError;

/// How many ended tasks are kept, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub keep: usize,
    pub keep_for_ms: u64,
}

/// Characters of a goal or final reason in a summary.
pub const SUMMARY_CHARS: usize = 200;
/// Most summaries in one ListTasks page.
pub const MAX_PAGE: usize = 1_000;

#[derive(Default)]
struct Index {
    by_id: HashMap<String, Arc<TaskEntry>>,
    by_ord: BTreeMap<u64, Arc<TaskEntry>>,
    /// Ended tasks in the order they ended: (ended at, ord).
    ended: VecDeque<(i64, u64)>,
    next_ord: u64,
}

pub struct Store {
    index: Mutex<Index>,
    retention: Retention,
    limits: Limits,
}

impl Store {
    pub fn new(retention: Retention, limits: Limits) -> Self {
        Self {
            index: Mutex::default(),
            retention,
            limits,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new task; returns its entry and the receiving end of its message queue.
    pub fn insert(&self, task: Task) -> (Arc<TaskEntry>, mpsc::Receiver<Control>) {
        let mut index = self.lock();
        self.forget_old(&mut index, now_ms());
        index.next_ord += 1;
        let (entry, rx) = TaskEntry::new(task, index.next_ord, self.limits);
        let entry = Arc::new(entry);
        index.by_id.insert(entry.id.clone(), entry.clone());
        index.by_ord.insert(entry.ord, entry.clone());
        (entry, rx)
    }

    /// Records that the task's run is over: its record is made compact and it joins the
    /// ended tasks that retention forgets, oldest first.
    pub fn ended(&self, entry: &TaskEntry) {
        entry.compact();
        let now = now_ms();
        let mut index = self.lock();
        if index.by_ord.contains_key(&entry.ord) {
            index.ended.push_back((now, entry.ord));
        }
        self.forget_old(&mut index, now);
    }

    /// Forgets ended tasks beyond the count, and those ended too long ago.
    fn forget_old(&self, index: &mut Index, now: i64) {
        let max_age = i64::try_from(self.retention.keep_for_ms).unwrap_or(i64::MAX);
        while let Some(&(at, ord)) = index.ended.front() {
            let too_many = index.ended.len() > self.retention.keep;
            if !too_many && now.saturating_sub(at) < max_age {
                break;
            }
            index.ended.pop_front();
            if let Some(e) = index.by_ord.remove(&ord) {
                index.by_id.remove(&e.id);
            }
        }
    }

    pub fn get(&self, id: &str) -> Option<Arc<TaskEntry>> {
        let mut index = self.lock();
        self.forget_old(&mut index, now_ms());
        index.by_id.get(id).cloned()
    }

    /// Tasks kept now.
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A page of summaries, newest first, of tasks in `states` (all when empty), and the
    /// token of the next page (empty after the last).
    pub fn page(
        &self,
        states: &[i32],
        size: usize,
        token: &str,
    ) -> Result<(Vec<TaskSummary>, String), GatewayError> {
        let before = parse_token(token)?;
        let size = size.clamp(1, MAX_PAGE);
        let mut index = self.lock();
        self.forget_old(&mut index, now_ms());
        let mut page = Vec::with_capacity(size.min(64));
        let mut next = String::new();
        for (ord, entry) in index.by_ord.range(..before).rev() {
            let summary = entry.with_task(summary);
            if !states.is_empty() && !states.contains(&(summary.state)) {
                continue;
            }
            if page.len() == size {
                // Another task follows: the next page starts after the last one returned.
                next = format!("p{}", ord + 1);
                break;
            }
            page.push(summary);
        }
        Ok((page, next))
    }
}

/// The position a page token stands for: tasks created before it (by creation order).
fn parse_token(token: &str) -> Result<u64, GatewayError> {
    if token.is_empty() {
        return Ok(u64::MAX);
    }
    token
        .strip_prefix('p')
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| {
            GatewayError::InvalidRequest(format!(
                "page_token '{}' is not one this gateway gave; pass next_page_token from the previous ListTasks reply, or nothing for the first page",
                cut(token, 40)
            ))
        })
}

fn summary(t: &Task) -> TaskSummary {
    let req = t.request.as_ref();
    let ended = is_final(TaskState::try_from(t.state).unwrap_or(TaskState::Unspecified));
    let reason = if t.error.is_empty() {
        &t.answer
    } else {
        &t.error
    };
    TaskSummary {
        id: t.id.clone(),
        state: t.state,
        goal: req.map(|r| cut(&r.goal, SUMMARY_CHARS)).unwrap_or_default(),
        device: t.device.clone(),
        mode: req.map_or(0, |r| r.mode),
        steps: t.steps,
        created_at_ms: t.created_at_ms,
        updated_at_ms: t.updated_at_ms,
        success: t.state == TaskState::Succeeded as i32,
        final_reason: if ended {
            cut(reason, SUMMARY_CHARS)
        } else {
            String::new()
        },
        last_seq: t.last_seq,
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
