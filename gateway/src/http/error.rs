//! Errors of the HTTP face: a gRPC status name and message as JSON
//! (`{"code": "NOT_FOUND", "message": "..."}`), with the HTTP status of the standard
//! gRPC-to-HTTP mapping, so a client reads the same refusal on either face.
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use droidmesh_runtime::ServiceErrorCode;
use http::{HeaderValue, StatusCode, header};
use tonic::{Code, Status};

/// A refused or failed HTTP call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: Code,
    pub message: String,
    /// The HTTP status; [`http_status`] of the code unless the refusal is HTTP's own (405,
    /// 413, 415).
    pub status: StatusCode,
    /// Methods the path serves, for a 405's `Allow` header.
    pub allow: Option<&'static str>,
    /// Seconds to wait before trying again (a tenant over its limits), for `Retry-After`.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            status: http_status(code),
            allow: None,
            retry_after: None,
        }
    }

    /// A refusal of what the client sent: INVALID_ARGUMENT, HTTP 400.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, message)
    }

    /// A refusal with an HTTP status of its own (405, 413, 415) and the code nearest to it.
    pub fn http(status: StatusCode, code: Code, message: impl Into<String>) -> Self {
        Self {
            status,
            ..Self::new(code, message)
        }
    }

    /// What the gateway answered, as it would over gRPC.
    pub fn from_status(s: &Status) -> Self {
        Self {
            retry_after: s
                .metadata()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok()),
            ..Self::new(s.code(), s.message())
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Code::NotFound, message)
    }

    pub fn method_not_allowed(method: &http::Method, path: &str, allow: &'static str) -> Self {
        Self {
            allow: Some(allow),
            ..Self::http(
                StatusCode::METHOD_NOT_ALLOWED,
                Code::Unimplemented,
                format!("{method} is not served on {path}; it serves {allow}"),
            )
        }
    }

    /// The JSON body of this error.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"code": code_name(self.code), "message": self.message})
    }
}

/// A refusal answers as its JSON error, with `Allow` (405) and `Retry-After` when it has them.
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = Response::new(super::full(Bytes::from(self.body().to_string())));
        *resp.status_mut() = self.status;
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(allow) = self.allow {
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

impl From<Status> for ApiError {
    fn from(s: Status) -> Self {
        Self::from_status(&s)
    }
}

/// The gRPC status name of `code`, as `google.rpc.Code` spells it.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        code => ServiceErrorCode::from_grpc(code).name(),
    }
}

/// Every code name, for the OpenAPI document's error schema.
pub const CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The HTTP status of a gRPC code: the one mapping every service's errors follow
/// ([`ServiceErrorCode::http_status`]), so a refusal reads the same on either face.
pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        code => ServiceErrorCode::from_grpc(code).http_status(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_the_standard_http_statuses_and_names() {
        for (code, status, name) in [
            (Code::NotFound, 404, "NOT_FOUND"),
            (Code::InvalidArgument, 400, "INVALID_ARGUMENT"),
            (Code::Unauthenticated, 401, "UNAUTHENTICATED"),
            (Code::PermissionDenied, 403, "PERMISSION_DENIED"),
            (Code::ResourceExhausted, 429, "RESOURCE_EXHAUSTED"),
            (Code::FailedPrecondition, 409, "FAILED_PRECONDITION"),
            (Code::OutOfRange, 400, "OUT_OF_RANGE"),
            (Code::Unavailable, 503, "UNAVAILABLE"),
            (Code::DeadlineExceeded, 504, "DEADLINE_EXCEEDED"),
            (Code::Internal, 500, "INTERNAL"),
            (Code::Cancelled, 499, "CANCELLED"),
            (Code::Unimplemented, 501, "UNIMPLEMENTED"),
        ] {
            assert_eq!(http_status(code).as_u16(), status, "{code:?}");
            assert_eq!(code_name(code), name);
            assert!(CODE_NAMES.contains(&name));
        }
        for code in ServiceErrorCode::ALL {
            assert!(CODE_NAMES.contains(&code.name()), "{code:?}");
            assert_eq!(http_status(code.grpc()), code.http_status());
        }
        let e = ApiError::from_status(&Status::not_found("no task with id 'x'"));
        assert_eq!(
            e.body(),
            serde_json::json!({"code": "NOT_FOUND", "message": "no task with id 'x'"})
        );
    }
}
