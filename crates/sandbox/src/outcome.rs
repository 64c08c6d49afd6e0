//! What one run returns: captured console, completion value, error, duration.

use std::{fmt, time::Duration};

/// The result of one run. A script failure is data here, not a Rust error.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunOutcome {
    /// Captured console lines (`warn`/`error` prefixed with `[warn] `/`[error] `), capped at
    /// [`SandboxLimits::console_bytes`](crate::SandboxLimits::console_bytes) with a final
    /// `[truncated N bytes]` line when output was dropped.
    pub console: String,
    /// The completion value (the value of the last expression statement, awaited if it is a
    /// promise) when it is JSON-representable; `None` for `undefined`, functions, cycles, errors.
    pub value: Option<serde_json::Value>,
    /// Why the run failed, if it did.
    pub error: Option<ScriptError>,
    /// How long the run took on the sandbox thread.
    pub duration: Duration,
}

impl RunOutcome {
    /// Whether the run ended without an error.
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }
}

/// The class of a script failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The code does not parse (including `import` statements).
    Syntax,
    /// An uncaught exception.
    Runtime,
    /// The run exceeded its wall clock.
    Timeout,
    /// The session's heap reached its memory limit.
    Memory,
    /// The call stack reached its limit.
    Stack,
    /// A host function failed and the script did not catch it.
    Host,
    /// A [`StopHandle`](crate::StopHandle) stopped the run, or the caller stopped waiting.
    Stopped,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Syntax => "syntax",
            ErrorKind::Runtime => "runtime",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Memory => "memory",
            ErrorKind::Stack => "stack",
            ErrorKind::Host => "host",
            ErrorKind::Stopped => "stopped",
        })
    }
}

/// A script failure, ready to show to a model or a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptError {
    /// The class of failure.
    pub kind: ErrorKind,
    /// `Name: message` for exceptions (`TypeError: x is not a function`), or a sentence such as
    /// `script stopped: it ran longer than 5s`.
    pub message: String,
    /// The 1-based line in the submitted code, when known.
    pub line: Option<u32>,
    /// The JavaScript stack, when there is one.
    pub stack: Option<String>,
}

impl ScriptError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            line: None,
            stack: None,
        }
    }
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}
