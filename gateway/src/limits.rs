//! The limits the gateway's layers share: a tenant's task limits and the refusal when it is
//! over one ([`crate::quota`] counts them in this process, a shared task store across
//! processes), and how long ended tasks are kept ([`Retention`], applied by the in-memory store
//! and the task store alike).
use std::time::Duration;

/// A refusal: what was exceeded and when to try again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverLimit {
    pub message: String,
    pub retry_after_secs: u64,
}

impl OverLimit {
    /// The tenant has `running` tasks running, its limit.
    pub fn running(running: u64) -> Self {
        Self {
            message: format!(
                "this tenant already has {running} tasks running, its limit \
                 (gateway.auth.max_running_per_tenant); try again once one has ended"
            ),
            retry_after_secs: 5,
        }
    }

    /// The tenant created `created` tasks in the last minute, its limit; the oldest of them
    /// leaves the minute after `wait`.
    pub fn per_minute(created: u64, wait: Duration) -> Self {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        Self {
            message: format!(
                "this tenant created {created} tasks in the last minute, its limit \
                 (gateway.auth.tasks_per_minute_per_tenant); try again in {secs} s"
            ),
            retry_after_secs: secs.max(1),
        }
    }
}

/// The limits on one tenant's tasks that a task store shared by several gateway processes
/// checks as it records a task (0: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantLimits {
    pub max_running: u32,
    pub per_minute: u32,
}

impl TenantLimits {
    pub fn any(&self) -> bool {
        self.max_running > 0 || self.per_minute > 0
    }
}

/// How many ended tasks are kept, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub keep: usize,
    pub keep_for_ms: u64,
}
