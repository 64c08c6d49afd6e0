//! The HTTP/1 server loop the doubles share: accept on a loopback listener, one hyper connection
//! task per client, every request handed to the double's handler; stopped by aborting the task.
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::ReceivedRequest;

/// What a double answers one request with.
pub(crate) type Reply = hyper::Response<Full<Bytes>>;

/// A double's request handler.
pub(crate) type Handler =
    Arc<dyn Fn(ReceivedRequest) -> Pin<Box<dyn Future<Output = Reply> + Send>> + Send + Sync>;

/// Serves `listener` until the returned task is aborted.
pub(crate) fn spawn(listener: TcpListener, handler: Handler) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut conns = JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            };
            // As model servers do: a reply is not held back waiting for the client's ACK.
            let _ = stream.set_nodelay(true);
            let handler = handler.clone();
            conns.spawn(async move {
                let svc = service_fn(move |req| {
                    let handler = handler.clone();
                    async move { Ok::<_, Infallible>(handler(read(req).await).await) }
                });
                let _closed = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
            while conns.try_join_next().is_some() {}
        }
    })
}

/// Reads a request whole.
async fn read(req: hyper::Request<Incoming>) -> ReceivedRequest {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    ReceivedRequest {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_default(),
        headers: parts.headers,
        body,
        at: Instant::now(),
    }
}

/// A response of `status` with `headers` and `body`.
pub(crate) fn reply(status: u16, headers: &[(String, String)], body: Bytes) -> Reply {
    let mut resp = hyper::Response::new(Full::new(body));
    *resp.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            resp.headers_mut().append(n, v);
        }
    }
    resp
}
