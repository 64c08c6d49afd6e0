//! The far end of the RPC metrics: a tower layer next to the routes that settles the status of
//! a call whose client left before the server's status. A client may close a stream once it
//! has the last message, before the trailers reach it (the gateway does so with a finished
//! RunCodeAct); the connection then drops the response body before its end. The layers
//! between (load, connection calls) let go at once; only the server's own stream is kept, off
//! the connection, for up to the end grace: if its next frame is its status, the server had
//! said everything and the call ends with that status; if it is more data, or nothing comes
//! in time, the client abandoned the stream and it ends as CANCELLED.
use super::rpc::{CANCELLED, Call, end_code};
use http_body::{Body as HttpBody, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tonic::body::Body;

/// Streams watched at once after their clients left; more end as CANCELLED at once.
const MAX_WATCHED: usize = 1024;

/// Where the outer layer leaves a call whose response body was dropped before its end, for
/// the far end to settle. Travels down in the request's extensions.
pub(crate) struct EndSlot {
    call: Mutex<Option<Call>>,
}

impl EndSlot {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            call: Mutex::new(None),
        })
    }

    /// Leaves `call` here; if nobody takes it, it ends as CANCELLED with the slot.
    pub(super) fn hand_over(&self, call: Call) {
        *self.call.lock().unwrap_or_else(|p| p.into_inner()) = Some(call);
    }

    fn take(&self) -> Option<Call> {
        self.call.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// The layer next to the routes (`Server::builder()...layer(StreamEndLayer)` last); it only
/// acts under [`super::RpcMetricsLayer`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamEndLayer;

impl<S> tower::Layer<S> for StreamEndLayer {
    type Service = StreamEnd<S>;

    fn layer(&self, inner: S) -> StreamEnd<S> {
        StreamEnd { inner }
    }
}

/// The layer's service.
#[derive(Debug, Clone)]
pub struct StreamEnd<S> {
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for StreamEnd<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = EndFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        // Taken out, so the handler's request does not keep it.
        let slot = req.extensions_mut().remove::<Arc<EndSlot>>();
        EndFuture {
            inner: self.inner.call(req),
            slot,
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`StreamEnd`].
    pub struct EndFuture<F> {
        #[pin]
        inner: F,
        slot: Option<Arc<EndSlot>>,
    }
}

impl<F, E> Future for EndFuture<F>
where
    F: Future<Output = Result<http::Response<Body>, E>>,
{
    type Output = Result<http::Response<Body>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let resp = std::task::ready!(this.inner.poll(cx))?;
        Poll::Ready(Ok(match this.slot.take() {
            Some(slot) => resp.map(|inner| {
                Body::new(Watched {
                    inner: Some(inner),
                    slot: Some(slot),
                })
            }),
            None => resp,
        }))
    }
}

/// The server's response body, watched once dropped before its end.
struct Watched {
    inner: Option<Body>,
    /// `None` once the body has ended: nothing to settle.
    slot: Option<Arc<EndSlot>>,
}

impl HttpBody for Watched {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let frame = std::task::ready!(Pin::new(inner).poll_frame(cx));
        if end_code(frame.as_ref(), None).is_some() {
            this.slot = None;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        // The outer body, dropped first, has left its call in the slot.
        let (Some(slot), Some(body)) = (self.slot.take(), self.inner.take()) else {
            return;
        };
        if let Some(call) = slot.take() {
            watch(body, call);
        }
    }
}

/// Settles `call` from `body`'s next frame, waiting up to the end grace off the connection.
/// Without a runtime, or with [`MAX_WATCHED`] streams watched already, it ends as CANCELLED
/// at once.
fn watch(mut body: Body, mut call: Call) {
    let inst = Arc::clone(&call.inst);
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return call.finish(CANCELLED);
    };
    if inst.watched.fetch_add(1, Ordering::AcqRel) >= MAX_WATCHED {
        inst.watched.fetch_sub(1, Ordering::AcqRel);
        return call.finish(CANCELLED);
    }
    runtime.spawn(async move {
        let next = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx));
        let code = match tokio::time::timeout(inst.grace, next).await {
            Ok(frame) => end_code(frame.as_ref(), None).unwrap_or(CANCELLED),
            Err(_) => CANCELLED,
        };
        call.finish(code);
        drop(body);
        inst.watched.fetch_sub(1, Ordering::AcqRel);
    });
}
