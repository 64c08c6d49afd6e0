//! Client-side balancing over the replicas of a service. An endpoint may be a name (a
//! Kubernetes headless Service, say): it is resolved to every address, resolved again every
//! `resolve_every` and whenever a connection fails; each replica's health and reported work
//! are probed every `probe_every`. `tower`'s power-of-two-choices balancer picks, per call,
//! the less loaded of two healthy replicas, load being the calls this client has in flight
//! there plus the work the replica reports beyond them. A call is one HTTP/2 stream on one
//! replica's connection, so a long stream stays where it started; new calls spread. A call
//! that names an affinity key (a task id, [`set_affinity`]) goes where the key's calls went
//! before, while that replica is healthy (see [`affinity`]).
pub mod affinity;
mod pool;
mod replica;
pub mod resolve;

use crate::error::{Result, RuntimeError};
pub use affinity::{AFFINITY_HEADER, MOVED_HEADER, set_affinity};
use pool::{Pool, Snapshot};
use replica::{BoxError, BoxFuture, Dispatched};
pub use resolve::{HostsFileResolver, Resolver, StaticResolver, SystemResolver};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::watch;
use tonic::body::Body;
use tonic::transport::Channel;
use tower::buffer::Buffer;
use tower::util::BoxService;

/// How a balanced channel finds and watches its replicas.
#[derive(Debug, Clone)]
pub struct Discovery {
    pub resolver: Arc<dyn Resolver>,
    /// Names are resolved again this often (and at once when a connection fails).
    pub resolve_every: Duration,
    /// Each replica's health and load are asked this often.
    pub probe_every: Duration,
    /// A probe not answered within this marks the replica unhealthy.
    pub probe_timeout: Duration,
    /// A call that no healthy replica takes within this fails UNAVAILABLE, naming why each
    /// replica is out.
    pub pick_timeout: Duration,
    /// How long a call waits while healthy replicas are all at capacity (each reports its
    /// own); then it fails RESOURCE_EXHAUSTED. At least `pick_timeout`.
    pub capacity_wait: Duration,
}

impl Default for Discovery {
    fn default() -> Self {
        Self {
            resolver: Arc::new(SystemResolver),
            resolve_every: Duration::from_secs(10),
            probe_every: Duration::from_secs(1),
            probe_timeout: Duration::from_secs(1),
            pick_timeout: Duration::from_secs(5),
            capacity_wait: Duration::from_secs(5),
        }
    }
}

/// One configured endpoint: `scheme://host:port`, `host` a name or an address literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) scheme: String,
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Target {
    pub(crate) fn parse(raw: &str) -> Result<Target> {
        let bad = |reason: &str| RuntimeError::BadEndpoint {
            endpoint: raw.to_owned(),
            reason: reason.to_owned(),
        };
        let with_scheme = if raw.contains("://") {
            raw.to_owned()
        } else {
            format!("http://{raw}")
        };
        let uri: http::Uri = with_scheme.parse().map_err(|e| bad(&format!("{e}")))?;
        let scheme = uri.scheme_str().unwrap_or("http").to_owned();
        if scheme != "http" && scheme != "https" {
            return Err(bad("only http:// and https:// endpoints are supported"));
        }
        let host = uri.host().ok_or_else(|| bad("no host"))?.to_owned();
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        Ok(Target { scheme, host, port })
    }

    /// Whether the host is an address, which needs no resolving.
    pub(crate) fn is_literal(&self) -> bool {
        self.host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok()
    }
}

/// Makes a replica's lazily connected channel from its address and the target it was found
/// for (`None`: the address cannot be made an endpoint, and the replica is left out).
pub(crate) type MakeChannel = Box<dyn Fn(SocketAddr, &Target) -> Option<Channel> + Send + Sync>;

type Balanced =
    Buffer<http::Request<Body>, BoxFuture<std::result::Result<http::Response<Body>, BoxError>>>;

/// The channel generated clients call through: one replica's tonic channel, or a balancer
/// over the replicas the endpoints resolve to.
#[derive(Clone)]
pub struct MeshChannel(Inner);

#[derive(Clone)]
enum Inner {
    Direct(Channel),
    Balanced {
        buffer: Balanced,
        snapshot: watch::Receiver<Snapshot>,
        pick_timeout: Duration,
        capacity_wait: Duration,
        what: Arc<str>,
        memory: Arc<affinity::Memory>,
    },
}

impl std::fmt::Debug for MeshChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Inner::Direct(_) => f.write_str("MeshChannel::Direct"),
            Inner::Balanced { what, .. } => write!(f, "MeshChannel::Balanced({what})"),
        }
    }
}

impl MeshChannel {
    /// A channel to one endpoint (connected lazily).
    pub(crate) fn direct(channel: Channel) -> Self {
        Self(Inner::Direct(channel))
    }

    /// A balancer over every address `targets` resolve to; `make_channel` makes each
    /// replica's lazily connected channel with its connection options. Must be called inside
    /// a tokio runtime.
    pub(crate) fn balanced(
        what: &str,
        targets: Vec<Target>,
        discovery: Discovery,
        make_channel: MakeChannel,
    ) -> Self {
        let pick_timeout = discovery.pick_timeout;
        let capacity_wait = discovery.capacity_wait.max(pick_timeout);
        let (changes, snapshot) = Pool::spawn(targets, discovery, make_channel);
        let discover = tokio_stream::wrappers::ReceiverStream::new(changes);
        let balance = tower::balance::p2c::Balance::new(discover);
        let (buffer, worker) = Buffer::pair(BoxService::new(balance), 1024);
        tokio::spawn(worker);
        Self(Inner::Balanced {
            buffer,
            snapshot,
            pick_timeout,
            capacity_wait,
            what: Arc::from(what),
            memory: Arc::default(),
        })
    }

    /// The replicas a balanced channel knows now, with whether each is healthy (empty for a
    /// direct channel).
    pub fn replicas(&self) -> Vec<(SocketAddr, bool)> {
        match &self.0 {
            Inner::Direct(_) => Vec::new(),
            Inner::Balanced { snapshot, .. } => snapshot
                .borrow()
                .replicas
                .iter()
                .map(|r| (r.addr, r.healthy))
                .collect(),
        }
    }
}

/// Why no replica took a call, naming each replica and why it is out: RESOURCE_EXHAUSTED when
/// healthy replicas were all at capacity, UNAVAILABLE when none was healthy.
pub(crate) fn no_replica(what: &str, waited: Duration, snapshot: &Snapshot) -> tonic::Status {
    let mut reasons: Vec<String> = snapshot
        .replicas
        .iter()
        .map(|r| {
            if r.healthy {
                format!(
                    "{} at capacity ({} of {})",
                    r.addr,
                    r.state.load(),
                    r.state.capacity()
                )
            } else {
                format!("{}: {}", r.addr, r.why)
            }
        })
        .collect();
    reasons.extend(snapshot.resolve_errors.iter().cloned());
    if reasons.is_empty() {
        reasons.push("no replica resolved yet".to_owned());
    }
    if snapshot.replicas.iter().any(|r| r.healthy) {
        return tonic::Status::resource_exhausted(format!(
            "every healthy replica of {what} stayed at capacity for {waited:?} ({})",
            reasons.join("; ")
        ));
    }
    tonic::Status::unavailable(format!(
        "no healthy replica of {what} took the call within {waited:?} ({})",
        reasons.join("; ")
    ))
}

/// How often a call not yet taken by a replica looks again at why.
pub(crate) const PICK_TICK: Duration = Duration::from_millis(100);

impl tower::Service<http::Request<Body>> for MeshChannel {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = BoxFuture<std::result::Result<http::Response<Body>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        match &mut self.0 {
            Inner::Direct(channel) => channel.poll_ready(cx).map_err(Into::into),
            Inner::Balanced { buffer, .. } => buffer.poll_ready(cx),
        }
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        match &mut self.0 {
            Inner::Direct(channel) => {
                let fut = channel.call(req);
                Box::pin(async move { fut.await.map_err(Into::into) })
            }
            Inner::Balanced {
                buffer,
                snapshot,
                pick_timeout,
                capacity_wait,
                what,
                memory,
            } => {
                if let Some(key) = affinity::key_of(&req) {
                    let route = affinity::Route {
                        snapshot: snapshot.clone(),
                        memory: Arc::clone(memory),
                        pick_timeout: *pick_timeout,
                        capacity_wait: *capacity_wait,
                        what: Arc::clone(what),
                    };
                    return Box::pin(affinity::call(key, req, route));
                }
                let dispatched = Dispatched::default();
                req.extensions_mut().insert(dispatched.clone());
                let fut = buffer.call(req);
                let snapshot = snapshot.clone();
                let (pick_timeout, capacity_wait) = (*pick_timeout, *capacity_wait);
                let what = Arc::clone(what);
                Box::pin(async move {
                    tokio::pin!(fut);
                    let started = tokio::time::Instant::now();
                    loop {
                        tokio::select! {
                            result = &mut fut => return result,
                            () = tokio::time::sleep(PICK_TICK.min(pick_timeout)) => {}
                        }
                        if dispatched.0.load(Ordering::Acquire) {
                            return fut.await;
                        }
                        let waited = started.elapsed();
                        let any_healthy = snapshot.borrow().replicas.iter().any(|r| r.healthy);
                        let limit = if any_healthy {
                            capacity_wait
                        } else {
                            pick_timeout
                        };
                        if waited >= limit {
                            // Dropping the call takes it out of the queue before any replica
                            // sees it.
                            let status = no_replica(&what, waited, &snapshot.borrow());
                            return Err(Box::new(status) as BoxError);
                        }
                    }
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Target;

    #[test]
    fn endpoints_parse_into_targets() {
        let t = Target::parse("http://droidmesh-executor:50052").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.is_literal()),
            ("droidmesh-executor", 50052, false)
        );
        let t = Target::parse("127.0.0.2:7").unwrap();
        assert!(t.is_literal());
        let t = Target::parse("http://[::1]:7").unwrap();
        assert!(t.is_literal(), "{t:?}");
        let t = Target::parse("https://droidmesh-device").unwrap();
        assert_eq!((t.scheme.as_str(), t.port), ("https", 443));
        let err = Target::parse("ftp://x:1").unwrap_err().to_string();
        assert!(err.contains("only http:// and https://"), "{err}");
    }
}
