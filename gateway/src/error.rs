//! The gateway's errors: what a client did wrong or what a peer service answered, each with its
//! [`ServiceErrorCode`], and the one place they become a `tonic::Status`.
use droidmesh_runtime::{ServiceError, ServiceErrorCode};
use tonic::{Code, Status};

/// A failed call to another droidmesh service, classified by its status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct PeerError {
    /// The service called: "device", "manager", "executor", ...
    pub service: &'static str,
    pub code: Code,
    pub message: String,
    /// Set when the connection failed rather than the service answering.
    pub transport: Option<Transport>,
    /// Where the service was called (empty when not known).
    pub endpoint: String,
}

pub use droidmesh_runtime::peer::Transport;
use droidmesh_runtime::peer::transport_failure;

/// How long a service whose connection broke is given to answer a fresh one (see
/// [`droidmesh_runtime::peer::probe`]).
const PROBE_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

impl PeerError {
    /// A status the service answered with (or one without a known endpoint).
    pub fn new(service: &'static str, status: &Status) -> Self {
        Self {
            service,
            code: status.code(),
            message: status.message().to_owned(),
            transport: None,
            endpoint: String::new(),
        }
    }

    /// A failed call to `service` at `endpoint`. A failure of the connection itself (the
    /// transport's own words, such as an HTTP/2 error) becomes one plain sentence naming the
    /// service and its endpoint; the transport's detail goes to the log, not to the user.
    pub fn call(service: &'static str, endpoint: &str, status: &Status) -> Self {
        let Some(transport) = transport_failure(status) else {
            return Self {
                endpoint: endpoint.to_owned(),
                ..Self::new(service, status)
            };
        };
        tracing::warn!(
            peer = service,
            endpoint,
            code = ?status.code(),
            transport_error = droidmesh_runtime::peer::detail(status),
            "connection to a service failed"
        );
        Self {
            service,
            code: if transport == Transport::TimedOut {
                Code::DeadlineExceeded
            } else {
                Code::Unavailable
            },
            message: transport.words().into(),
            transport: Some(transport),
            endpoint: endpoint.to_owned(),
        }
    }

    /// [`PeerError::call`], and when the connection broke, whether the service is gone or only
    /// stopped answering: a stopped process (SIGSTOP, a frozen machine) keeps its port open, so
    /// a fresh connection opens but gets no answer (at most a second is spent finding out). A
    /// port that answers cleartext with a TLS alert serves TLS: the endpoint should say https://.
    pub async fn call_checked(service: &'static str, endpoint: &str, status: &Status) -> Self {
        let mut e = Self::call(service, endpoint, status);
        if e.transport == Some(Transport::Broken) {
            let found = droidmesh_runtime::peer::probe(endpoint, PROBE_WITHIN).await;
            if matches!(found, Transport::Silent | Transport::Tls) {
                e.transport = Some(found);
                e.message = found.words().into();
            }
        }
        e
    }

    /// Whether the service holds its connections open but answers nothing (a stopped process):
    /// trying it again would only wait another keep-alive period.
    pub fn stopped_answering(&self) -> bool {
        self.transport == Some(Transport::Silent)
    }

    /// Whether the call ran out of time: it had its whole budget, so trying again would only
    /// double the wait.
    pub fn timed_out(&self) -> bool {
        self.code == Code::DeadlineExceeded
    }

    /// Whether the service could not be reached or did not answer in time (as opposed to
    /// answering with a refusal).
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self.code,
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown
        )
    }

    fn describe(&self) -> String {
        let s = self.service;
        let m = &self.message;
        if self.transport.is_some() {
            return format!("{s} at {} {m}", self.endpoint);
        }
        match self.code {
            Code::Unavailable | Code::Unknown => format!("{s} is unavailable: {m}"),
            Code::DeadlineExceeded => format!("{s} did not answer in time: {m}"),
            Code::Cancelled => format!("the call to {s} was cancelled: {m}"),
            Code::Unimplemented => format!("{s} does not serve this call: {m}"),
            Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
                format!("{s} refused the request: {m}")
            }
            code => format!("{s} failed ({code:?}): {m}"),
        }
    }
}

/// Why a gateway RPC is refused.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The request is malformed; the message says what to fix.
    #[error("{0}")]
    InvalidRequest(String),
    /// The request asks for something this gateway does not serve.
    #[error("{0}")]
    Unsupported(String),
    #[error("no task with id '{id}' (finished tasks are kept for a while, then forgotten)")]
    TaskNotFound { id: String },
    /// The device asked for (or every device) is leased, in words that name only the
    /// caller's own tasks ([`crate::busy::refusal`]).
    #[error("{0}; set wait_for_device to queue the task until the device is free")]
    DeviceBusy(String),
    /// The device service refused or could not lease a device.
    #[error("cannot lease a device: {}", .0.message)]
    Lease(PeerError),
    /// A peer failed while serving a pass-through call (ListDevices).
    #[error(transparent)]
    Peer(PeerError),
    /// The caller sent no key, a malformed one, or one this gateway does not know; the message
    /// says what to send and never repeats the key.
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller's key may not do this (a device outside its devices); the message names it.
    #[error("{0}")]
    PermissionDenied(String),
    /// The tenant is over one of its limits; the status carries `retry-after` (seconds).
    #[error("{}", .0.message)]
    OverLimit(crate::limits::OverLimit),
    /// A bounded queue or store is full; the message says what to wait for.
    #[error("{0}")]
    Full(String),
    /// A position past the end (a sequence number after the task's last event).
    #[error("{0}")]
    OutOfRange(String),
    /// The task store failed.
    #[error(transparent)]
    Store(#[from] crate::persist::StoreError),
}

impl GatewayError {
    /// The error from the device service's AcquireLease at `endpoint`, other than a busy
    /// device (whose holder only [`crate::busy::refusal`] may word).
    pub fn from_lease(endpoint: &str, status: &Status) -> Self {
        Self::Lease(PeerError::call("device", endpoint, status))
    }
}

impl ServiceError for PeerError {
    /// The service's own code (NOT_FOUND for an unknown serial, UNAVAILABLE ...), passed on.
    fn error_code(&self) -> ServiceErrorCode {
        ServiceErrorCode::from_grpc(self.code)
    }
}

impl ServiceError for GatewayError {
    fn error_code(&self) -> ServiceErrorCode {
        match self {
            GatewayError::InvalidRequest(_) => ServiceErrorCode::BadRequest,
            GatewayError::Unsupported(_) => ServiceErrorCode::Unsupported,
            GatewayError::TaskNotFound { .. } => ServiceErrorCode::NotFound,
            GatewayError::DeviceBusy(_) => ServiceErrorCode::Conflict,
            GatewayError::Lease(p) | GatewayError::Peer(p) => p.error_code(),
            GatewayError::Full(_) | GatewayError::OverLimit(_) => ServiceErrorCode::TooManyRequests,
            GatewayError::Unauthenticated(_) => ServiceErrorCode::Unauthenticated,
            GatewayError::PermissionDenied(_) => ServiceErrorCode::Forbidden,
            GatewayError::OutOfRange(_) => ServiceErrorCode::OutOfRange,
            GatewayError::Store(crate::persist::StoreError::Corrupt { .. }) => {
                ServiceErrorCode::DataLoss
            }
            GatewayError::Store(_) => ServiceErrorCode::Unavailable,
        }
    }

    /// A tenant over its limits is also told when to try again (`retry-after`, seconds).
    fn to_status(&self) -> Status {
        let mut status = Status::new(self.error_code().grpc(), self.public_message());
        if let GatewayError::OverLimit(over) = self
            && let Ok(v) = over.retry_after_secs.to_string().parse()
        {
            status.metadata_mut().insert("retry-after", v);
        }
        status
    }
}

/// The one place where gateway errors become the status a client receives.
impl From<GatewayError> for Status {
    fn from(e: GatewayError) -> Self {
        e.to_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_errors_name_the_service_and_keep_the_code() {
        let e = PeerError::new("scripter", &Status::unavailable("connection refused"));
        assert_eq!(e.to_string(), "scripter is unavailable: connection refused");
        assert!(e.is_unreachable());
        let e = PeerError::new("executor", &Status::invalid_argument("goal is empty"));
        assert_eq!(e.to_string(), "executor refused the request: goal is empty");
        assert!(!e.is_unreachable());

        let busy = GatewayError::DeviceBusy("device d1 is busy".into());
        let s = busy.to_status();
        assert_eq!(s.code(), Code::FailedPrecondition);
        assert_eq!(
            s.message(),
            "device d1 is busy; set wait_for_device to queue the task until the device is free"
        );
        let unknown =
            GatewayError::from_lease("http://d", &Status::not_found("device x is not known"));
        let s = unknown.to_status();
        assert_eq!(s.code(), Code::NotFound);
        assert_eq!(s.message(), "cannot lease a device: device x is not known");
    }
}
