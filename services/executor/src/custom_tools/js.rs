//! JavaScript tools: the operator's function, run for each call in a sandbox session of its
//! own (a fresh context: no device tools, no network, nothing the model's code defined, and
//! nothing left over from an earlier call), with the argument object as its one argument.
//!
//! A fresh context rather than the step's session: the model's code cannot reach into the
//! tool (change its globals, replace what it calls), the tool cannot reach the device or the
//! model's variables, and each call is a function of its arguments alone. A session starts in
//! well under a millisecond (a spare engine thread is reused).
use std::time::Duration;

use droidmesh_sandbox::{Capabilities, ErrorKind, SandboxLimits, Session};
use serde_json::Value;

/// Memory of one call's session.
const MEMORY_BYTES: usize = 32 * 1024 * 1024;
/// The global the argument object is handed over in.
const ARGS: &str = "__droidmesh_tool_args";

/// Whether `source` is a function expression; the error says what is wrong, worded to follow
/// the key. Runs the check in a session on a thread of its own, so it may be called anywhere
/// (from async code too).
pub fn check(source: &str) -> Result<(), String> {
    let code = format!("typeof ({source}\n)");
    let outcome = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let limits = SandboxLimits {
                    wall_clock: Duration::from_secs(2),
                    memory_bytes: MEMORY_BYTES,
                    ..SandboxLimits::default()
                };
                Session::new(limits, Capabilities::new())
                    .map_err(|e| e.to_string())?
                    .run_blocking(code)
                    .map_err(|e| e.to_string())
            })
            .join()
            .map_err(|_| "could not be checked: the sandbox failed".to_owned())?
    })
    .map_err(|e| format!("could not be checked: {e}"))?;
    let expected = "must be a JavaScript function expression such as `function (args) { ... }` or `(args) => ...`";
    if let Some(e) = outcome.error {
        return Err(format!("{expected}: {e}"));
    }
    match outcome.value {
        Some(Value::String(t)) if t == "function" => Ok(()),
        other => Err(format!(
            "{expected}, got a value of type {}",
            other
                .as_ref()
                .and_then(Value::as_str)
                .unwrap_or("undefined")
        )),
    }
}

/// Runs `source` with `args` within `timeout`; its value (a promise's once settled) is the
/// answer, `null` for `undefined`. A throw or a limit is the call's error.
pub async fn call(source: &str, args: &Value, timeout: Duration) -> Result<Value, String> {
    let limits = SandboxLimits {
        wall_clock: timeout,
        memory_bytes: MEMORY_BYTES,
        ..SandboxLimits::default()
    };
    let caps = Capabilities::new().global(ARGS, args.clone());
    let session = Session::start(limits, caps)
        .await
        .map_err(|e| format!("the tool's sandbox could not start: {e}"))?;
    let outcome = session
        .run(format!("({source}\n)(globalThis.{ARGS})"))
        .await
        .map_err(|e| format!("the tool's sandbox failed: {e}"))?;
    match outcome.error {
        Some(e) if matches!(e.kind, ErrorKind::Runtime | ErrorKind::Host) => {
            Err(format!("the tool's code threw {}", e.message))
        }
        Some(e) => Err(format!("the tool's code was stopped: {}", e.message)),
        None => Ok(outcome.value.unwrap_or(Value::Null)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn only_function_expressions_pass_the_check() {
        assert_eq!(check("(args) => args.a + 1"), Ok(()));
        assert_eq!(check("function (args) { return 1 }"), Ok(()));
        assert_eq!(check("async function f(args) { return 1 }"), Ok(()));
        let e = check("42").unwrap_err();
        assert!(e.ends_with("got a value of type number"), "{e}");
        let e = check("function (args) {").unwrap_err();
        assert!(e.contains("SyntaxError"), "{e}");
    }

    #[tokio::test]
    async fn a_call_gets_its_arguments_and_a_fresh_context() {
        let add = "(args) => { globalThis.leftover = (globalThis.leftover || 0) + 1; return { sum: args.a + args.b, leftover } }";
        let t = Duration::from_secs(2);
        for _ in 0..2 {
            let v = call(add, &json!({"a": 2, "b": 3}), t).await.unwrap();
            assert_eq!(v, json!({"sum": 5, "leftover": 1}));
        }
        let v = call("async (args) => args.x", &json!({}), t).await.unwrap();
        assert_eq!(v, Value::Null);
        let e = call("() => { throw new TypeError('no') }", &json!({}), t)
            .await
            .unwrap_err();
        assert_eq!(e, "the tool's code threw TypeError: no");
        let e = call(
            "() => { for (;;) {} }",
            &json!({}),
            Duration::from_millis(100),
        )
        .await
        .unwrap_err();
        assert!(e.starts_with("the tool's code was stopped: "), "{e}");
    }
}
