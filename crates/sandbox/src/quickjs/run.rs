//! One run: evaluate as an async global script, drive the job queue, collect the outcome.

use std::time::{Duration, Instant};

use rquickjs::{Ctx, Value, context::EvalOptions, promise::PromiseState};
use serde_json::Value as Json;

use super::{
    Instance, convert,
    errors::{self, FILENAME, Phase},
    state::Shared,
    toplevel,
};
use crate::{ErrorKind, RunControl, RunOutcome, SandboxLimits, ScriptError};

/// After a stop, how long to keep draining jobs so they do not leak into the next run.
const DRAIN_AFTER_STOP: Duration = Duration::from_millis(200);

/// QuickJS's initial GC threshold; after each collection it rescales from the heap size.
const DEFAULT_GC_THRESHOLD: usize = 256 * 1024;

pub(super) fn run(instance: &mut Instance, code: &str, control: &RunControl) -> RunOutcome {
    let shared = &instance.shared;
    *shared.control.borrow_mut() = Some(control.clone());
    shared.tripped.set(None);
    let limits = &instance.limits;

    let result = match code.lines().position(|l| l.contains('\0')) {
        Some(index) => Err(ScriptError {
            line: u32::try_from(index + 1).ok(),
            ..ScriptError::new(
                ErrorKind::Syntax,
                "SyntaxError: the code contains a NUL character; write \\0 inside strings instead",
            )
        }),
        None => instance.context.with(|ctx| {
            let protected = |name: &str| {
                instance.reserved.contains(name) || instance.host_globals.contains(name)
            };
            let rewritten = toplevel::rewrite(code, protected);
            let source = rewritten.as_deref().unwrap_or(code);
            let result = execute(&ctx, source, code, shared, limits);
            // Whatever the outcome, jobs the script started run now (within the deadline).
            while shared.stop_reason().is_none() && ctx.execute_pending_job() {}
            result
        }),
    };
    let (mut value, mut error) = match result {
        Ok(value) => (value, None),
        Err(error) => (None, Some(error)),
    };
    if let Some(reason) = shared.tripped.get() {
        drain_after_stop(instance);
        error = error.or_else(|| Some(errors::stopped(reason, limits)));
        value = None;
    }

    *instance.shared.control.borrow_mut() = None;
    instance.shared.tripped.set(None);
    if error.as_ref().is_some_and(|e| e.kind == ErrorKind::Memory) {
        instance.runtime.run_gc();
    }
    let console = instance.shared.console.borrow_mut().take();
    RunOutcome {
        console,
        value,
        error,
        duration: control.started().elapsed(),
    }
}

/// Why a promise did not resolve.
enum Unsettled<'js> {
    Rejected(Value<'js>),
    /// Pending with nothing left to run: it can never settle.
    Stuck,
    /// The run must stop.
    Stopped,
}

/// Runs `source` (the code as rewritten for evaluation); errors quote `code`, as written.
fn execute<'js>(
    ctx: &Ctx<'js>,
    source: &str,
    code: &str,
    shared: &Shared,
    limits: &SandboxLimits,
) -> Result<Option<Json>, ScriptError> {
    let describe = |exception: &Value<'js>, phase| {
        errors::describe(ctx, exception, phase, shared.tripped.get(), limits, code)
    };
    let unsettled = |why: Unsettled<'js>| match why {
        Unsettled::Rejected(exception) => describe(&exception, Phase::Run),
        Unsettled::Stuck => stuck(),
        Unsettled::Stopped => match shared.tripped.get() {
            Some(reason) => errors::stopped(reason, limits),
            None => stuck(),
        },
    };
    let mut options = EvalOptions::default();
    options.global = true;
    options.strict = false;
    options.promise = true;
    options.backtrace_barrier = true;
    options.filename = Some(FILENAME.to_string());
    let promise: Value = ctx
        .eval_with_options(source, options)
        .map_err(|_| describe(&ctx.catch(), Phase::Compile))?;
    // The async script resolves to `{ value: <completion value> }`.
    let result = settle(ctx, promise, shared).map_err(unsettled)?;
    let mut completion = match result.as_object().map(|o| o.get::<_, Value>("value")) {
        Some(Ok(value)) => value,
        _ => Value::new_undefined(ctx.clone()),
    };
    // A script that ends in a promise (an async IIFE) is awaited too.
    if completion.is_promise() {
        completion = settle(ctx, completion, shared).map_err(unsettled)?;
    }
    // Jobs the script started without awaiting them, before reading the value they may change.
    while shared.stop_reason().is_none() && ctx.execute_pending_job() {}
    let value = match convert::completion_to_json(&completion, limits.memory_bytes) {
        Ok(value) => value,
        Err(_) => {
            // A getter or proxy trap threw: no value, unless the run itself must end.
            let error = describe(&ctx.catch(), Phase::Run);
            if matches!(
                error.kind,
                ErrorKind::Memory | ErrorKind::Timeout | ErrorKind::Stopped
            ) {
                return Err(error);
            }
            None
        }
    };
    match shared.stop_reason() {
        Some(reason) => Err(errors::stopped(reason, limits)),
        None => Ok(value),
    }
}

fn settle<'js>(
    ctx: &Ctx<'js>,
    value: Value<'js>,
    shared: &Shared,
) -> Result<Value<'js>, Unsettled<'js>> {
    let Some(promise) = value.into_promise() else {
        return Err(Unsettled::Stuck);
    };
    loop {
        match promise.state() {
            PromiseState::Resolved => {
                return match promise.result::<Value>() {
                    Some(Ok(value)) => Ok(value),
                    _ => Err(Unsettled::Rejected(ctx.catch())),
                };
            }
            PromiseState::Rejected => {
                let _ = promise.result::<Value>();
                return Err(Unsettled::Rejected(ctx.catch()));
            }
            PromiseState::Pending => {}
        }
        if shared.stop_reason().is_some() {
            return Err(Unsettled::Stopped);
        }
        if !ctx.execute_pending_job() {
            return Err(Unsettled::Stuck);
        }
    }
}

fn stuck() -> ScriptError {
    ScriptError::new(
        ErrorKind::Runtime,
        "the script awaits a promise that can never settle (this sandbox has no timers or events)",
    )
}

/// Ends a stopped script's leftover jobs here rather than in the next run. The interrupt only
/// fires every few thousand calls, so many short promise chains would outlive it (and a chain
/// that frees one link before allocating the next never runs out of memory); with a memory limit
/// of one byte no job can allocate the next link of its chain, so every chain ends at its next
/// job. Collection is held off meanwhile: it would only rescan the stopped script's heap.
fn drain_after_stop(instance: &Instance) {
    let runtime = &instance.runtime;
    runtime.set_memory_limit(1);
    runtime.set_gc_threshold(usize::MAX);
    let until = Instant::now() + DRAIN_AFTER_STOP;
    while Instant::now() < until {
        match runtime.execute_pending_job() {
            Ok(true) | Err(_) => {}
            Ok(false) => break,
        }
    }
    runtime.set_memory_limit(instance.limits.memory_bytes);
    runtime.set_gc_threshold(DEFAULT_GC_THRESHOLD);
    runtime.run_gc();
}
