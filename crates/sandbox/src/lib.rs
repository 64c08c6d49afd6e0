//! A JavaScript sandbox (QuickJS) with per-session capabilities and time, memory and stack limits.
//!
//! A [`Session`] owns one JavaScript engine instance on its own OS thread. Scripts run one at a
//! time; globals persist between runs (REPL style) and top-level `await` works. A script can
//! reach only what its [`Capabilities`] grant: host functions, injected globals, `console` and
//! an optional `sleep`. Every run is bounded by the [`SandboxLimits`] (wall clock, memory, stack,
//! console output); a run that exceeds one ends with a clear [`ScriptError`] and the session
//! stays usable. A [`StopHandle`] stops a running script from any thread.
//!
//! ```no_run
//! # async fn demo() -> Result<(), droidmesh_sandbox::SandboxError> {
//! use droidmesh_sandbox::{Capabilities, HostFunction, ParamSpec, ParamType, SandboxLimits, Session};
//! let tap = HostFunction::new("tap", "Tap the element with this index.", |args| {
//!     Ok(serde_json::json!({ "tapped": args[0] }))
//! })
//! .param(ParamSpec::required("index", ParamType::Integer, "index from ui_state"));
//! let session = Session::new(SandboxLimits::default(), Capabilities::new().function(tap))?;
//! let outcome = session.run("const r = await tap(3); r.tapped").await?;
//! assert_eq!(outcome.value, Some(serde_json::json!(3)));
//! # Ok(()) }
//! ```

mod capability;
mod engine;
mod error;
mod limits;
mod metrics;
mod outcome;
mod quickjs;
mod session;
mod worker;

pub use capability::{
    Capabilities, HostFunction, HostHandler, ParamSpec, ParamType, tool_signatures,
};
pub use engine::{Engine, EngineInstance, MemoryStats, Prepared, RunControl, StopReason};
pub use error::{Result, SandboxError};
pub use limits::SandboxLimits;
pub use outcome::{ErrorKind, RunOutcome, ScriptError};
pub use quickjs::QuickJs;
pub use session::{GlobalSet, Session, StopHandle};
#[doc(hidden)]
pub use worker::prepared_spares;
