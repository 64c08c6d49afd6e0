//! How a call shows outside: the span each device call runs in, and the one function that turns
//! device errors into gRPC statuses, with messages made safe to print.
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
    let status = to_status(e);
    span.record("error.type", format!("{:?}", status.code()));
    tracing::debug!(parent: span, code = ?status.code(), message = status.message(), "device call failed");
    status
}

/// The one place where device errors become gRPC statuses.
pub fn to_status(e: DeviceError) -> Status {
    use tonic::Code;
    let code = match &e {
        DeviceError::UnknownDevice { .. } => Code::NotFound,
        DeviceError::LeaseHeld { .. }
        | DeviceError::LeaseReplaced { .. }
        | DeviceError::NoLease { .. }
        | DeviceError::NoDevices
        | DeviceError::ScreenshotWithheld { .. } => Code::FailedPrecondition,
        DeviceError::AllBusy { .. } | DeviceError::TooManySecrets { .. } => Code::ResourceExhausted,
        DeviceError::InvalidArgument(_) | DeviceError::Config(_) => Code::InvalidArgument,
        DeviceError::Unavailable { .. }
        | DeviceError::Timeout { .. }
        | DeviceError::UiDump { .. } => Code::Unavailable,
        DeviceError::BadOutput { .. } | DeviceError::Adb { .. } | DeviceError::Image(_) => {
            Code::Internal
        }
        DeviceError::ConnectOff => Code::PermissionDenied,
        DeviceError::AttachFailed { .. } => Code::Unavailable,
    };
    // A message may repeat what a caller sent (an unknown serial): escaped and bounded, it is
    // safe to print, and fits in the response's headers.
    let message = e.to_string();
    let message = crate::printable::printable(&message, crate::printable::MAX_MESSAGE_BYTES);
    Status::new(code, message.into_owned())
}
