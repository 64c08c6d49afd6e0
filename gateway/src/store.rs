//! Every task the gateway knows, in creation order: lookup by id, pages of summaries newest
//! first, and retention — an ended task is made compact and forgotten once more than
//! `keep_finished_tasks` have ended after it or `keep_finished_for_ms` has passed; a task that
//! has not ended is never forgotten.
//!
//! With a task store ([`crate::persist`]) memory holds only the tasks this process runs (and
//! ended ones until the store has all of them); the store holds every task, answers for the
//! rest and applies retention.
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use droidmesh_proto::v1::{Task, TaskSummary};
use tokio::sync::mpsc;

use crate::entry::{Control, Dirty, Limits, TaskEntry};
use crate::error::GatewayError;
use crate::limits::{Retention, TenantLimits};
use crate::persist::TaskStore;
use crate::record::{cut, now_ms, summary};

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
    durable: Option<Durable>,
}

/// The task store behind memory.
struct Durable {
    backend: Arc<dyn TaskStore>,
    dirty: Arc<Dirty>,
    /// This process, as the store knows it.
    owner: String,
}

/// A task found by id.
pub enum Found {
    /// Run by this process.
    Live(Arc<TaskEntry>),
    /// Read from the task store (ended, or run elsewhere).
    Stored(Box<Task>),
}

impl Store {
    pub fn new(retention: Retention, limits: Limits) -> Self {
        Self {
            index: Mutex::default(),
            retention,
            limits,
            durable: None,
        }
    }

    /// A store whose tasks are kept in `backend` by this process, `owner`.
    pub fn durable(
        retention: Retention,
        limits: Limits,
        backend: Arc<dyn TaskStore>,
        owner: String,
    ) -> Self {
        Self {
            durable: Some(Durable {
                backend,
                dirty: Arc::default(),
                owner,
            }),
            ..Self::new(retention, limits)
        }
    }

    /// The task store and the marks of its writer, if there is one.
    pub fn backend(&self) -> Option<(&Arc<dyn TaskStore>, &Arc<Dirty>)> {
        self.durable.as_ref().map(|d| (&d.backend, &d.dirty))
    }

    /// This process, as the task store knows it (when there is one).
    pub fn owner(&self) -> Option<&str> {
        self.durable.as_ref().map(|d| d.owner.as_str())
    }

    pub fn retention(&self) -> Retention {
        self.retention
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new task; returns its entry and the receiving end of its message queue.
    pub fn insert(&self, task: Task) -> (Arc<TaskEntry>, mpsc::Receiver<Control>) {
        let mut index = self.lock();
        self.forget_old(&mut index, now_ms());
        index.next_ord += 1;
        let ord = index.next_ord;
        Self::add(&mut index, task, ord, self.limits, None)
    }

    fn add(
        index: &mut Index,
        task: Task,
        ord: u64,
        limits: Limits,
        dirty: Option<Arc<Dirty>>,
    ) -> (Arc<TaskEntry>, mpsc::Receiver<Control>) {
        let (entry, rx) = TaskEntry::new(task, ord, limits, dirty);
        let entry = Arc::new(entry);
        index.by_id.insert(entry.id.clone(), entry.clone());
        index.by_ord.insert(entry.ord, entry.clone());
        (entry, rx)
    }

    /// Registers a new task, first in the task store if there is one (so a task whose id a
    /// client was given survives a crash).
    /// A store shared with other gateway processes refuses the task when its tenant is over
    /// `limits` counting theirs too.
    pub async fn create(
        &self,
        task: Task,
        limits: TenantLimits,
    ) -> Result<(Arc<TaskEntry>, mpsc::Receiver<Control>), GatewayError> {
        let Some(d) = &self.durable else {
            return Ok(self.insert(task));
        };
        let ord = match d.backend.create_within(&task, &d.owner, limits).await {
            Ok(ord) => ord,
            Err(crate::persist::StoreError::OverLimit(over)) => {
                return Err(GatewayError::OverLimit(over));
            }
            Err(e) => return Err(e.into()),
        };
        let mut index = self.lock();
        Ok(Self::add(
            &mut index,
            task,
            ord,
            self.limits,
            Some(d.dirty.clone()),
        ))
    }

    /// The entry of a task in memory by its creation order.
    pub fn live(&self, ord: u64) -> Option<Arc<TaskEntry>> {
        self.lock().by_ord.get(&ord).cloned()
    }

    /// Drops an ended task the task store has all of from memory.
    pub fn forget(&self, entry: &TaskEntry) {
        let mut index = self.lock();
        if index.by_ord.remove(&entry.ord).is_some() {
            index.by_id.remove(&entry.id);
        }
    }

    /// The task with this id: in memory, else in the task store.
    pub async fn find(&self, id: &str) -> Result<Option<Found>, GatewayError> {
        if let Some(entry) = self.get(id) {
            return Ok(Some(Found::Live(entry)));
        }
        let Some(d) = &self.durable else {
            return Ok(None);
        };
        // Between the two reads the task may have left memory once stored: look again.
        let stored = d.backend.task(id).await?;
        if let Some(entry) = self.get(id) {
            return Ok(Some(Found::Live(entry)));
        }
        Ok(stored.map(|(_, t)| Found::Stored(Box::new(t))))
    }

    /// Records that the task's run is over: its record is made compact and it joins the
    /// ended tasks that retention forgets, oldest first (with a task store, it leaves memory
    /// once the store has all of it, and the store's retention applies).
    pub fn ended(&self, entry: &TaskEntry) {
        entry.compact();
        if self.durable.is_some() {
            return;
        }
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

    /// A page of summaries, newest first, of `tenant`'s tasks in `states` (all when empty),
    /// and the token of the next page (empty after the last): from the task store when there
    /// is one, with the newer state of tasks in memory.
    pub async fn page_any(
        &self,
        tenant: &str,
        states: &[i32],
        size: usize,
        token: &str,
    ) -> Result<(Vec<TaskSummary>, String), GatewayError> {
        let Some(d) = &self.durable else {
            return self.page(tenant, states, size, token);
        };
        let before = parse_token(token)?;
        let size = size.clamp(1, MAX_PAGE);
        let mut rows = d.backend.page(tenant, states, before, size + 1).await?;
        let next = if rows.len() > size {
            rows.truncate(size);
            rows.last()
                .map(|(ord, _)| format!("p{ord}"))
                .unwrap_or_default()
        } else {
            String::new()
        };
        let page = rows
            .into_iter()
            .map(|(ord, task)| match self.live(ord) {
                Some(entry) => entry.summary(),
                None => summary(&task),
            })
            // A task in memory may have moved on from the state it was listed by.
            .filter(|s| states.is_empty() || states.contains(&s.state))
            .collect();
        Ok((page, next))
    }

    /// Model tokens of `tenant`'s tasks created at or after `since_ms`: from the task store
    /// when there is one (as last written), else from the tasks in memory.
    pub async fn tokens_since(&self, tenant: &str, since_ms: i64) -> Result<u64, GatewayError> {
        if let Some(d) = &self.durable {
            return Ok(d.backend.tokens_since(tenant, since_ms).await?);
        }
        let index = self.lock();
        Ok(index
            .by_ord
            .values()
            .filter(|e| e.tenant == tenant)
            .map(|e| {
                e.with_task(|t| {
                    if t.created_at_ms >= since_ms {
                        crate::persist::tokens_of(t)
                    } else {
                        0
                    }
                })
            })
            .fold(0u64, u64::saturating_add))
    }

    /// [`Store::page_any`] of the tasks in memory.
    pub fn page(
        &self,
        tenant: &str,
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
            if entry.tenant != tenant {
                continue;
            }
            let summary = entry.summary();
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

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
