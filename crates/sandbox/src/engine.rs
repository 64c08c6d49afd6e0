//! The engine abstraction (QuickJS today, V8 where it can be built) and per-run control.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{Capabilities, RunOutcome, SandboxLimits, error::Result};

/// A JavaScript engine. [`Engine::instantiate`] is called on the session's own thread, so the
/// instance it returns need not be `Send`.
pub trait Engine: Send + Sync + 'static {
    /// A short name for logs (`quickjs`).
    fn name(&self) -> &'static str;

    /// Creates an instance with these limits, granting exactly these capabilities.
    fn instantiate(
        &self,
        limits: &SandboxLimits,
        capabilities: Capabilities,
    ) -> Result<Box<dyn EngineInstance>>;

    /// Does ahead of time the part of [`Engine::instantiate`] that depends on neither limits
    /// nor capabilities (for QuickJS: a runtime and a context with the standard built-ins).
    /// A session thread waiting as a spare keeps one ready, so that the next session on it
    /// starts without that cost. A prepared value is used by at most one session and never
    /// after any script ran in it. `None` (the default): nothing to prepare.
    fn prepare(&self) -> Option<Prepared> {
        None
    }

    /// [`Engine::instantiate`] from what [`Engine::prepare`] made on this thread. The default
    /// ignores it.
    fn instantiate_prepared(
        &self,
        prepared: Prepared,
        limits: &SandboxLimits,
        capabilities: Capabilities,
    ) -> Result<Box<dyn EngineInstance>> {
        drop(prepared);
        self.instantiate(limits, capabilities)
    }
}

/// Engine-specific work done ahead of a session (see [`Engine::prepare`]). It stays on the
/// thread that made it.
pub struct Prepared(Box<dyn std::any::Any>);

impl Prepared {
    pub fn new<T: 'static>(value: T) -> Self {
        Self(Box::new(value))
    }

    /// The value, if it is a `T`.
    pub fn take<T: 'static>(self) -> Option<T> {
        self.0.downcast::<T>().ok().map(|b| *b)
    }
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prepared")
    }
}

/// One engine instance: a heap and a global scope that persist across runs.
pub trait EngineInstance {
    /// Runs `code` as a script in the persistent global scope, with top-level `await`. Must
    /// return once `control.check()` reports a reason to stop.
    fn run(&mut self, code: &str, control: &RunControl) -> RunOutcome;

    /// Sets (or replaces) a global variable visible to later runs.
    fn set_global(&mut self, name: &str, value: &Value) -> Result<()>;

    /// [`EngineInstance::set_global`] from JSON text. An engine that parses JSON itself
    /// overrides this to skip the intermediate [`Value`].
    fn set_global_json(&mut self, name: &str, json: &str) -> Result<()> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| crate::SandboxError::InvalidGlobal {
                name: name.to_owned(),
                reason: format!("the value is not JSON: {e}"),
            })?;
        self.set_global(name, &value)
    }

    /// Heap statistics.
    fn memory_usage(&self) -> MemoryStats;
}

/// Heap statistics of an engine instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes the engine has allocated (its view of its heap).
    pub allocated_bytes: u64,
    /// The engine's memory limit in bytes (0 when unlimited).
    pub limit_bytes: u64,
    /// Live objects.
    pub objects: u64,
}

/// Why a run must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The wall clock ran out.
    Deadline,
    /// A [`StopHandle`](crate::StopHandle) asked, or the caller stopped waiting.
    Stopped,
}

/// What an engine polls while a run executes: the deadline and the stop signals.
#[derive(Debug, Clone)]
pub struct RunControl {
    started: Instant,
    deadline: Instant,
    wall_clock: Duration,
    epoch: u64,
    stop_epoch: Arc<AtomicU64>,
    abandoned: Arc<AtomicBool>,
}

impl RunControl {
    /// Control for a run starting now, stopped when `stop_epoch` moves past `epoch` or when
    /// `abandoned` is set.
    pub(crate) fn new(
        wall_clock: Duration,
        epoch: u64,
        stop_epoch: Arc<AtomicU64>,
        abandoned: Arc<AtomicBool>,
    ) -> Self {
        let started = Instant::now();
        Self {
            started,
            deadline: started.checked_add(wall_clock).unwrap_or(started),
            wall_clock,
            epoch,
            stop_epoch,
            abandoned,
        }
    }

    /// A control with only a deadline (for engines driven outside a session, e.g. in tests).
    pub fn with_deadline(wall_clock: Duration) -> Self {
        Self::new(
            wall_clock,
            0,
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        )
    }

    /// The reason to stop now, if any.
    pub fn check(&self) -> Option<StopReason> {
        if self.stop_epoch.load(Ordering::Relaxed) != self.epoch
            || self.abandoned.load(Ordering::Relaxed)
        {
            Some(StopReason::Stopped)
        } else if Instant::now() >= self.deadline {
            Some(StopReason::Deadline)
        } else {
            None
        }
    }

    /// When the run started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The wall-clock limit of this run.
    pub fn wall_clock(&self) -> Duration {
        self.wall_clock
    }

    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}
