//! One convention for every service's errors. Each error type says what kind of failure it is
//! (a [`ServiceErrorCode`]); the code alone decides the gRPC status code a caller receives and
//! the HTTP status the gateway's HTTP face answers with, so a refusal reads the same on every
//! service and on either face. A service implements [`ServiceError`] for its error type and
//! turns it into a `tonic::Status` with [`ServiceError::to_status`], nowhere else.
use http::StatusCode;
use tonic::{Code, Status};

/// What kind of failure an error is, as a caller can act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceErrorCode {
    /// The request is malformed or asks for something impossible: fix it and send again.
    BadRequest,
    /// A position past the end (a sequence number after a task's last event).
    OutOfRange,
    /// What the request names does not exist.
    NotFound,
    /// It exists already.
    AlreadyExists,
    /// The request is sound but the state conflicts (a busy device, a lease held by another,
    /// a model that cannot be used as configured).
    Conflict,
    /// The operation was abandoned part way (a conflict found while doing it).
    Aborted,
    /// The caller is known but may not do this.
    Forbidden,
    /// The caller is not known (no key, a wrong key).
    Unauthenticated,
    /// A limit is reached (a full queue, a tenant over its rate, a message too large).
    TooManyRequests,
    /// A service or device cannot be reached now; a later try may succeed.
    Unavailable,
    /// The work did not finish within its deadline.
    Timeout,
    /// The call was cancelled (by its caller, or the caller went away).
    Cancelled,
    /// This server does not serve the call.
    Unsupported,
    /// A fault of the service itself (a bug, a broken template, a failed worker).
    Internal,
    /// Stored data is damaged.
    DataLoss,
    /// A failure nothing more is known of (a peer answered with an unknown code).
    Unknown,
}

impl ServiceErrorCode {
    /// The gRPC status code a caller receives.
    pub const fn grpc(self) -> Code {
        match self {
            Self::BadRequest => Code::InvalidArgument,
            Self::OutOfRange => Code::OutOfRange,
            Self::NotFound => Code::NotFound,
            Self::AlreadyExists => Code::AlreadyExists,
            Self::Conflict => Code::FailedPrecondition,
            Self::Aborted => Code::Aborted,
            Self::Forbidden => Code::PermissionDenied,
            Self::Unauthenticated => Code::Unauthenticated,
            Self::TooManyRequests => Code::ResourceExhausted,
            Self::Unavailable => Code::Unavailable,
            Self::Timeout => Code::DeadlineExceeded,
            Self::Cancelled => Code::Cancelled,
            Self::Unsupported => Code::Unimplemented,
            Self::Internal => Code::Internal,
            Self::DataLoss => Code::DataLoss,
            Self::Unknown => Code::Unknown,
        }
    }

    /// The code of a status another service answered with, so that passing it on keeps it.
    /// (`OK` is not a failure; should one arrive as an error it reads as unknown.)
    pub const fn from_grpc(code: Code) -> Self {
        match code {
            Code::InvalidArgument => Self::BadRequest,
            Code::OutOfRange => Self::OutOfRange,
            Code::NotFound => Self::NotFound,
            Code::AlreadyExists => Self::AlreadyExists,
            Code::FailedPrecondition => Self::Conflict,
            Code::Aborted => Self::Aborted,
            Code::PermissionDenied => Self::Forbidden,
            Code::Unauthenticated => Self::Unauthenticated,
            Code::ResourceExhausted => Self::TooManyRequests,
            Code::Unavailable => Self::Unavailable,
            Code::DeadlineExceeded => Self::Timeout,
            Code::Cancelled => Self::Cancelled,
            Code::Unimplemented => Self::Unsupported,
            Code::Internal => Self::Internal,
            Code::DataLoss => Self::DataLoss,
            Code::Ok | Code::Unknown => Self::Unknown,
        }
    }

    /// The HTTP status (google.rpc's mapping of the gRPC code; a conflict of state is 409, a
    /// cancelled call nginx's 499 "client closed request").
    pub fn http_status(self) -> StatusCode {
        match self {
            Self::BadRequest | Self::OutOfRange => StatusCode::BAD_REQUEST,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::AlreadyExists | Self::Conflict | Self::Aborted => StatusCode::CONFLICT,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Self::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
            Self::Unsupported => StatusCode::NOT_IMPLEMENTED,
            Self::Internal | Self::DataLoss | Self::Unknown => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The name a JSON error carries: the gRPC code's name as `google.rpc.Code` spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::BadRequest => "INVALID_ARGUMENT",
            Self::OutOfRange => "OUT_OF_RANGE",
            Self::NotFound => "NOT_FOUND",
            Self::AlreadyExists => "ALREADY_EXISTS",
            Self::Conflict => "FAILED_PRECONDITION",
            Self::Aborted => "ABORTED",
            Self::Forbidden => "PERMISSION_DENIED",
            Self::Unauthenticated => "UNAUTHENTICATED",
            Self::TooManyRequests => "RESOURCE_EXHAUSTED",
            Self::Unavailable => "UNAVAILABLE",
            Self::Timeout => "DEADLINE_EXCEEDED",
            Self::Cancelled => "CANCELLED",
            Self::Unsupported => "UNIMPLEMENTED",
            Self::Internal => "INTERNAL",
            Self::DataLoss => "DATA_LOSS",
            Self::Unknown => "UNKNOWN",
        }
    }

    /// Every code, for documents that list them (the OpenAPI error schema) and for tests.
    pub const ALL: [ServiceErrorCode; 16] = [
        Self::BadRequest,
        Self::OutOfRange,
        Self::NotFound,
        Self::AlreadyExists,
        Self::Conflict,
        Self::Aborted,
        Self::Forbidden,
        Self::Unauthenticated,
        Self::TooManyRequests,
        Self::Unavailable,
        Self::Timeout,
        Self::Cancelled,
        Self::Unsupported,
        Self::Internal,
        Self::DataLoss,
        Self::Unknown,
    ];
}

/// An error a service answers a call with.
pub trait ServiceError: std::error::Error {
    /// What kind of failure this is; decides the gRPC and HTTP status.
    fn error_code(&self) -> ServiceErrorCode;

    /// The words a caller reads (its `Display` unless the service must shorten or escape them).
    fn public_message(&self) -> String {
        self.to_string()
    }

    /// The status a caller receives: the code's gRPC code with the public message.
    fn to_status(&self) -> Status {
        Status::new(self.error_code().grpc(), self.public_message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_survives_a_trip_through_grpc_and_has_one_http_status() {
        for code in ServiceErrorCode::ALL {
            assert_eq!(ServiceErrorCode::from_grpc(code.grpc()), code, "{code:?}");
            assert_eq!(ServiceErrorCode::from_grpc(code.grpc()).name(), code.name());
        }
        for (code, status, name) in [
            (ServiceErrorCode::NotFound, 404, "NOT_FOUND"),
            (ServiceErrorCode::BadRequest, 400, "INVALID_ARGUMENT"),
            (ServiceErrorCode::Unauthenticated, 401, "UNAUTHENTICATED"),
            (ServiceErrorCode::Forbidden, 403, "PERMISSION_DENIED"),
            (ServiceErrorCode::TooManyRequests, 429, "RESOURCE_EXHAUSTED"),
            (ServiceErrorCode::Conflict, 409, "FAILED_PRECONDITION"),
            (ServiceErrorCode::OutOfRange, 400, "OUT_OF_RANGE"),
            (ServiceErrorCode::Unavailable, 503, "UNAVAILABLE"),
            (ServiceErrorCode::Timeout, 504, "DEADLINE_EXCEEDED"),
            (ServiceErrorCode::Internal, 500, "INTERNAL"),
            (ServiceErrorCode::Cancelled, 499, "CANCELLED"),
            (ServiceErrorCode::Unsupported, 501, "UNIMPLEMENTED"),
        ] {
            assert_eq!(code.http_status().as_u16(), status, "{code:?}");
            assert_eq!(code.name(), name);
        }
        assert_eq!(
            ServiceErrorCode::from_grpc(Code::Ok),
            ServiceErrorCode::Unknown
        );
    }

    #[test]
    fn an_error_becomes_the_status_of_its_code_with_its_public_words() {
        #[derive(Debug, thiserror::Error)]
        #[error("device {0} is not known")]
        struct Unknown(&'static str);
        impl ServiceError for Unknown {
            fn error_code(&self) -> ServiceErrorCode {
                ServiceErrorCode::NotFound
            }
        }
        let s = Unknown("d1").to_status();
        assert_eq!(
            (s.code(), s.message()),
            (Code::NotFound, "device d1 is not known")
        );
    }
}
