//! The gRPC client stack: lazy channels with connect and request timeouts, client-side
//! balancing over several endpoints (gRPC connections are long-lived, so an L4 balancer alone
//! does not spread load), and W3C trace-context injection.
use crate::error::{Result, RuntimeError};
use crate::trace_context::TraceContextInjector;
use std::time::Duration;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// A channel that injects trace context into every call. Generated clients take it through
/// `XxxClient::new(channel)`.
pub type TracedChannel = InterceptedService<Channel, TraceContextInjector>;

#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub connect_timeout: Duration,
    /// Deadline for unary calls; `None` for channels that carry long streams (set per call).
    pub request_timeout: Option<Duration>,
    /// HTTP/2 keep-alive so a dead peer is noticed during long streams.
    pub keepalive: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            request_timeout: None,
            keepalive: Duration::from_secs(20),
        }
    }
}

/// Builds a lazily connecting channel to one endpoint or, given a comma-separated list, a
/// channel balanced across all of them.
pub fn connect(endpoints: &str, opts: &ClientOptions) -> Result<TracedChannel> {
    let list: Vec<&str> = endpoints
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if list.is_empty() {
        return Err(RuntimeError::BadEndpoint {
            endpoint: endpoints.to_owned(),
            reason: "no endpoint given".to_owned(),
        });
    }
    let mut built = Vec::with_capacity(list.len());
    for raw in list {
        built.push(endpoint(raw, opts)?);
    }
    let channel = if built.len() == 1 {
        built.remove(0).connect_lazy()
    } else {
        Channel::balance_list(built.into_iter())
    };
    Ok(InterceptedService::new(channel, TraceContextInjector))
}

fn endpoint(raw: &str, opts: &ClientOptions) -> Result<Endpoint> {
    let uri = if raw.contains("://") {
        raw.to_owned()
    } else {
        format!("http://{raw}")
    };
    let mut ep = Endpoint::from_shared(uri).map_err(|e| RuntimeError::BadEndpoint {
        endpoint: raw.to_owned(),
        reason: e.to_string(),
    })?;
    ep = ep
        .connect_timeout(opts.connect_timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(opts.keepalive)
        .keep_alive_timeout(opts.keepalive)
        .keep_alive_while_idle(true);
    if let Some(t) = opts.request_timeout {
        ep = ep.timeout(t);
    }
    Ok(ep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rejects_bad_endpoints() {
        let err = connect(" , ", &ClientOptions::default()).unwrap_err();
        assert!(err.to_string().contains("no endpoint"), "{err}");
        let err = connect("http://exa mple:1", &ClientOptions::default()).unwrap_err();
        assert!(err.to_string().contains("exa mple"), "{err}");
    }

    #[tokio::test]
    async fn builds_single_and_balanced_channels() {
        connect("127.0.0.1:1", &ClientOptions::default()).unwrap();
        connect("127.0.0.1:1, http://127.0.0.1:2", &ClientOptions::default()).unwrap();
    }
}
