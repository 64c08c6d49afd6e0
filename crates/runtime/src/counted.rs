//! A response body that holds a guard until it ends, so work that outlives the response head
//! (a server stream, a long unary reply) is counted for as long as it really lasts.
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::body::Body as TonicBody;

/// What a [`CountedBody`] tells its guard besides being dropped.
pub(crate) trait BodyGuard: Send + Unpin + 'static {
    /// The body failed mid-way (the peer went away, say).
    fn failed(&mut self) {}
}

/// Wraps `inner`; `guard` is dropped with the body (after its last frame or when abandoned).
pub(crate) struct CountedBody<G: BodyGuard> {
    inner: TonicBody,
    guard: G,
}

impl<G: BodyGuard> CountedBody<G> {
    pub(crate) fn wrap(inner: TonicBody, guard: G) -> TonicBody {
        TonicBody::new(Self { inner, guard })
    }
}

impl<G: BodyGuard> Body for CountedBody<G> {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Err(_))) = &polled {
            this.guard.failed();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
