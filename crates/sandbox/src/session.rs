//! A session: one engine instance on its own OS thread, driven over a channel.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU64, Ordering},
    mpsc,
};

use serde_json::Value;
use tokio::sync::oneshot;

use crate::{
    Capabilities, Engine, MemoryStats, QuickJs, RunOutcome, SandboxLimits,
    error::{Result, SandboxError},
    worker,
};

/// What a session's thread is asked to do.
pub(crate) enum Command {
    Run {
        code: String,
        epoch: u64,
        abandoned: Arc<AtomicBool>,
        reply: oneshot::Sender<RunOutcome>,
    },
    SetGlobal {
        name: String,
        value: Value,
        reply: oneshot::Sender<Result<()>>,
    },
    SetGlobalJson {
        name: String,
        json: String,
        reply: oneshot::Sender<Result<()>>,
    },
    Memory {
        reply: oneshot::Sender<MemoryStats>,
    },
}

/// A sandbox session: a persistent JavaScript global scope on a dedicated OS thread.
///
/// Runs execute one at a time, in submission order. [`Session::run`] awaits the thread without
/// blocking async workers; the blocking variants are for plain threads. Host functions run on
/// the session thread and may block it; they never run on the caller's thread. Dropping the
/// session frees its engine on that thread; the thread then ends, or waits briefly as a warm
/// spare for the next session (see [`Session::new`]).
pub struct Session {
    commands: mpsc::Sender<Command>,
    stop_epoch: Arc<AtomicU64>,
    limits: SandboxLimits,
    engine: &'static str,
    _live: crate::metrics::LiveSession,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("engine", &self.engine)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Starts a QuickJS session. Blocks briefly (well under a millisecond) while the engine is
    /// created on the session's thread: a new one, or a spare left by a dropped session (a few
    /// are kept for some seconds; reusing one avoids the page faults of a fresh thread's stack
    /// and heap).
    pub fn new(limits: SandboxLimits, capabilities: Capabilities) -> Result<Self> {
        Self::with_engine(Arc::new(QuickJs), limits, capabilities)
    }

    /// Starts a session on the given engine.
    pub fn with_engine(
        engine: Arc<dyn Engine>,
        limits: SandboxLimits,
        capabilities: Capabilities,
    ) -> Result<Self> {
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let session = Self::launch(
            engine,
            limits,
            capabilities,
            worker::Ready::Blocking(ready_tx),
        )?;
        ready_rx.recv().map_err(|_| SandboxError::Closed)??;
        Ok(session)
    }

    /// [`Session::new`] for async code: the engine is made on the session's thread while the
    /// caller's task waits without holding its thread (the blocking constructor holds an async
    /// runtime's worker for the engine's creation, most of a millisecond on a fresh thread,
    /// during which its other tasks wait; with hundreds of sessions starting at once that adds
    /// up).
    pub async fn start(limits: SandboxLimits, capabilities: Capabilities) -> Result<Self> {
        Self::start_with_engine(Arc::new(QuickJs), limits, capabilities).await
    }

    /// [`Session::start`] on the given engine.
    pub async fn start_with_engine(
        engine: Arc<dyn Engine>,
        limits: SandboxLimits,
        capabilities: Capabilities,
    ) -> Result<Self> {
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let session = Self::launch(engine, limits, capabilities, worker::Ready::Async(ready_tx))?;
        ready_rx.await.map_err(|_| SandboxError::Closed)??;
        Ok(session)
    }

    /// Hands the session to a thread, which says on `ready` once its engine instance is made.
    fn launch(
        engine: Arc<dyn Engine>,
        limits: SandboxLimits,
        capabilities: Capabilities,
        ready: worker::Ready,
    ) -> Result<Self> {
        capabilities.validate()?;
        let (commands, inbox) = mpsc::channel();
        let stop_epoch = Arc::new(AtomicU64::new(0));
        let engine_name = engine.name();
        worker::launch(worker::Start {
            engine,
            limits: limits.clone(),
            capabilities,
            inbox,
            ready,
            stop_epoch: Arc::clone(&stop_epoch),
        })?;
        Ok(Self {
            commands,
            stop_epoch,
            limits,
            engine: engine_name,
            _live: crate::metrics::LiveSession::start(),
        })
    }

    /// Runs `code` and waits for its outcome without blocking the async runtime. If the future
    /// is dropped before the run ends, the run is stopped.
    pub async fn run(&self, code: impl Into<String>) -> Result<RunOutcome> {
        let abandoned = Arc::new(AtomicBool::new(false));
        let reply = self.submit(code.into(), Arc::clone(&abandoned))?;
        let guard = AbandonGuard(Some(abandoned));
        let outcome = reply.await.map_err(|_| SandboxError::Closed);
        guard.disarm();
        outcome
    }

    /// Runs `code` and blocks until its outcome.
    ///
    /// # Panics
    ///
    /// When called from within an async runtime (tokio refuses to block a worker there); use
    /// [`Session::run`] from async code.
    pub fn run_blocking(&self, code: impl Into<String>) -> Result<RunOutcome> {
        let reply = self.submit(code.into(), Arc::new(AtomicBool::new(false)))?;
        reply.blocking_recv().map_err(|_| SandboxError::Closed)
    }

    /// Sets a global (for example a fresh `ui_state` before each step). It takes effect after
    /// the runs already submitted.
    pub async fn set_global(&self, name: impl Into<String>, value: Value) -> Result<()> {
        self.global(name.into(), value)?.outcome().await
    }

    /// Blocking variant of [`Session::set_global`]; panics inside an async runtime, like
    /// [`Session::run_blocking`].
    pub fn set_global_blocking(&self, name: impl Into<String>, value: Value) -> Result<()> {
        self.global(name.into(), value)?
            .0
            .blocking_recv()
            .map_err(|_| SandboxError::Closed)?
    }

    /// Queues `name = JSON.parse(json)` without waiting for it: the runs submitted after it see
    /// it (commands are served in order), and one trip to the session's thread serves the
    /// global and the run together. [`GlobalSet::outcome`] tells whether it was set.
    pub fn queue_global_json(&self, name: impl Into<String>, json: String) -> Result<GlobalSet> {
        let name = name.into();
        self.queue_global(|reply| Command::SetGlobalJson { name, json, reply })
    }

    /// Queues `name = value`, as [`Session::queue_global_json`] does with JSON text.
    fn global(&self, name: String, value: Value) -> Result<GlobalSet> {
        self.queue_global(|reply| Command::SetGlobal { name, value, reply })
    }

    fn queue_global(
        &self,
        command: impl FnOnce(oneshot::Sender<Result<()>>) -> Command,
    ) -> Result<GlobalSet> {
        let (reply, rx) = oneshot::channel();
        self.send(command(reply))?;
        Ok(GlobalSet(rx))
    }

    /// The engine's heap statistics.
    pub async fn memory_usage(&self) -> Result<MemoryStats> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::Memory { reply })?;
        rx.await.map_err(|_| SandboxError::Closed)
    }

    /// Blocking variant of [`Session::memory_usage`]; panics inside an async runtime, like
    /// [`Session::run_blocking`].
    pub fn memory_usage_blocking(&self) -> Result<MemoryStats> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::Memory { reply })?;
        rx.blocking_recv().map_err(|_| SandboxError::Closed)
    }

    /// A handle that stops this session's runs from any thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            stop_epoch: Arc::clone(&self.stop_epoch),
        }
    }

    /// The limits every run of this session has.
    pub fn limits(&self) -> &SandboxLimits {
        &self.limits
    }

    /// The engine's name.
    pub fn engine(&self) -> &'static str {
        self.engine
    }

    fn submit(
        &self,
        code: String,
        abandoned: Arc<AtomicBool>,
    ) -> Result<oneshot::Receiver<RunOutcome>> {
        let (reply, rx) = oneshot::channel();
        let epoch = self.stop_epoch.load(Ordering::SeqCst);
        self.send(Command::Run {
            code,
            epoch,
            abandoned,
            reply,
        })?;
        Ok(rx)
    }

    fn send(&self, command: Command) -> Result<()> {
        self.commands
            .send(command)
            .map_err(|_| SandboxError::Closed)
    }
}

/// A global queued by [`Session::queue_global_json`].
#[derive(Debug)]
#[must_use = "a global that could not be set is only known from its outcome"]
pub struct GlobalSet(oneshot::Receiver<Result<()>>);

impl GlobalSet {
    /// Whether the global was set. Ready once a run submitted after it has returned.
    pub async fn outcome(self) -> Result<()> {
        self.0.await.map_err(|_| SandboxError::Closed)?
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Stop a run in progress; the thread then sees the closed channel and exits.
        self.stop_epoch.fetch_add(1, Ordering::SeqCst);
    }
}

/// Stops runs of one session from any thread: the run in progress and any already submitted
/// when [`StopHandle::stop`] is called end with [`ErrorKind::Stopped`](crate::ErrorKind);
/// runs submitted afterwards are not affected. A script inside a blocking host function stops
/// when that function returns.
#[derive(Debug, Clone)]
pub struct StopHandle {
    stop_epoch: Arc<AtomicU64>,
}

impl StopHandle {
    /// Stops the run in progress and the runs queued behind it.
    pub fn stop(&self) {
        self.stop_epoch.fetch_add(1, Ordering::SeqCst);
    }
}

/// Marks a run as abandoned when its future is dropped before the outcome arrives.
struct AbandonGuard(Option<Arc<AtomicBool>>);

impl AbandonGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        if let Some(flag) = &self.0 {
            flag.store(true, Ordering::SeqCst);
        }
    }
}
