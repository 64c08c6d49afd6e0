//! Shared fixtures: a session with recording device-like tools.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use droidmesh_sandbox::{
    Capabilities, ErrorKind, HostFunction, ParamSpec, ParamType, RunOutcome, SandboxLimits, Session,
};
use serde_json::{Value, json};

/// Every host call a session made: (function, arguments).
#[derive(Default)]
pub struct Recorder {
    calls: Mutex<Vec<(String, Vec<Value>)>>,
}

impl Recorder {
    pub fn calls(&self) -> Vec<(String, Vec<Value>)> {
        self.calls.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    fn record(&self, name: &str, args: &[Value]) {
        self.calls
            .lock()
            .unwrap()
            .push((name.to_string(), args.to_vec()));
    }
}

/// `tap(index)`, `swipe(x1, y1, x2, y2, duration_ms?)`, `input_text(text)`, `echo(value)`,
/// `fail(message)` and `explode()`, all recording their calls.
pub fn tools(recorder: &Arc<Recorder>) -> Vec<HostFunction> {
    let r = Arc::clone(recorder);
    let tap = HostFunction::new("tap", "Tap the element with this index.", move |args| {
        r.record("tap", &args);
        Ok(json!({ "tapped": args[0] }))
    })
    .param(ParamSpec::required(
        "index",
        ParamType::Integer,
        "the index shown in ui_state",
    ));
    let r = Arc::clone(recorder);
    let swipe = HostFunction::new("swipe", "Swipe between two points.", move |args| {
        r.record("swipe", &args);
        Ok(Value::Null)
    })
    .param(ParamSpec::required("x1", ParamType::Number, ""))
    .param(ParamSpec::required("y1", ParamType::Number, ""))
    .param(ParamSpec::required("x2", ParamType::Number, ""))
    .param(ParamSpec::required("y2", ParamType::Number, ""))
    .param(ParamSpec::optional(
        "duration_ms",
        ParamType::Number,
        "how long the swipe takes",
    ));
    let r = Arc::clone(recorder);
    let input = HostFunction::new(
        "input_text",
        "Type text into the focused field.",
        move |args| {
            r.record("input_text", &[json!(args[0].as_str().map_or(0, str::len))]);
            Ok(json!(args[0].as_str().map_or(0, str::len)))
        },
    )
    .param(ParamSpec::required(
        "text",
        ParamType::String,
        "the text to type",
    ));
    let r = Arc::clone(recorder);
    let echo = HostFunction::new("echo", "Return the value.", move |args| {
        r.record("echo", &args);
        Ok(args[0].clone())
    })
    .param(ParamSpec::required("value", ParamType::Any, ""));
    let r = Arc::clone(recorder);
    let fail = HostFunction::new("fail", "Always fails.", move |args| {
        r.record("fail", &args);
        Err(args[0].as_str().unwrap_or("failed").to_string())
    })
    .param(ParamSpec::required("message", ParamType::String, ""));
    let explode = HostFunction::new("explode", "Panics.", |_| panic!("boom from the host"));
    vec![tap, swipe, input, echo, fail, explode]
}

/// Limits that make endless scripts end quickly.
pub fn quick_limits() -> SandboxLimits {
    SandboxLimits {
        wall_clock: Duration::from_millis(400),
        memory_bytes: 32 * 1024 * 1024,
        ..SandboxLimits::default()
    }
}

pub fn session_with(limits: SandboxLimits) -> (Session, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let mut capabilities = Capabilities::new().global("ui_state", json!({ "elements": [] }));
    capabilities.functions = tools(&recorder);
    (Session::new(limits, capabilities).unwrap(), recorder)
}

pub fn session() -> (Session, Arc<Recorder>) {
    session_with(quick_limits())
}

/// Runs `code`, panicking with the outcome if it failed.
pub fn ok(session: &Session, code: &str) -> RunOutcome {
    let outcome = session.run_blocking(code).unwrap();
    assert!(outcome.error.is_none(), "{code:?} failed: {outcome:?}");
    outcome
}

/// Runs `code` and returns its value.
pub fn value(session: &Session, code: &str) -> Value {
    ok(session, code).value.unwrap_or(Value::Null)
}

/// Runs `code`, expecting an error of `kind` whose message contains `needle`.
pub fn fails(session: &Session, code: &str, kind: ErrorKind, needle: &str) -> RunOutcome {
    let outcome = session.run_blocking(code).unwrap();
    let error = outcome
        .error
        .clone()
        .unwrap_or_else(|| panic!("{code:?} succeeded: {outcome:?}"));
    assert_eq!(error.kind, kind, "{code:?}: {error:?}");
    assert!(
        error.message.contains(needle),
        "{code:?}: {:?} lacks {needle:?}",
        error.message
    );
    outcome
}

/// Measures `f`.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}
