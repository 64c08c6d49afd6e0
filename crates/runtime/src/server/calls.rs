//! Two tower layers every gRPC port runs its calls through: one counts each connection's calls
//! in progress (a call lasts until its response body ends, so a stream keeps its connection
//! busy), the other refuses a request message over the size limit with RESOURCE_EXHAUSTED.
use super::io::ConnInfo;
use crate::counted::CountedBody;
use bytes::{Buf, Bytes};
use http_body::{Body as HttpBody, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::body::Body;

/// The largest request message a port decodes: tonic's default, which no droidmesh service
/// changes. Larger ones are refused here, before tonic would answer OUT_OF_RANGE.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Counts each call on the connection it came in on (see [`ConnInfo`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CallsLayer;

impl<S> tower::Layer<S> for CallsLayer {
    type Service = Calls<S>;

    fn layer(&self, inner: S) -> Calls<S> {
        Calls { inner }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Calls<S> {
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for Calls<S>
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
        let guard = req
            .extensions()
            .get::<ConnInfo>()
            .map(|info| info.conn.begin_call());
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

/// Refuses a request message longer than [`MAX_MESSAGE_BYTES`] as gRPC does:
/// RESOURCE_EXHAUSTED, naming the limit and the size.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MessageLimitLayer;

impl<S> tower::Layer<S> for MessageLimitLayer {
    type Service = MessageLimit<S>;

    fn layer(&self, inner: S) -> MessageLimit<S> {
        MessageLimit { inner }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct MessageLimit<S> {
    inner: S,
}

impl<S> tower::Service<http::Request<Body>> for MessageLimit<S>
where
    S: tower::Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        self.inner
            .call(req.map(|body| Body::new(Limited::new(body, MAX_MESSAGE_BYTES))))
    }
}

/// A request body read through: each gRPC message's 5-byte prefix (compressed flag, length)
/// is looked at as it passes, and a length over the limit ends the body with the refusal.
struct Limited {
    inner: Body,
    limit: usize,
    prefix: [u8; 5],
    have: usize,
    /// Bytes of the current message still to pass.
    skip: usize,
    failed: bool,
}

impl Limited {
    fn new(inner: Body, limit: usize) -> Self {
        Self {
            inner,
            limit,
            prefix: [0; 5],
            have: 0,
            skip: 0,
            failed: false,
        }
    }

    fn scan(&mut self, mut data: &[u8]) -> Result<(), tonic::Status> {
        while !data.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(data.len());
                self.skip -= n;
                data = &data[n..];
                continue;
            }
            let n = (5 - self.have).min(data.len());
            self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == 5 {
                self.have = 0;
                let len = (&self.prefix[1..]).get_u32() as usize;
                if len > self.limit {
                    return Err(too_large(len, self.limit));
                }
                self.skip = len;
            }
        }
        Ok(())
    }
}

fn too_large(len: usize, limit: usize) -> tonic::Status {
    tonic::Status::resource_exhausted(format!(
        "the request message is {len} bytes, over this server's limit of {limit} bytes \
         ({} MiB): send less in one message",
        limit / (1024 * 1024)
    ))
}

impl HttpBody for Limited {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
            && let Err(refused) = this.scan(data)
        {
            this.failed = true;
            return Poll::Ready(Some(Err(refused)));
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_over_the_limit_is_refused_wherever_the_chunks_split_it() {
        let mut msg = vec![0u8];
        msg.extend_from_slice(&10u32.to_be_bytes());
        msg.extend_from_slice(&[7; 10]);
        msg.push(0);
        msg.extend_from_slice(&11u32.to_be_bytes());
        for split in 0..msg.len() {
            let mut l = Limited::new(Body::empty(), 10);
            let first = l.scan(&msg[..split]);
            let result = first.and_then(|()| l.scan(&msg[split..]));
            let refused = result.expect_err("the second message is over the limit");
            assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
            assert!(
                refused
                    .message()
                    .contains("is 11 bytes, over this server's limit of 10")
            );
        }
        let mut ok = Limited::new(Body::empty(), 10);
        ok.scan(&msg[..15]).unwrap();
    }
}
