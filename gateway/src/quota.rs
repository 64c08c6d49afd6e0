//! Per-tenant limits: tasks running at once and tasks created per minute
//! (`gateway.auth.max_running_per_tenant`, `gateway.auth.tasks_per_minute_per_tenant`; 0: no
//! limit), counted in this process first; with a task store several gateway replicas share
//! (PostgreSQL), counted again across them by the store as it records the task; and
//! model tokens per UTC day (`gateway.auth.model_tokens_per_day_per_tenant`), summed in the
//! task store, so it holds across restarts and replicas sharing a store.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::GatewayError;
use crate::limits::{OverLimit, TenantLimits};
use crate::store::Store;

const MINUTE: Duration = Duration::from_secs(60);
const DAY_MS: i64 = 86_400_000;
/// How long a tenant's token count read from the store is used before it is read again.
const TOKENS_FRESH: Duration = Duration::from_secs(1);
/// Most tenants whose token count is remembered (more: the memory starts over).
const MAX_REMEMBERED: usize = 10_000;

#[derive(Default)]
struct Use {
    running: u32,
    /// When each task of the last minute was admitted, oldest first (at most the limit).
    started: VecDeque<Instant>,
}

/// The limits and what each tenant uses of them now.
pub struct Quotas {
    max_running: u32,
    per_minute: u32,
    tenants: Arc<Mutex<HashMap<String, Use>>>,
}

/// A running task's place in its tenant's count; given back when dropped. Until
/// [`Slot::created`] says the task exists, dropping it also takes back its place in the
/// minute's count: a request refused after admission (a busy device, a store that failed)
/// created nothing.
pub struct Slot {
    tenant: String,
    tenants: Option<Arc<Mutex<HashMap<String, Use>>>>,
    /// When it was counted in the minute's tasks, until the task is created.
    counted_at: Option<Instant>,
}

impl Slot {
    /// The task now exists: it stays counted among the minute's tasks.
    pub fn created(&mut self) {
        self.counted_at = None;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(tenants) = &self.tenants else {
            return;
        };
        let mut tenants = tenants.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(u) = tenants.get_mut(&self.tenant) {
            u.running = u.running.saturating_sub(1);
            if let Some(at) = self.counted_at
                && let Some(i) = u.started.iter().rposition(|t| *t == at)
            {
                u.started.remove(i);
            }
        }
    }
}

impl Quotas {
    pub fn new(max_running: u32, per_minute: u32) -> Self {
        Self {
            max_running,
            per_minute,
            tenants: Arc::default(),
        }
    }

    /// The limits, for a task store shared with other processes to check across them.
    pub fn limits(&self) -> TenantLimits {
        TenantLimits {
            max_running: self.max_running,
            per_minute: self.per_minute,
        }
    }

    /// Admits one more task of `tenant`, or says which limit it is over and when to retry.
    pub fn admit(&self, tenant: &str) -> Result<Slot, OverLimit> {
        if self.max_running == 0 && self.per_minute == 0 {
            return Ok(Slot {
                tenant: String::new(),
                tenants: None,
                counted_at: None,
            });
        }
        let now = Instant::now();
        let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        // Tenants with nothing running and nothing in the last minute are forgotten, so the
        // map holds at most the tenants active now.
        tenants.retain(|_, u| {
            while u
                .started
                .front()
                .is_some_and(|t| now.duration_since(*t) >= MINUTE)
            {
                u.started.pop_front();
            }
            u.running > 0 || !u.started.is_empty()
        });
        let u = tenants.entry(tenant.to_owned()).or_default();
        if self.max_running > 0 && u.running >= self.max_running {
            return Err(OverLimit::running(u.running.into()));
        }
        if self.per_minute > 0 && u.started.len() >= self.per_minute as usize {
            let oldest = u.started.front().copied().unwrap_or(now);
            let wait = MINUTE.saturating_sub(now.duration_since(oldest));
            return Err(OverLimit::per_minute(u.started.len() as u64, wait));
        }
        u.running += 1;
        let counted_at = (self.per_minute > 0).then(|| {
            u.started.push_back(now);
            now
        });
        Ok(Slot {
            tenant: tenant.to_owned(),
            tenants: Some(self.tenants.clone()),
            counted_at,
        })
    }
}

/// The model tokens a tenant's tasks may use per UTC day; a task is admitted while the
/// tenant's tasks created today have used fewer (a running task is not stopped: its last call
/// may take the tenant past the limit, and later tasks are refused until the day ends).
pub struct TokenBudget {
    per_day: u64,
    /// Per tenant: the day (ms of its start), the tokens counted, when they were read.
    seen: Mutex<HashMap<String, (i64, u64, Instant)>>,
}

impl TokenBudget {
    pub fn new(per_day: u64) -> Self {
        Self {
            per_day,
            seen: Mutex::default(),
        }
    }

    /// Refuses a new task of `tenant` when its tasks created today (UTC, by `now_ms`) have
    /// used up the day's tokens; the count is read from `store` at most once a second.
    pub async fn check(
        &self,
        tenant: &str,
        store: &Store,
        now_ms: i64,
    ) -> Result<(), GatewayError> {
        if self.per_day == 0 {
            return Ok(());
        }
        let day = now_ms - now_ms.rem_euclid(DAY_MS);
        let cached = {
            let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.get(tenant)
                .filter(|(d, _, at)| *d == day && at.elapsed() < TOKENS_FRESH)
                .map(|(_, used, _)| *used)
        };
        let used = match cached {
            Some(used) => used,
            None => {
                let used = store.tokens_since(tenant, day).await?;
                let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
                if seen.len() >= MAX_REMEMBERED {
                    seen.clear();
                }
                seen.insert(tenant.to_owned(), (day, used, Instant::now()));
                used
            }
        };
        if used < self.per_day {
            return Ok(());
        }
        let wait_ms = day + DAY_MS - now_ms;
        let secs = u64::try_from(wait_ms.div_euclid(1000) + i64::from(wait_ms % 1000 > 0))
            .unwrap_or(1)
            .max(1);
        Err(GatewayError::OverLimit(OverLimit {
            message: format!(
                "this tenant's tasks created today (UTC) used {used} model tokens, its limit of \
                 {} (gateway.auth.model_tokens_per_day_per_tenant); try again after 00:00 UTC, \
                 in {secs} s",
                self.per_day
            ),
            retry_after_secs: secs,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_tasks_are_counted_until_their_slot_is_dropped_and_per_tenant() {
        let q = Quotas::new(1, 0);
        let a = q.admit("a").unwrap();
        let e = q.admit("a").err().unwrap();
        assert!(e.message.contains("1 tasks running"), "{}", e.message);
        assert_eq!(e.retry_after_secs, 5);
        let _b = q.admit("b").unwrap();
        drop(a);
        q.admit("a").unwrap();
    }

    #[test]
    fn a_request_refused_after_admission_does_not_count_among_the_minutes_tasks() {
        let q = Quotas::new(0, 2);
        // Admitted, then refused (a busy device): its place in the minute is given back.
        drop(q.admit("a").unwrap());
        let mut first = q.admit("a").unwrap();
        first.created();
        drop(first);
        let mut second = q.admit("a").unwrap();
        second.created();
        let e = q.admit("a").err().unwrap();
        assert!(
            e.message.contains("2 tasks in the last minute"),
            "{}",
            e.message
        );
        // A created task's end does not give back its place in the minute.
        drop(second);
        assert!(q.admit("a").is_err());
    }

    #[tokio::test]
    async fn a_tenant_whose_tasks_used_the_days_tokens_waits_for_the_next_day() {
        use droidmesh_proto::v1::{Task, TokenUsage};
        let store = Store::new(
            crate::limits::Retention {
                keep: 100,
                keep_for_ms: u64::MAX,
            },
            crate::entry::Limits {
                max_events: 100,
                max_event_bytes: 1 << 20,
                max_queued: 4,
            },
        );
        let day = 20_000 * DAY_MS;
        let noon = day + DAY_MS / 2;
        for (id, tenant, created, tokens) in [
            ("y", "a", day - 1, 1_000),
            ("t1", "a", day, 60),
            ("t2", "a", noon, 40),
            ("b1", "b", noon, 99),
        ] {
            let (entry, _control) = store.insert(Task {
                id: id.into(),
                tenant: tenant.into(),
                created_at_ms: created,
                ..Task::default()
            });
            entry.update(|t| {
                t.usage = Some(TokenUsage {
                    input_tokens: tokens - 10,
                    output_tokens: 10,
                    ..TokenUsage::default()
                })
            });
        }
        let budget = TokenBudget::new(100);
        let e = budget.check("a", &store, noon).await.unwrap_err();
        let GatewayError::OverLimit(over) = e else {
            panic!("{e:?}")
        };
        assert!(
            over.message.contains("used 100 model tokens"),
            "{}",
            over.message
        );
        assert!(over.message.contains("limit of 100"), "{}", over.message);
        assert_eq!(over.retry_after_secs, 43_200);
        // Yesterday's task does not count, and other tenants have their own.
        budget.check("b", &store, noon).await.unwrap();
        TokenBudget::new(101)
            .check("a", &store, noon)
            .await
            .unwrap();
        // The next day starts afresh.
        budget.check("a", &store, day + DAY_MS).await.unwrap();
        TokenBudget::new(0).check("a", &store, noon).await.unwrap();
    }

    #[test]
    fn tasks_per_minute_say_when_to_retry() {
        let q = Quotas::new(0, 2);
        for _ in 0..2 {
            let mut slot = q.admit("a").unwrap();
            slot.created();
        }
        let e = q.admit("a").err().unwrap();
        assert!((59..=60).contains(&e.retry_after_secs), "{e:?}");
        assert!(
            e.message.contains("2 tasks in the last minute"),
            "{}",
            e.message
        );
        q.admit("b").unwrap();
    }
}
