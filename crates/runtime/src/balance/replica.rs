//! One replica of a balanced service: its channel, what its probe last learnt (health, the
//! work it reports), and the calls this client has in flight on it. The balancer sees it as a
//! `tower` service whose load is that work, ready only while the replica is healthy.
use crate::counted::{BodyGuard, CountedBody};
use futures::task::AtomicWaker;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::Notify;
use tonic::body::Body;
use tonic::transport::Channel;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Shared between the balancer's [`Replica`], its probe and the pool.
#[derive(Debug)]
pub(crate) struct ReplicaState {
    pub(crate) addr: SocketAddr,
    /// Calls and streams this client has in progress on the replica.
    local: AtomicUsize,
    /// Work the replica reported beyond this client's own, at the last probe.
    others: AtomicUsize,
    /// The most work the replica takes at once, as it reported (0: no limit).
    capacity: AtomicUsize,
    healthy: AtomicBool,
    /// Left the resolved set (or the pool ended): its probe stops.
    pub(crate) removed: AtomicBool,
    /// Why it is not healthy, for the error a caller gets when no replica is ready.
    why: Mutex<String>,
    waker: AtomicWaker,
    /// Tells the pool to re-resolve and re-probe now (a connection failed).
    poke: Arc<Notify>,
    /// Tells the pool that healthy replicas changed.
    changed: Arc<Notify>,
}

impl ReplicaState {
    pub(crate) fn new(addr: SocketAddr, poke: Arc<Notify>, changed: Arc<Notify>) -> Arc<Self> {
        Arc::new(Self {
            addr,
            local: AtomicUsize::new(0),
            others: AtomicUsize::new(0),
            capacity: AtomicUsize::new(0),
            healthy: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            why: Mutex::new("not probed yet".to_owned()),
            waker: AtomicWaker::new(),
            poke,
            changed,
        })
    }

    pub(crate) fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    pub(crate) fn load(&self) -> usize {
        self.local.load(Ordering::Relaxed) + self.others.load(Ordering::Relaxed)
    }

    pub(crate) fn local(&self) -> usize {
        self.local.load(Ordering::Relaxed)
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Whether the replica has no room for one more call, by what it reported and what this
    /// client has sent since.
    pub(crate) fn full(&self) -> bool {
        let capacity = self.capacity();
        capacity > 0 && self.load() >= capacity
    }

    pub(crate) fn why(&self) -> String {
        self.why.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records a probe: healthy, and the replica's own count of its work and its capacity
    /// when it reports them. The work beyond this client's own subtracts the larger of this
    /// client's calls when the probe left and now: a call sent while the probe was under way
    /// may be in the replica's count, and counting it twice would starve the replica of new
    /// calls until the next probe (a burst of calls at once showed it); one that ended
    /// meanwhile only makes the replica look a call lighter.
    pub(crate) fn probed_healthy(&self, reported: Option<(usize, usize)>, local_then: usize) {
        if let Some((work, capacity)) = reported {
            let local = local_then.max(self.local());
            self.others
                .store(work.saturating_sub(local), Ordering::Relaxed);
            self.capacity.store(capacity, Ordering::Relaxed);
            // Room may have appeared for a call waiting on this replica.
            self.waker.wake();
        }
        self.set_health(true, String::new());
    }

    pub(crate) fn set_unhealthy(&self, why: String) {
        self.set_health(false, why);
    }

    fn set_health(&self, healthy: bool, why: String) {
        *self.why.lock().unwrap_or_else(|p| p.into_inner()) = why;
        let was = self.healthy.swap(healthy, Ordering::AcqRel);
        if was != healthy {
            self.waker.wake();
            self.changed.notify_one();
        }
    }

    /// A call or stream on this replica failed at the connection: stop sending to it until a
    /// probe finds it well again, and have the pool look again now.
    fn connection_failed(&self, why: String) {
        self.set_unhealthy(why);
        self.poke.notify_one();
    }
}

/// The balancer's view of one replica.
#[derive(Debug, Clone)]
pub(crate) struct Replica {
    pub(crate) channel: Channel,
    pub(crate) state: Arc<ReplicaState>,
}

impl tower::load::Load for Replica {
    type Metric = usize;

    fn load(&self) -> usize {
        self.state.load()
    }
}

/// Marks a request once a replica took it, so a caller can tell "no replica took it in time"
/// from "a replica is working on it".
#[derive(Debug, Clone, Default)]
pub(crate) struct Dispatched(pub(crate) Arc<AtomicBool>);

struct LocalGuard(Arc<ReplicaState>);

impl Drop for LocalGuard {
    fn drop(&mut self) {
        self.0.local.fetch_sub(1, Ordering::Relaxed);
        // A call waiting for room on this replica may go now.
        self.0.waker.wake();
    }
}

impl BodyGuard for LocalGuard {
    fn failed(&mut self) {
        // A stream broken mid-way is the replica's connection failing (a killed process);
        // statuses the replica sends are not body errors.
        self.0
            .connection_failed("a response stream broke off".to_owned());
    }
}

impl tower::Service<http::Request<Body>> for Replica {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = BoxFuture<Result<http::Response<Body>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        let out = |s: &ReplicaState| !s.healthy() || s.full();
        if out(&self.state) {
            self.state.waker.register(cx.waker());
            if out(&self.state) {
                return Poll::Pending;
            }
        }
        tower::Service::poll_ready(&mut self.channel, cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if let Some(d) = req.extensions().get::<Dispatched>() {
            d.0.store(true, Ordering::Release);
        }
        self.state.local.fetch_add(1, Ordering::Relaxed);
        let guard = LocalGuard(Arc::clone(&self.state));
        let fut = tower::Service::call(&mut self.channel, req);
        Box::pin(async move {
            match fut.await {
                Ok(resp) => Ok(resp.map(|body| CountedBody::wrap(body, guard))),
                Err(e) => {
                    guard.0.connection_failed(format!("a call failed: {e}"));
                    Err(e.into())
                }
            }
        })
    }
}
