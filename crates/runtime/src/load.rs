//! The work a server has in progress, and the `ReplicaService` that reports it: a client
//! balancing over replicas prefers the least loaded one and stops sending to one that drains.
use crate::counted::{BodyGuard, CountedBody};
use droidmesh_proto::v1::replica_service_server::{ReplicaService, ReplicaServiceServer};
use droidmesh_proto::v1::{GetLoadRequest, ReplicaLoad};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Poll};
use tonic::body::Body;

/// In-flight work and the draining flag of one server (one port).
#[derive(Debug, Default)]
pub struct LoadState {
    in_flight: AtomicU32,
    draining: AtomicBool,
    /// Most calls of droidmesh services at once; 0: no limit.
    capacity: AtomicU32,
}

impl LoadState {
    /// A state that refuses work beyond `capacity` calls at once (0: no limit).
    pub fn with_capacity(capacity: u32) -> Self {
        Self {
            capacity: AtomicU32::new(capacity),
            ..Self::default()
        }
    }

    pub fn capacity(&self) -> u32 {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Calls and streams of this port's droidmesh services in progress now.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub(crate) fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Counts one more call; `None` (and nothing counted) when that would pass the capacity.
    fn begin(self: &Arc<Self>) -> Option<InFlightGuard> {
        let capacity = self.capacity();
        let taken = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (capacity == 0 || n < capacity).then_some(n + 1)
            });
        taken.ok().map(|_| InFlightGuard(Arc::clone(self)))
    }
}

/// One unit of work; ends when dropped.
struct InFlightGuard(Arc<LoadState>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl BodyGuard for InFlightGuard {}

/// Whether a call to `path` is work (health checks, reflection and load reports are not).
fn is_work(path: &str) -> bool {
    path.starts_with("/droidmesh.") && !path.starts_with("/droidmesh.v1.ReplicaService/")
}

/// Counts every call of a droidmesh service from its arrival until its response body ends.
#[derive(Debug, Clone)]
pub struct InFlightLayer(pub Arc<LoadState>);

impl<S> tower::Layer<S> for InFlightLayer {
    type Service = InFlight<S>;

    fn layer(&self, inner: S) -> InFlight<S> {
        InFlight {
            inner,
            state: Arc::clone(&self.0),
        }
    }
}

#[derive(Debug, Clone)]
pub struct InFlight<S> {
    inner: S,
    state: Arc<LoadState>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

impl<S, B> tower::Service<http::Request<B>> for InFlight<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<http::Response<Body>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let mut guard = None;
        if is_work(req.uri().path()) {
            guard = self.state.begin();
            if guard.is_none() {
                let capacity = self.state.capacity();
                let status = tonic::Status::resource_exhausted(format!(
                    "this replica is at capacity: {capacity} calls in progress; another replica \
                     or a later try may take it"
                ));
                return Box::pin(async move { Ok(status.into_http()) });
            }
        }
        let fut = self.inner.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            Ok(match guard {
                Some(guard) => resp.map(|body| CountedBody::wrap(body, guard)),
                None => resp,
            })
        })
    }
}

/// Answers `GetLoad` from the server's [`LoadState`].
#[derive(Debug, Clone)]
pub struct LoadReporter(pub Arc<LoadState>);

#[tonic::async_trait]
impl ReplicaService for LoadReporter {
    async fn get_load(
        &self,
        _request: tonic::Request<GetLoadRequest>,
    ) -> Result<tonic::Response<ReplicaLoad>, tonic::Status> {
        Ok(tonic::Response::new(ReplicaLoad {
            in_flight: self.0.in_flight(),
            draining: self.0.draining(),
            capacity: self.0.capacity(),
        }))
    }
}

impl LoadReporter {
    pub fn server(self) -> ReplicaServiceServer<LoadReporter> {
        ReplicaServiceServer::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::is_work;

    #[test]
    fn only_droidmesh_services_count_as_work() {
        assert!(is_work("/droidmesh.v1.ExecutorService/RunCodeAct"));
        assert!(is_work("/droidmesh.v1.Gateway/RunTask"));
        assert!(!is_work("/droidmesh.v1.ReplicaService/GetLoad"));
        assert!(!is_work("/grpc.health.v1.Health/Check"));
        assert!(!is_work(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
        ));
    }
}
