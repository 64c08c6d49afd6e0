//! A call from the command line that found no service where it looked, said in words: which
//! service, at which address, why (`connection refused`), and what to do; not the transport's
//! `tcp connect error`.
use droidmesh_runtime::peer::{self, Transport};

/// What a failed connection says when the call never reached a service, or `None` when the
/// service answered (its status is the error to show).
pub fn transport_error(
    service: &str,
    endpoint: &str,
    status: &tonic::Status,
    what_to_do: &str,
) -> Option<anyhow::Error> {
    match peer::transport_failure(status)? {
        Transport::Unreachable => Some(anyhow::anyhow!(
            "no {service} answers at {endpoint}: {}; {what_to_do}",
            why_unreachable(status)
        )),
        other => Some(anyhow::anyhow!(
            "the {service} at {endpoint} {} ({})",
            other.words(),
            peer::detail(status)
        )),
    }
}

/// Why a connection was not made, as a person says it: `connection refused`, or the deepest
/// cause's own words (a name that does not resolve).
fn why_unreachable(status: &tonic::Status) -> String {
    use std::io::ErrorKind as K;
    let mut source = std::error::Error::source(status);
    let mut deepest = status.message().to_owned();
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            let words = match io.kind() {
                K::ConnectionRefused => "connection refused",
                K::HostUnreachable => "host unreachable",
                K::NetworkUnreachable => "network unreachable",
                K::AddrNotAvailable => "address not available",
                K::TimedOut => "the connection timed out",
                _ => "",
            };
            if !words.is_empty() {
                return words.to_owned();
            }
        }
        deepest = e.to_string();
        source = e.source();
    }
    deepest
}
