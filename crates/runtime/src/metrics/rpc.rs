//! RPC metrics as a tower layer around every gRPC server: `rpc.server.duration` (seconds) and
//! `rpc.server.requests` by service, method and gRPC status code, and
//! `rpc.server.active_requests` by service and method. A call counts as active from its
//! request until its response body ends or is dropped, so a stream in progress (a RunCodeAct,
//! a WatchTask) stays counted for as long as it streams. Its status is the server's: from the
//! trailers (or the headers of a trailers-only error). A response body dropped before its end
//! (its client left) hands its call to the layer at the other end of the stack
//! ([`super::stream_end`]), which settles it from the server's own stream.
use super::stream_end::EndSlot;
use http_body::{Body, Frame, SizeHint};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, UpDownCounter};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The label of a method, or service, the server does not register.
pub const OTHER: &str = "_OTHER";
/// gRPC status codes 0 (OK) to 16 (UNAUTHENTICATED).
const CODES: usize = 17;
pub(super) const CANCELLED: usize = 1;
pub(super) const UNKNOWN: usize = 2;
/// The end grace when none is given: how long a stream whose client left before its status is
/// watched for that status (see [`super::stream_end`]).
pub const DEFAULT_END_GRACE: Duration = Duration::from_secs(1);

/// Adds RPC metrics to a tonic server (`Server::builder().layer(...)`), outermost, with
/// [`super::stream_end::StreamEndLayer`] innermost (next to the routes). Instruments come from
/// the global meter provider as it is when the layer is made.
#[derive(Clone)]
pub struct RpcMetricsLayer {
    inst: Arc<Instruments>,
}

impl std::fmt::Debug for RpcMetricsLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RpcMetricsLayer")
    }
}

impl RpcMetricsLayer {
    /// A layer for a server that registers `services` (fully qualified names): their methods,
    /// as the embedded descriptor sets list them ([`super::methods`]), get labels of their
    /// own; any other path counts as `_OTHER` (its service too, unless one of `services`).
    pub fn new(services: &[&str]) -> Self {
        Self::with_end_grace(services, DEFAULT_END_GRACE)
    }

    /// [`RpcMetricsLayer::new`] whose streams, once their clients left before the server's
    /// status, are watched for that status for `grace` (see [`super::stream_end`]).
    pub fn with_end_grace(services: &[&str], grace: Duration) -> Self {
        let mut paths = HashMap::new();
        let mut other_method = HashMap::new();
        for service in services {
            let Some(methods) = super::methods::methods_of(service) else {
                tracing::warn!(
                    service,
                    "metrics: no embedded descriptor describes this service; its calls are \
                     counted as rpc_method=\"_OTHER\""
                );
                other_method.insert((*service).into(), Arc::new(PathAttrs::new(service, OTHER)));
                continue;
            };
            for method in methods {
                let attrs = Arc::new(PathAttrs::new(service, method));
                paths.insert(format!("/{service}/{method}").into(), attrs);
            }
            other_method.insert((*service).into(), Arc::new(PathAttrs::new(service, OTHER)));
        }
        let meter = opentelemetry::global::meter(super::METER);
        Self {
            inst: Arc::new(Instruments {
                duration: meter
                    .f64_histogram("rpc.server.duration")
                    .with_unit("s")
                    .with_description("Duration of inbound RPCs, streams until their end")
                    // 1 ms to 5 minutes: unary calls and whole CodeAct streams alike.
                    .with_boundaries(vec![
                        0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                        10.0, 30.0, 60.0, 300.0,
                    ])
                    .build(),
                requests: meter
                    .u64_counter("rpc.server.requests")
                    .with_unit("{request}")
                    .with_description("Inbound RPCs ended, by gRPC status code")
                    .build(),
                active: meter
                    .i64_up_down_counter("rpc.server.active_requests")
                    .with_unit("{request}")
                    .with_description("Inbound RPCs and streams in progress")
                    .build(),
                paths,
                other_method,
                other: Arc::new(PathAttrs::new(OTHER, OTHER)),
                grace,
                watched: AtomicUsize::new(0),
            }),
        }
    }
}

impl<S> tower::Layer<S> for RpcMetricsLayer {
    type Service = RpcMetrics<S>;

    fn layer(&self, inner: S) -> RpcMetrics<S> {
        RpcMetrics {
            inner,
            inst: self.inst.clone(),
        }
    }
}

pub(super) struct Instruments {
    duration: Histogram<f64>,
    requests: Counter<u64>,
    active: UpDownCounter<i64>,
    /// The attributes of every registered method, by `/service/method` path.
    paths: HashMap<Box<str>, Arc<PathAttrs>>,
    /// The attributes of a path of a registered service but no method of it.
    other_method: HashMap<Box<str>, Arc<PathAttrs>>,
    /// The attributes of any other path.
    other: Arc<PathAttrs>,
    /// How long a stream whose client left is watched for its status.
    pub(super) grace: Duration,
    /// Streams watched now, their clients gone (bounded by [`super::stream_end`]).
    pub(super) watched: AtomicUsize,
}

/// The attribute sets of one method, made once.
struct PathAttrs {
    active: [KeyValue; 2],
    by_code: Vec<[KeyValue; 4]>,
}

impl PathAttrs {
    fn new(service: &str, method: &str) -> Self {
        let service = KeyValue::new("rpc.service", service.to_owned());
        let method = KeyValue::new("rpc.method", method.to_owned());
        let by_code = (0..CODES)
            .map(|code| {
                [
                    KeyValue::new("rpc.system", "grpc"),
                    service.clone(),
                    method.clone(),
                    KeyValue::new("rpc.grpc.status_code", code as i64),
                ]
            })
            .collect();
        Self {
            active: [service, method],
            by_code,
        }
    }
}

impl Instruments {
    /// The attributes of a call to `path`: made once for every registered method, so a
    /// caller's made-up paths neither grow the label set nor take a real method's place.
    fn attrs(&self, path: &str) -> &Arc<PathAttrs> {
        if let Some(a) = self.paths.get(path) {
            return a;
        }
        path.strip_prefix('/')
            .and_then(|p| p.split_once('/'))
            .and_then(|(service, _)| self.other_method.get(service))
            .unwrap_or(&self.other)
    }
}

/// The layer's service.
#[derive(Clone)]
pub struct RpcMetrics<S> {
    inner: S,
    inst: Arc<Instruments>,
}

impl<S, ReqB, ResB> tower::Service<http::Request<ReqB>> for RpcMetrics<S>
where
    S: tower::Service<http::Request<ReqB>, Response = http::Response<ResB>>,
{
    type Response = http::Response<MetricsBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<ReqB>) -> Self::Future {
        let attrs = Arc::clone(self.inst.attrs(req.uri().path()));
        let slot = EndSlot::new();
        req.extensions_mut().insert(Arc::clone(&slot));
        self.inst.active.add(1, &attrs.active);
        let call = Call {
            inst: self.inst.clone(),
            attrs,
            start: Instant::now(),
            code: None,
            done: false,
        };
        ResponseFuture {
            inner: self.inner.call(req),
            call: Some(call),
            slot: Some(slot),
        }
    }
}

/// One call in progress; records itself once, when it ends or is dropped.
pub(super) struct Call {
    pub(super) inst: Arc<Instruments>,
    attrs: Arc<PathAttrs>,
    start: Instant,
    code: Option<usize>,
    done: bool,
}

impl Call {
    pub(super) fn finish(&mut self, code: usize) {
        if self.done {
            return;
        }
        self.done = true;
        let attrs = &self.attrs.by_code[code.min(CODES - 1)];
        let seconds = self.start.elapsed().as_secs_f64();
        self.inst.duration.record(seconds, attrs);
        self.inst.requests.add(1, attrs);
        self.inst.active.add(-1, &self.attrs.active);
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        // Dropped before its end: the client went away (or the server stopped).
        self.finish(self.code.unwrap_or(CANCELLED));
    }
}

pub(super) fn status_code(headers: &http::HeaderMap) -> Option<usize> {
    let code = headers
        .get("grpc-status")?
        .to_str()
        .ok()?
        .parse::<usize>()
        .ok()?;
    Some(if code < CODES { code } else { UNKNOWN })
}

pin_project_lite::pin_project! {
    /// The response future of [`RpcMetrics`].
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        call: Option<Call>,
        slot: Option<Arc<EndSlot>>,
    }
}

impl<F, ResB, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<ResB>, E>>,
{
    type Output = Result<http::Response<MetricsBody<ResB>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = std::task::ready!(this.inner.poll(cx));
        let mut call = this.call.take();
        let slot = this.slot.take().unwrap_or_else(EndSlot::new);
        Poll::Ready(match result {
            Ok(resp) => {
                if let Some(c) = call.as_mut() {
                    // A trailers-only response (an error) carries its status in the headers.
                    c.code = status_code(resp.headers());
                }
                Ok(resp.map(|inner| MetricsBody { inner, call, slot }))
            }
            Err(e) => {
                if let Some(mut c) = call {
                    c.finish(UNKNOWN);
                }
                Err(e)
            }
        })
    }
}

pin_project_lite::pin_project! {
    /// A response body that ends its call's measurement with the body; dropped before its
    /// end, it hands the call to the stream's [`EndSlot`].
    pub struct MetricsBody<B> {
        #[pin]
        inner: B,
        call: Option<Call>,
        slot: Arc<EndSlot>,
    }

    impl<B> PinnedDrop for MetricsBody<B> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(call) = this.call.take() {
                match call.code {
                    // A trailers-only response: its status is known, and recorded as the
                    // call drops.
                    Some(_) => drop(call),
                    // Runs before the body inside is dropped, so the call is in the slot
                    // when the far end looks.
                    None => this.slot.hand_over(call),
                }
            }
        }
    }
}

impl<B: Body> Body for MetricsBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let frame = std::task::ready!(this.inner.poll_frame(cx));
        let headers_code = this.call.as_ref().and_then(|c| c.code);
        if let Some(code) = end_code(frame.as_ref(), headers_code)
            && let Some(mut c) = this.call.take()
        {
            c.finish(code);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The status a frame ends its call with, `None` for a data frame: a trailers frame's, an
/// error's UNKNOWN, and at the body's end the headers' (`headers_code`) or UNKNOWN.
pub(super) fn end_code<D, E>(
    frame: Option<&Result<Frame<D>, E>>,
    headers_code: Option<usize>,
) -> Option<usize> {
    match frame {
        Some(Ok(f)) => f
            .trailers_ref()
            .map(|trailers| status_code(trailers).unwrap_or(UNKNOWN)),
        Some(Err(_)) => Some(UNKNOWN),
        None => Some(headers_code.unwrap_or(UNKNOWN)),
    }
}
