//! One run of the model's program: a fresh sandbox session that grants the constant `ORIGINAL`
//! and `input_text(text)`, nothing else (no console, no sleep, no network), and the checks on
//! the text the program produced.
//!
//! The program must call `input_text` exactly once. Zero calls and several calls are both
//! refused: a program that calls it per line, as if it appended, would otherwise have only its
//! last line typed.
use std::sync::{Arc, Mutex};
use std::time::Duration;

use droidmesh_sandbox::{
    Capabilities, HostFunction, ParamSpec, ParamType, SandboxError, SandboxLimits, Session,
};
use serde_json::Value;

/// Limits of one run and of the text it may produce.
#[derive(Debug, Clone)]
pub struct ProgramLimits {
    pub wall_clock: Duration,
    pub memory_bytes: usize,
    /// Longest text, in characters, the program may produce.
    pub max_chars: usize,
}

/// What `input_text` received during one run.
#[derive(Debug, Default)]
struct Calls {
    count: u32,
    last: Option<String>,
}

/// Makes `ORIGINAL` read-only before the program runs.
const FREEZE_ORIGINAL: &str =
    "Object.defineProperty(globalThis, 'ORIGINAL', { writable: false, configurable: false });";

/// Runs `code` with `ORIGINAL` set to `original`. The outer error is the sandbox failing; the
/// inner one is the program failing, worded for the model that wrote it.
pub async fn run(
    code: &str,
    original: &str,
    limits: &ProgramLimits,
) -> Result<Result<String, String>, SandboxError> {
    let calls = Arc::new(Mutex::new(Calls::default()));
    let seen = Arc::clone(&calls);
    let input_text = HostFunction::new(
        "input_text",
        "Replace the field's whole content with `text`.",
        move |args| {
            let text = args.first().and_then(Value::as_str).unwrap_or_default();
            let mut calls = seen.lock().unwrap_or_else(|p| p.into_inner());
            calls.count = calls.count.saturating_add(1);
            calls.last = Some(text.to_owned());
            Ok(Value::Null)
        },
    )
    .param(ParamSpec::required(
        "text",
        ParamType::String,
        "the field's complete new content",
    ));
    let capabilities = Capabilities::new()
        .console(false)
        .function(input_text)
        .global("ORIGINAL", Value::String(original.to_owned()));
    let sandbox = SandboxLimits {
        wall_clock: limits.wall_clock,
        memory_bytes: limits.memory_bytes,
        console_bytes: 0,
        // Any text within the character limit fits (4 bytes per character at most); longer
        // ones are refused inside the script, and the count below words it for the model.
        max_string_arg_bytes: limits.max_chars.saturating_mul(4).max(1024),
        ..SandboxLimits::default()
    };
    let session = Session::start(sandbox, capabilities).await?;
    let frozen = session.run(FREEZE_ORIGINAL).await?;
    if let Some(e) = frozen.error {
        return Err(SandboxError::Engine(format!(
            "ORIGINAL could not be made read-only: {e}"
        )));
    }
    let outcome = session.run(code).await?;
    drop(session);
    if let Some(e) = outcome.error {
        return Ok(Err(e.to_string()));
    }
    let calls = std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(match (calls.count, calls.last) {
        (1, Some(text)) => check_typable(&text, limits.max_chars).map(|()| text),
        (0, _) | (_, None) => Err(
            "the program ran but never called input_text: call it once with the complete new text of the field".into(),
        ),
        (n, _) => Err(format!(
            "the program called input_text {n} times; call it exactly once with the complete new text of the field (each call replaces the whole field, it does not append)"
        )),
    })
}

/// Checks that `text` is something a phone can type: at most `max_chars` characters and no
/// control character but line breaks and tabs. Letters of any script, emoji and joiners pass:
/// the device service types them with the phone's keyboard app and, on a phone without one,
/// refuses them naming what to install.
pub fn check_typable(text: &str, max_chars: usize) -> Result<(), String> {
    let chars = text.chars().count();
    if chars > max_chars {
        return Err(format!(
            "the new text has {chars} characters; at most {max_chars} can be typed"
        ));
    }
    if let Some((pos, c)) = text
        .chars()
        .enumerate()
        .find(|(_, c)| c.is_control() && *c != '\n' && *c != '\t')
    {
        return Err(format!(
            "the new text cannot be typed: {c:?} at position {pos}; a phone types no control characters but line breaks and tabs"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ProgramLimits {
        ProgramLimits {
            wall_clock: Duration::from_millis(500),
            memory_bytes: 16 * 1024 * 1024,
            max_chars: 100,
        }
    }

    async fn outcome(code: &str, original: &str) -> Result<String, String> {
        run(code, original, &limits()).await.unwrap()
    }

    #[tokio::test]
    async fn the_text_of_the_one_call_is_the_result() {
        let code = "const items = ORIGINAL.split(',').map(s => s.trim());\ninput_text(items.map(s => '- ' + s).join('\\n'))";
        assert_eq!(outcome(code, "milk, eggs").await.unwrap(), "- milk\n- eggs");
    }

    #[tokio::test]
    async fn zero_or_several_calls_are_refused() {
        let none = outcome("const x = ORIGINAL.toUpperCase()", "a").await;
        assert!(none.unwrap_err().contains("never called input_text"));
        let two = outcome("input_text('a'); input_text('b')", "a").await;
        assert!(two.unwrap_err().contains("called input_text 2 times"));
    }

    #[tokio::test]
    async fn original_is_read_only_and_nothing_else_is_granted() {
        let err = outcome("ORIGINAL = 'x'; input_text(ORIGINAL)", "kept").await;
        assert_eq!(err.unwrap(), "kept");
        for name in ["console", "fetch", "sleep", "require"] {
            let err = outcome(&format!("{name}('x'); input_text('y')"), "a")
                .await
                .unwrap_err();
            assert!(
                err.contains(&format!("{name} is not defined")),
                "{name}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn errors_and_endless_loops_end_the_run_with_a_message() {
        let syntax = outcome("input_text('a' +)", "").await.unwrap_err();
        assert!(syntax.contains("SyntaxError"), "{syntax}");
        let endless = outcome("while (true) {}", "").await.unwrap_err();
        assert!(endless.contains("500ms"), "{endless}");
        let wrong_type = outcome("input_text(42)", "").await.unwrap_err();
        assert!(wrong_type.contains("must be a string"), "{wrong_type}");
    }

    #[tokio::test]
    async fn text_that_cannot_be_typed_is_refused() {
        let bell = outcome("input_text('\\u0007 milk')", "").await.unwrap_err();
        assert!(bell.contains("'\\u{7}' at position 0"), "{bell}");
        let long = outcome("input_text('x'.repeat(101))", "")
            .await
            .unwrap_err();
        assert!(long.contains("101 characters; at most 100"), "{long}");
        assert!(check_typable("tab\there", 100).is_ok());
        assert!(
            check_typable("bell\u{7}", 100)
                .unwrap_err()
                .contains("'\\u{7}' at position 4")
        );
        assert!(
            check_typable(
                "\u{2022} Zo\u{eb} \u{6771}\u{4eac} \u{1f469}\u{200d}\u{1f4bb}",
                100
            )
            .is_ok()
        );
        assert!(check_typable("\"quotes\" & 'more'\n", 100).is_ok());
    }
}
