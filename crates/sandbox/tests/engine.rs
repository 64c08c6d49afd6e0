//! The engine seam and session isolation: a custom engine behind `Session`, reused threads.

use std::sync::Arc;

use droidmesh_sandbox::{
    Capabilities, Engine, EngineInstance, ErrorKind, MemoryStats, RunControl, RunOutcome,
    SandboxError, SandboxLimits, Session, StopHandle,
};
use serde_json::{Value, json};

/// An engine that "evaluates" by echoing the code and the globals it was given.
struct Echo;

struct EchoInstance {
    globals: serde_json::Map<String, Value>,
}

impl Engine for Echo {
    fn name(&self) -> &'static str {
        "echo"
    }

    fn instantiate(
        &self,
        _limits: &SandboxLimits,
        capabilities: Capabilities,
    ) -> Result<Box<dyn EngineInstance>, SandboxError> {
        Ok(Box::new(EchoInstance {
            globals: capabilities.globals,
        }))
    }
}

impl EngineInstance for EchoInstance {
    fn run(&mut self, code: &str, control: &RunControl) -> RunOutcome {
        RunOutcome {
            value: Some(json!({ "code": code, "globals": self.globals })),
            duration: control.started().elapsed(),
            ..RunOutcome::default()
        }
    }

    fn set_global(&mut self, name: &str, value: &Value) -> Result<(), SandboxError> {
        self.globals.insert(name.to_string(), value.clone());
        Ok(())
    }

    fn memory_usage(&self) -> MemoryStats {
        MemoryStats::default()
    }
}

#[tokio::test]
async fn a_session_runs_any_engine_behind_the_trait() {
    let caps = Capabilities::new().global("ui_state", json!(1));
    let s = Session::with_engine(Arc::new(Echo), SandboxLimits::default(), caps).unwrap();
    assert_eq!(s.engine(), "echo");
    s.set_global("ORIGINAL", json!("x")).await.unwrap();
    // JSON text reaches an engine without its own parser as the parsed value.
    let set = s.queue_global_json("ui_state", "[1, 2]".into()).unwrap();
    let out = s.run("tap(1)").await.unwrap();
    set.outcome().await.unwrap();
    assert_eq!(
        out.value,
        Some(json!({ "code": "tap(1)", "globals": { "ui_state": [1, 2], "ORIGINAL": "x" } }))
    );
    let bad = s.queue_global_json("ui_state", "[1,".into()).unwrap();
    assert!(bad.outcome().await.is_err());
}

#[test]
fn sessions_and_handles_can_cross_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Session>();
    assert_send_sync::<StopHandle>();
}

#[test]
fn a_new_session_never_sees_a_dropped_sessions_state() {
    for round in 0..10 {
        let s = Session::new(SandboxLimits::default(), Capabilities::new()).unwrap();
        let out = s
            .run_blocking("typeof secret + ':' + typeof leaked")
            .unwrap();
        assert_eq!(
            out.value,
            Some(json!("undefined:undefined")),
            "round {round}"
        );
        s.run_blocking("let secret = 'from the last session'; globalThis.leaked = 1")
            .unwrap();
    }
}

#[test]
fn a_larger_stack_limit_allows_deeper_recursion() {
    let depth = |stack_bytes: usize| {
        let limits = SandboxLimits {
            stack_bytes,
            ..SandboxLimits::default()
        };
        let s = Session::new(limits, Capabilities::new()).unwrap();
        let out = s
            .run_blocking(
                "let d = 0; function down() { d++; down() } try { down() } catch (e) {} d",
            )
            .unwrap();
        out.value.unwrap().as_u64().unwrap()
    };
    let small = depth(256 * 1024);
    let large = depth(4 * 1024 * 1024);
    assert!(large > small * 4, "{small} vs {large}");
}

#[test]
fn a_session_on_a_prepared_spare_is_fresh_and_keeps_its_limits() {
    // Before each session, a spare thread (the one the last session left) has prepared its
    // next runtime and context, so the session takes the prepared path (unless a test running
    // alongside takes that spare first).
    let settle = |limits: &SandboxLimits| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while droidmesh_sandbox::prepared_spares(limits) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no spare thread prepared within 10 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    };
    drop(Session::new(SandboxLimits::default(), Capabilities::new()).unwrap());
    for round in 0..5 {
        settle(&SandboxLimits::default());
        let s = Session::new(SandboxLimits::default(), Capabilities::new()).unwrap();
        let out = s
            .run_blocking("typeof leaked + ':' + typeof ({}).polluted")
            .unwrap();
        assert_eq!(
            out.value,
            Some(json!("undefined:undefined")),
            "round {round}"
        );
        s.run_blocking("globalThis.leaked = 1; Object.prototype.polluted = 1")
            .unwrap();
    }
    let small = SandboxLimits {
        memory_bytes: 8 * 1024 * 1024,
        stack_bytes: 256 * 1024,
        ..SandboxLimits::default()
    };
    settle(&small);
    let s = Session::new(small, Capabilities::new()).unwrap();
    let out = s
        .run_blocking("let a = []; for (;;) a.push('x'.repeat(1 << 16) + a.length)")
        .unwrap();
    assert_eq!(out.error.map(|e| e.kind), Some(ErrorKind::Memory));
    let out = s.run_blocking("function down() { down() } down()").unwrap();
    assert_eq!(out.error.map(|e| e.kind), Some(ErrorKind::Stack));
    assert_eq!(s.run_blocking("1 + 1").unwrap().value, Some(json!(2)));
}

/// An engine whose instance is made only once its gate opens (or fails after 5 s).
struct Gated(std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>);

impl Engine for Gated {
    fn name(&self) -> &'static str {
        "gated"
    }

    fn instantiate(
        &self,
        _limits: &SandboxLimits,
        capabilities: Capabilities,
    ) -> Result<Box<dyn EngineInstance>, SandboxError> {
        let gate = self.0.lock().unwrap().take();
        match gate.map(|g| g.recv_timeout(std::time::Duration::from_secs(5))) {
            Some(Ok(())) => Ok(Box::new(EchoInstance {
                globals: capabilities.globals,
            })),
            _ => Err(SandboxError::Engine("the gate never opened".into())),
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn an_async_start_leaves_the_runtime_free_while_the_engine_is_made() {
    let (open, gate) = std::sync::mpsc::channel::<()>();
    // Another task of this one-thread runtime opens the gate: it runs only if starting the
    // session does not hold the thread.
    tokio::spawn(async move {
        let _ = open.send(());
    });
    let engine = Arc::new(Gated(std::sync::Mutex::new(Some(gate))));
    let s = Session::start_with_engine(engine, SandboxLimits::default(), Capabilities::new())
        .await
        .unwrap();
    assert_eq!(s.engine(), "gated");
    assert!(s.run("x").await.unwrap().error.is_none());
    // An engine that cannot make its instance is an error of the start.
    let closed = Arc::new(Gated(std::sync::Mutex::new(None)));
    let e = Session::start_with_engine(closed, SandboxLimits::default(), Capabilities::new())
        .await
        .expect_err("a session whose engine failed");
    assert!(e.to_string().contains("the gate never opened"), "{e}");
}
