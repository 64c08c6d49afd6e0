//! Turns a thrown JavaScript value into a [`ScriptError`] with kind, message and line.

use rquickjs::{Coerced, Ctx, Type, Value};

use super::host::display;
use crate::{
    ErrorKind, SandboxLimits, ScriptError, StopReason,
    limits::{human_bytes, human_duration},
};

/// The file name scripts are evaluated under; stack frames name it.
pub(crate) const FILENAME: &str = "<script>";

/// Where the exception came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Parsing the submitted code.
    Compile,
    /// Running it.
    Run,
}

/// The error for a run stopped for `reason`.
pub(crate) fn stopped(reason: StopReason, limits: &SandboxLimits) -> ScriptError {
    match reason {
        StopReason::Deadline => ScriptError::new(
            ErrorKind::Timeout,
            format!(
                "script stopped: it ran longer than {}",
                human_duration(limits.wall_clock)
            ),
        ),
        StopReason::Stopped => ScriptError::new(
            ErrorKind::Stopped,
            "script stopped: it was cancelled by the caller",
        ),
    }
}

/// The error for out-of-memory.
pub(crate) fn out_of_memory(limits: &SandboxLimits) -> ScriptError {
    ScriptError::new(
        ErrorKind::Memory,
        format!(
            "script stopped: out of memory (limit {})",
            human_bytes(limits.memory_bytes)
        ),
    )
}

/// Describes `exception`, thrown during `phase` of `code`.
pub(crate) fn describe<'js>(
    ctx: &Ctx<'js>,
    exception: &Value<'js>,
    phase: Phase,
    tripped: Option<StopReason>,
    limits: &SandboxLimits,
    code: &str,
) -> ScriptError {
    let stack = exception
        .as_object()
        .filter(|_| exception.type_of() == Type::Exception)
        .and_then(|o| o.get::<_, Coerced<String>>("stack").ok())
        .map(|s| s.0)
        .filter(|s| !s.trim().is_empty());
    let _ = ctx.catch();
    if let Some(reason) = tripped {
        // No line: QuickJS does not record where in a loop it was interrupted.
        return stopped(reason, limits);
    }
    let line = stack.as_deref().and_then(line_in);
    if exception.type_of() != Type::Exception {
        if is_allocation_failure(exception, code) {
            return out_of_memory(limits);
        }
        let shown = match exception.type_of() {
            Type::String => serde_json::to_string(&display(ctx, exception)).unwrap_or_default(),
            _ => display(ctx, exception),
        };
        return ScriptError::new(
            ErrorKind::Runtime,
            format!("Uncaught {}", clip(&shown, 500)),
        );
    }
    let field = |key: &str| {
        exception
            .as_object()
            .and_then(|o| o.get::<_, Coerced<String>>(key).ok())
            .map(|s| s.0)
    };
    let name = field("name").unwrap_or_else(|| "Error".into());
    let message = field("message").unwrap_or_default();
    let _ = ctx.catch();
    let (kind, message) = match (name.as_str(), message.as_str()) {
        ("InternalError", "out of memory") => {
            return ScriptError {
                line,
                ..out_of_memory(limits)
            };
        }
        (_, "Maximum call stack size exceeded" | "stack overflow") => {
            let limit = human_bytes(limits.stack_bytes);
            (
                ErrorKind::Stack,
                format!("script stopped: stack overflow (limit {limit})"),
            )
        }
        ("InternalError", "interrupted") => (
            ErrorKind::Stopped,
            "script stopped: it was interrupted".to_string(),
        ),
        ("HostError", _) => (ErrorKind::Host, format!("{name}: {message}")),
        ("SyntaxError", _) if phase == Phase::Compile => {
            let hint = if line.is_some_and(|l| is_module_line(code, l)) {
                " (import and export are not available: this sandbox has no modules)"
            } else {
                ""
            };
            (ErrorKind::Syntax, format!("{name}: {message}{hint}"))
        }
        (_, m) if m.starts_with("could not load module") || m == "require is not defined" => (
            ErrorKind::Runtime,
            format!("{name}: {message} (this sandbox has no modules)"),
        ),
        _ => (ErrorKind::Runtime, format!("{name}: {message}")),
    };
    ScriptError {
        kind,
        message: clip(&message, 2000),
        line,
        stack,
    }
}

/// QuickJS throws `null` (or nothing) when it cannot even allocate the error for running out of
/// memory. A script could throw `null` itself; code that visibly does is taken at its word.
fn is_allocation_failure(exception: &Value<'_>, code: &str) -> bool {
    match exception.type_of() {
        Type::Uninitialized => true,
        Type::Null => {
            let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
            !["thrownull", "throw(null)", "reject(null)"]
                .iter()
                .any(|p| compact.contains(p))
        }
        _ => false,
    }
}

/// The first `<script>:LINE` in a stack trace.
fn line_in(stack: &str) -> Option<u32> {
    let marker = format!("{FILENAME}:");
    let start = stack.find(&marker)? + marker.len();
    let digits: String = stack[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn is_module_line(code: &str, line: u32) -> bool {
    let text = code
        .lines()
        .nth(line.saturating_sub(1) as usize)
        .unwrap_or_default()
        .trim_start();
    ["import ", "import{", "import*", "export "]
        .iter()
        .any(|p| text.starts_with(p))
}

fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_line_in_a_stack() {
        assert_eq!(
            line_in("    at f (<script>:12:3)\n    at <eval> (<script>:20:1)\n"),
            Some(12)
        );
        assert_eq!(line_in("    at <script>:3:1\n"), Some(3));
        assert_eq!(line_in("    at native\n"), None);
    }

    #[test]
    fn spots_module_syntax() {
        assert!(is_module_line("let a = 1;\n  import x from 'y'", 2));
        assert!(!is_module_line("let a = 1;", 1));
    }
}
