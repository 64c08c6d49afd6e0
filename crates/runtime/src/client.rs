//! The gRPC client stack: lazy channels with connect and request timeouts, client-side
//! balancing over the replicas endpoints resolve to (gRPC connections are long-lived, so an L4
//! balancer alone does not spread load; see [`crate::balance`]), and W3C trace-context
//! injection.
use crate::balance::{Discovery, MeshChannel, Target};
use crate::error::{Result, RuntimeError};
use crate::tls::{ClientTls, TlsConnector};
use crate::trace_context::TraceContextInjector;
use std::time::Duration;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// A channel that injects trace context into every call. Generated clients take it through
/// `XxxClient::new(channel)`.
pub type TracedChannel = InterceptedService<MeshChannel, TraceContextInjector>;

#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub connect_timeout: Duration,
    /// Deadline for unary calls; `None` for channels that carry long streams (set per call).
    pub request_timeout: Option<Duration>,
    /// HTTP/2 keep-alive pings are sent this often, on idle connections too, so a peer that
    /// died or stopped (SIGSTOP, a frozen VM) is noticed even in the middle of a long stream.
    pub keepalive: Duration,
    /// A ping not answered within this closes the connection: every call on it fails as
    /// UNAVAILABLE (see [`crate::peer`]).
    pub keepalive_timeout: Duration,
    /// How names are resolved and replicas watched when an endpoint needs balancing.
    pub discovery: Discovery,
    /// How `https://` endpoints are called: by default the process's `[tls]`
    /// ([`ClientTls::install`]), else the system's roots. `http://` endpoints are plain.
    pub tls: ClientTls,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            request_timeout: None,
            keepalive: Duration::from_secs(5),
            keepalive_timeout: Duration::from_secs(10),
            discovery: Discovery::default(),
            tls: ClientTls::default(),
        }
    }
}

/// Builds a lazily connecting channel: to one address given one address, else balanced over
/// every address the endpoints (comma-separated; names or addresses) resolve to, resolved
/// again as [`Discovery`] says. Makes no network call; must be called in a tokio runtime.
pub fn connect(endpoints: &str, opts: &ClientOptions) -> Result<TracedChannel> {
    connect_mesh(endpoints, opts).map(traced)
}

/// Adds trace-context injection to a channel.
pub fn traced(channel: MeshChannel) -> TracedChannel {
    InterceptedService::new(channel, TraceContextInjector)
}

/// [`connect`] without trace-context injection, for callers that also want to look at the
/// channel's replicas ([`MeshChannel::replicas`]).
pub fn connect_mesh(endpoints: &str, opts: &ClientOptions) -> Result<MeshChannel> {
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
    let mut targets = Vec::with_capacity(list.len());
    for raw in &list {
        // Checks the endpoint's options as well as its form, naming the endpoint.
        endpoint(raw, opts)?;
        targets.push(Target::parse(raw)?);
    }
    let channel = match targets.as_slice() {
        [one] if one.is_literal() => {
            MeshChannel::direct(dial(endpoint(list[0], opts)?, opts, None))
        }
        _ => {
            let replica_opts = opts.clone();
            MeshChannel::balanced(
                endpoints.trim(),
                targets,
                opts.discovery.clone(),
                Box::new(move |addr, target| {
                    let ep =
                        endpoint(&format!("{}://{addr}", target.scheme), &replica_opts).ok()?;
                    // A replica is reached at an address found for a name: its certificate
                    // names the name.
                    let name = target.host.trim_start_matches('[').trim_end_matches(']');
                    Some(dial(ep, &replica_opts, Some(name.to_owned())))
                }),
            )
        }
    };
    Ok(channel)
}

/// Channels to the endpoints a service is told to call (a device service named in each
/// request, say), one per endpoint, reused across calls; at most `capacity` are kept and the
/// least recently used is dropped first. Channels connect lazily, so [`ChannelCache::get`]
/// makes no network call.
#[derive(Debug)]
pub struct ChannelCache {
    opts: ClientOptions,
    capacity: usize,
    /// Least recently used first.
    channels: std::sync::Mutex<std::collections::VecDeque<(String, TracedChannel)>>,
}

impl ChannelCache {
    pub fn new(opts: ClientOptions, capacity: usize) -> Self {
        Self {
            opts,
            capacity: capacity.max(1),
            channels: std::sync::Mutex::default(),
        }
    }

    /// The channel to `endpoint` (trimmed), made on first use.
    pub fn get(&self, endpoint: &str) -> Result<TracedChannel> {
        let endpoint = endpoint.trim();
        // The cache holds no invariant a panicking holder could break.
        let mut cache = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = cache.iter().position(|(e, _)| e == endpoint)
            && let Some(entry) = cache.remove(i)
        {
            let channel = entry.1.clone();
            cache.push_back(entry);
            return Ok(channel);
        }
        let channel = connect(endpoint, &self.opts)?;
        while cache.len() >= self.capacity {
            cache.pop_front();
        }
        cache.push_back((endpoint.to_owned(), channel.clone()));
        Ok(channel)
    }

    /// The endpoints with a channel now, least recently used first.
    pub fn endpoints(&self) -> Vec<String> {
        let cache = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        cache.iter().map(|(e, _)| e.clone()).collect()
    }
}

/// A lazily connected channel to `ep`: over TLS when its scheme is `https` (the server's
/// certificate checked against `name`, else the configured `tls.server_name`, else the
/// endpoint's host), else plain HTTP/2.
fn dial(ep: Endpoint, opts: &ClientOptions, name: Option<String>) -> Channel {
    if ep.uri().scheme_str() == Some("https") {
        ep.connect_with_connector_lazy(TlsConnector::new(opts.tls.clone(), name))
    } else {
        ep.connect_lazy()
    }
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
        .keep_alive_timeout(opts.keepalive_timeout)
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
    async fn cached_channels_are_reused_and_the_least_recently_used_is_dropped() {
        let cache = ChannelCache::new(ClientOptions::default(), 2);
        cache.get("http://127.0.0.1:2").unwrap();
        cache.get(" http://127.0.0.1:1 ").unwrap();
        cache.get("http://127.0.0.1:2").unwrap();
        assert_eq!(
            cache.endpoints(),
            ["http://127.0.0.1:1", "http://127.0.0.1:2"]
        );
        cache.get("http://127.0.0.1:3").unwrap();
        assert_eq!(
            cache.endpoints(),
            ["http://127.0.0.1:2", "http://127.0.0.1:3"]
        );
        assert!(cache.get("not a uri at all").is_err());
        assert_eq!(cache.endpoints().len(), 2);
    }
}
