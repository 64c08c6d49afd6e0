//! The gateway's errors: what a client did wrong or what a peer service answered, mapped to a
//! `tonic::Status` in one place ([`GatewayError::into_status`]).
use tonic::{Code, Status};

/// A failed call to another droidmesh service, classified by its status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct PeerError {
    /// The service called: "device", "manager", "executor", ...
    pub service: &'static str,
    pub code: Code,
    pub message: String,
}

impl PeerError {
    pub fn new(service: &'static str, status: &Status) -> Self {
        Self {
            service,
            code: status.code(),
            message: status.message().to_owned(),
        }
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
    /// The device asked for is leased by someone else.
    #[error("{}; set wait_for_device to queue the task until the device is free", .0.message)]
    DeviceBusy(PeerError),
    /// The device service refused or could not lease a device.
    #[error("cannot lease a device: {}", .0.message)]
    Lease(PeerError),
    /// A peer failed while serving a pass-through call (ListDevices).
    #[error(transparent)]
    Peer(PeerError),
}

impl GatewayError {
    /// The error from the device service's AcquireLease.
    pub fn from_lease(status: &Status) -> Self {
        let peer = PeerError::new("device", status);
        if peer.code == Code::FailedPrecondition {
            Self::DeviceBusy(peer)
        } else {
            Self::Lease(peer)
        }
    }

    /// The status a client receives.
    pub fn into_status(self) -> Status {
        let message = self.to_string();
        let code = match &self {
            GatewayError::InvalidRequest(_) => Code::InvalidArgument,
            GatewayError::Unsupported(_) => Code::Unimplemented,
            GatewayError::TaskNotFound { .. } => Code::NotFound,
            GatewayError::DeviceBusy(_) => Code::FailedPrecondition,
            // The device service's own code (NOT_FOUND for an unknown serial, UNAVAILABLE ...).
            GatewayError::Lease(p) | GatewayError::Peer(p) => p.code,
        };
        Status::new(code, message)
    }
}

impl From<GatewayError> for Status {
    fn from(e: GatewayError) -> Self {
        e.into_status()
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

        let busy = GatewayError::from_lease(&Status::failed_precondition("leased by t1"));
        let s = busy.into_status();
        assert_eq!(s.code(), Code::FailedPrecondition);
        assert!(s.message().contains("leased by t1") && s.message().contains("wait_for_device"));
        let unknown = GatewayError::from_lease(&Status::not_found("device x is not known"));
        let s = unknown.into_status();
        assert_eq!(s.code(), Code::NotFound);
        assert_eq!(s.message(), "cannot lease a device: device x is not known");
    }
}
