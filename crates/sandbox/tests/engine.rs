//! The engine seam and session isolation: a custom engine behind `Session`, reused threads.

use std::sync::Arc;

use droidmesh_sandbox::{
    Capabilities, Engine, EngineInstance, MemoryStats, RunControl, RunOutcome, SandboxError,
    SandboxLimits, Session, StopHandle,
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
    let out = s.run("tap(1)").await.unwrap();
    assert_eq!(
        out.value,
        Some(json!({ "code": "tap(1)", "globals": { "ui_state": 1, "ORIGINAL": "x" } }))
    );
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
