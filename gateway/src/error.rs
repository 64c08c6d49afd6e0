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
    /// Set when the connection failed rather than the service answering.
    pub transport: Option<Transport>,
    /// Where the service was called (empty when not known).
    pub endpoint: String,
}

/// How a connection to a service failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Nothing answered at the endpoint.
    Unreachable,
    /// The connection broke while the call was under way (the process died, the network
    /// dropped).
    Broken,
}

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
            transport_error = status.message(),
            "connection to a service failed"
        );
        Self {
            service,
            code: Code::Unavailable,
            message: match transport {
                Transport::Unreachable => "could not be reached".into(),
                Transport::Broken => "went away mid-step".into(),
            },
            transport: Some(transport),
            endpoint: endpoint.to_owned(),
        }
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

/// Whether `status` reports a failed connection rather than an answer: statuses a service
/// sends have no source error; those the client's transport makes (HTTP/2, hyper, sockets)
/// carry the error that caused them.
fn transport_failure(status: &Status) -> Option<Transport> {
    if !matches!(
        status.code(),
        Code::Unknown | Code::Internal | Code::Unavailable
    ) {
        return None;
    }
    let mut source = std::error::Error::source(status)?;
    loop {
        if let Some(io) = source.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            if matches!(
                io.kind(),
                K::ConnectionRefused | K::AddrNotAvailable | K::NotFound | K::HostUnreachable
            ) {
                return Some(Transport::Unreachable);
            }
        }
        match source.source() {
            Some(next) => source = next,
            None => break,
        }
    }
    let m = status.message();
    if m.contains("connect error") || m.contains("trying to connect") {
        Some(Transport::Unreachable)
    } else {
        Some(Transport::Broken)
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
    /// A bounded queue or store is full; the message says what to wait for.
    #[error("{0}")]
    Full(String),
    /// A position past the end (a sequence number after the task's last event).
    #[error("{0}")]
    OutOfRange(String),
}

impl GatewayError {
    /// The error from the device service's AcquireLease at `endpoint`.
    pub fn from_lease(endpoint: &str, status: &Status) -> Self {
        let peer = PeerError::call("device", endpoint, status);
        // One device leased (FAILED_PRECONDITION) or every device leased (RESOURCE_EXHAUSTED).
        if matches!(
            peer.code,
            Code::FailedPrecondition | Code::ResourceExhausted
        ) {
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
            GatewayError::Full(_) => Code::ResourceExhausted,
            GatewayError::OutOfRange(_) => Code::OutOfRange,
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

        let busy =
            GatewayError::from_lease("http://d", &Status::failed_precondition("leased by t1"));
        let s = busy.into_status();
        assert_eq!(s.code(), Code::FailedPrecondition);
        assert!(s.message().contains("leased by t1") && s.message().contains("wait_for_device"));
        let unknown =
            GatewayError::from_lease("http://d", &Status::not_found("device x is not known"));
        let s = unknown.into_status();
        assert_eq!(s.code(), Code::NotFound);
        assert_eq!(s.message(), "cannot lease a device: device x is not known");
    }
}
