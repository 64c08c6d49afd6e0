//! Session threads: one per live session, spawned fresh or taken from a few warm spares. A
//! thread offers itself as a spare as soon as its session ends, then prepares its engine's
//! session-independent work (see [`Engine::prepare`]) while it waits: a session handed to a
//! prepared spare skips building a runtime and context; one handed over during preparation
//! waits for it to finish, which costs no more than building from scratch.

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc,
    },
    thread,
    time::Duration,
};

use crate::{
    Capabilities, Engine, EngineInstance, Prepared, RunControl, SandboxLimits, error::Result,
    session::Command,
};

/// Native stack reserved on a session thread beyond the engine's own stack limit.
const THREAD_STACK_MARGIN: usize = 2 * 1024 * 1024;
/// Spare threads kept after their sessions ended.
const MAX_SPARES: usize = 4;
/// How long a spare waits for a new session before it ends.
const SPARE_LIFETIME: Duration = Duration::from_secs(10);

/// Everything a thread needs to serve one session.
pub(crate) struct Start {
    pub(crate) engine: Arc<dyn Engine>,
    pub(crate) limits: SandboxLimits,
    pub(crate) capabilities: Capabilities,
    pub(crate) inbox: mpsc::Receiver<Command>,
    pub(crate) ready: Ready,
    pub(crate) stop_epoch: Arc<AtomicU64>,
}

/// Where the session's thread says whether its engine instance was made: a caller blocked on
/// it ([`crate::Session::new`]) or awaiting it ([`crate::Session::start`]).
pub(crate) enum Ready {
    Blocking(mpsc::SyncSender<Result<()>>),
    Async(tokio::sync::oneshot::Sender<Result<()>>),
}

impl Ready {
    /// Tells the caller; false when it has stopped waiting.
    fn send(self, made: Result<()>) -> bool {
        match self {
            Ready::Blocking(tx) => tx.send(made).is_ok(),
            Ready::Async(tx) => tx.send(made).is_ok(),
        }
    }
}

struct Spare {
    stack_size: usize,
    start: mpsc::Sender<Start>,
    /// Set once the spare's prepared work is ready.
    prepared: Arc<AtomicBool>,
}

static SPARES: Mutex<Vec<Spare>> = Mutex::new(Vec::new());

/// The native stack of a session thread for `limits`.
fn stack_size(limits: &SandboxLimits) -> usize {
    limits
        .stack_bytes
        .saturating_mul(2)
        .saturating_add(THREAD_STACK_MARGIN)
}

/// Spare threads whose prepared work is ready and whose stack fits a session with `limits`:
/// the next such session starts on one of them unless another takes it first. For tests that
/// wait for a session to take the prepared path.
pub fn prepared_spares(limits: &SandboxLimits) -> usize {
    let stack_size = stack_size(limits);
    SPARES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|s| s.stack_size >= stack_size && s.prepared.load(Ordering::Acquire))
        .count()
}

/// Hands `start` to a spare thread with a large enough stack, or spawns a new thread.
pub(crate) fn launch(mut start: Start) -> Result<()> {
    let stack_size = stack_size(&start.limits);
    loop {
        let spare = {
            let mut spares = SPARES.lock().unwrap_or_else(PoisonError::into_inner);
            let fits = |s: &Spare| s.stack_size >= stack_size;
            let found = spares
                .iter()
                .rposition(|s| fits(s) && s.prepared.load(Ordering::Acquire))
                .or_else(|| spares.iter().rposition(fits));
            found.map(|index| spares.swap_remove(index))
        };
        let Some(spare) = spare else { break };
        match spare.start.send(start) {
            Ok(()) => return Ok(()),
            // That spare has just expired; try the next.
            Err(mpsc::SendError(returned)) => start = returned,
        }
    }
    thread::Builder::new()
        .name(format!("sandbox-{}", start.engine.name()))
        .stack_size(stack_size)
        .spawn(move || run_thread(start, stack_size))?;
    Ok(())
}

fn run_thread(mut start: Start, stack_size: usize) {
    let mut prepared: Option<(&'static str, Prepared)> = None;
    loop {
        let engine = Arc::clone(&start.engine);
        serve_session(start, prepared.take());
        let (offer, next) = mpsc::channel();
        let ready = Arc::new(AtomicBool::new(false));
        {
            let mut spares = SPARES.lock().unwrap_or_else(PoisonError::into_inner);
            if spares.len() >= MAX_SPARES {
                return;
            }
            spares.push(Spare {
                stack_size,
                start: offer,
                prepared: Arc::clone(&ready),
            });
        }
        // A session handed over meanwhile waits in `next` until this is done.
        prepared = engine.prepare().map(|p| (engine.name(), p));
        ready.store(true, Ordering::Release);
        match next.recv_timeout(SPARE_LIFETIME) {
            Ok(next) => start = next,
            Err(_) => return,
        }
    }
}

/// Creates the engine instance, reports readiness, serves commands until the session is
/// dropped, then frees the instance.
fn serve_session(start: Start, prepared: Option<(&'static str, Prepared)>) {
    let Start {
        engine,
        limits,
        capabilities,
        inbox,
        ready,
        stop_epoch,
    } = start;
    let made = match prepared {
        // Work prepared by the same kind of engine on this thread; anything else is dropped.
        Some((name, p)) if name == engine.name() => {
            engine.instantiate_prepared(p, &limits, capabilities)
        }
        _ => engine.instantiate(&limits, capabilities),
    };
    let mut instance = match made {
        Ok(instance) => instance,
        Err(error) => {
            ready.send(Err(error));
            return;
        }
    };
    if !ready.send(Ok(())) {
        return;
    }
    while let Ok(command) = inbox.recv() {
        handle(instance.as_mut(), command, &limits, &stop_epoch);
    }
}

fn handle(
    instance: &mut dyn EngineInstance,
    command: Command,
    limits: &SandboxLimits,
    stop_epoch: &Arc<AtomicU64>,
) {
    match command {
        Command::Run {
            code,
            epoch,
            abandoned,
            reply,
        } => {
            if abandoned.load(Ordering::SeqCst) {
                return;
            }
            let control =
                RunControl::new(limits.wall_clock, epoch, Arc::clone(stop_epoch), abandoned);
            let outcome = instance.run(&code, &control);
            tracing::debug!(
                duration_us = u64::try_from(outcome.duration.as_micros()).unwrap_or(u64::MAX),
                error = outcome.error.as_ref().map(|e| e.kind.to_string()),
                "sandbox run finished"
            );
            let _ = reply.send(outcome);
        }
        Command::SetGlobal { name, value, reply } => {
            let _ = reply.send(instance.set_global(&name, &value));
        }
        Command::SetGlobalJson { name, json, reply } => {
            let _ = reply.send(instance.set_global_json(&name, &json));
        }
        Command::Memory { reply } => {
            let _ = reply.send(instance.memory_usage());
        }
    }
}
