//! Per-tenant limits of this gateway process: tasks running at once and tasks created per
//! minute (`gateway.auth.max_running_per_tenant`, `gateway.auth.tasks_per_minute_per_tenant`;
//! 0: no limit). Counted in this process only: replicas behind a balancer each allow as many.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MINUTE: Duration = Duration::from_secs(60);

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

/// A refusal: what was exceeded and when to try again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverLimit {
    pub message: String,
    pub retry_after_secs: u64,
}

/// A running task's place in its tenant's count; given back when dropped.
pub struct Slot {
    tenant: String,
    tenants: Option<Arc<Mutex<HashMap<String, Use>>>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(tenants) = &self.tenants else {
            return;
        };
        let mut tenants = tenants.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(u) = tenants.get_mut(&self.tenant) {
            u.running = u.running.saturating_sub(1);
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

    /// Admits one more task of `tenant`, or says which limit it is over and when to retry.
    pub fn admit(&self, tenant: &str) -> Result<Slot, OverLimit> {
        if self.max_running == 0 && self.per_minute == 0 {
            return Ok(Slot {
                tenant: String::new(),
                tenants: None,
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
            return Err(OverLimit {
                message: format!(
                    "this tenant already has {} tasks running, its limit \
                     (gateway.auth.max_running_per_tenant); try again once one has ended",
                    u.running
                ),
                retry_after_secs: 5,
            });
        }
        if self.per_minute > 0 && u.started.len() >= self.per_minute as usize {
            let oldest = u.started.front().copied().unwrap_or(now);
            let wait = MINUTE.saturating_sub(now.duration_since(oldest));
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            return Err(OverLimit {
                message: format!(
                    "this tenant created {} tasks in the last minute, its limit \
                     (gateway.auth.tasks_per_minute_per_tenant); try again in {secs} s",
                    u.started.len()
                ),
                retry_after_secs: secs.max(1),
            });
        }
        u.running += 1;
        if self.per_minute > 0 {
            u.started.push_back(now);
        }
        Ok(Slot {
            tenant: tenant.to_owned(),
            tenants: Some(self.tenants.clone()),
        })
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
    fn tasks_per_minute_say_when_to_retry() {
        let q = Quotas::new(0, 2);
        drop(q.admit("a").unwrap());
        drop(q.admit("a").unwrap());
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
