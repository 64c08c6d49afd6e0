//! The admin port: plain HTTP/1.1, `GET /metrics` answers the Prometheus text format 0.0.4,
//! anything else 404. Bounded: a few connections at once (more are closed as they arrive),
//! a cap on request header size, a deadline to read the headers and one for each connection.
use super::Metrics;
use crate::error::Result;
use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// The content type of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// The admin server's bounds.
#[derive(Debug, Clone)]
pub struct AdminOptions {
    /// Connections served at once; more are closed at once.
    pub max_connections: usize,
    /// Bytes of request head hyper buffers (8 KiB is its floor).
    pub max_header_bytes: usize,
    /// Time a client has to send its request headers.
    pub header_timeout: Duration,
    /// Longest a connection stays open, however busy.
    pub connection_timeout: Duration,
}

impl Default for AdminOptions {
    fn default() -> Self {
        Self {
            max_connections: 8,
            max_header_bytes: 8 * 1024,
            header_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves `/metrics` of `metrics` on `listener` until `shutdown` resolves, then closes every
/// connection it holds.
pub async fn serve_admin<F>(
    listener: TcpListener,
    metrics: Metrics,
    opts: AdminOptions,
    shutdown: F,
) -> Result<()>
where
    F: Future<Output = ()> + Send,
{
    let slots = Arc::new(Semaphore::new(opts.max_connections.max(1)));
    let mut connections = JoinSet::new();
    tracing::info!(addr = ?listener.local_addr().ok(), "admin server: serving /metrics");
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                tracing::warn!(error = %e, "admin server: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "admin server: too many connections; closing one");
            drop(stream);
            continue;
        };
        let metrics = metrics.clone();
        let opts = opts.clone();
        connections.spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(respond(&metrics, &req)) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(opts.header_timeout)
                .max_buf_size(opts.max_header_bytes.max(8192))
                .serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(opts.connection_timeout, conn).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "admin server: connection ended"),
                Err(_) => tracing::debug!(%peer, "admin server: connection deadline passed"),
            }
        });
    }
    connections.shutdown().await;
    Ok(())
}

fn respond<B>(metrics: &Metrics, req: &hyper::Request<B>) -> hyper::Response<Full<Bytes>> {
    let reply = |status: http::StatusCode, content_type: &str, body: String| {
        let mut resp = hyper::Response::new(Full::new(Bytes::from(body)));
        *resp.status_mut() = status;
        if let Ok(v) = http::HeaderValue::from_str(content_type) {
            resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
        }
        resp
    };
    if req.method() != http::Method::GET || req.uri().path() != "/metrics" {
        return reply(
            http::StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: this port serves GET /metrics only\n".to_owned(),
        );
    }
    match metrics.render() {
        Ok(text) => reply(http::StatusCode::OK, CONTENT_TYPE, text),
        Err(e) => reply(
            http::StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            format!("{e}\n"),
        ),
    }
}
