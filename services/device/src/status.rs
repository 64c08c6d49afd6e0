//! How a call shows outside: the span each device call runs in, and a failed call's status
//! recorded on it (device errors name their code in [`crate::error`]).
use tonic::Status;

use crate::error::DeviceError;

/// Longest serial a span or log line shows: a request's serial is the caller's text.
pub(crate) const MAX_SERIAL_SHOWN: usize = 256;

/// The span one device call runs in (`execute_tool {tool}`).
pub(crate) fn tool_span(tool: &'static str, serial: &str) -> tracing::Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = %format!("execute_tool {tool}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.type = "extension",
        droidmesh.device.serial = %serial,
        droidmesh.task.id = tracing::field::Empty,
        droidmesh.settle.wait_ms = tracing::field::Empty,
        droidmesh.settle.settled = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// A failed call's status, recorded on its span and logged.
pub(crate) fn record(span: &tracing::Span, e: DeviceError) -> Status {
    let status = droidmesh_runtime::ServiceError::to_status(&e);
    span.record("error.type", format!("{:?}", status.code()));
    tracing::debug!(parent: span, code = ?status.code(), message = status.message(), "device call failed");
    status
}
