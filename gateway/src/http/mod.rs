//! The gateway's HTTP/JSON face: the `droidmesh.v1.Gateway` calls as REST routes with
//! Server-Sent Events for event streams, and an OpenAPI document generated from the protos.
//! Every handler calls the same `Gateway` trait methods the gRPC server does, on the same
//! `Arc<GatewayService>`, with the HTTP `authorization` and trace headers as gRPC metadata, so
//! each check, limit and (future) authentication rule applies to both faces alike. Its routes
//! are an axum `Router` (`routes`, with the extractors of `extract`), served as the hyper
//! service of the face's own connections, held at `max_connections` as a gRPC port's are
//! (`conn`).
mod body;
mod call;
mod conn;
pub mod error;
mod extract;
mod io;
pub mod json;
pub mod openapi;
mod routes;
pub mod sse;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use droidmesh_runtime::server::ConnectionConfig;
use droidmesh_runtime::server::port::{Port, PortWords, WARN_EVERY};
use droidmesh_runtime::tls::ServerTls;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::GatewayService;

/// A response body: a whole JSON document or an event stream.
pub type Body = axum::body::Body;

pub(crate) fn full(bytes: Bytes) -> Body {
    Body::from(bytes)
}

/// Settings of the HTTP face (`[gateway_http]` in droidmesh.toml; its port is
/// `[listen] gateway_http`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Largest request body, in bytes; a larger one is refused with 413 before it is read.
    /// JSON is larger than the encoded request `gateway.max_request_bytes` caps.
    pub max_body_bytes: usize,
    /// An event stream sends a comment line after this long without an event, so proxies and
    /// clients see the connection alive.
    pub keep_alive_ms: u64,
    /// Longest a call (other than an event stream) may take; then 504 DEADLINE_EXCEEDED.
    pub request_timeout_ms: u64,
    /// Longest wait for a request's headers, and for its whole body.
    pub read_timeout_ms: u64,
    /// A connection whose client takes nothing of a response for this long is closed.
    pub write_stall_ms: u64,
    /// Connections held at once. At the cap a new connection takes the place of the oldest
    /// one that has not sent a whole request head yet (closed at once), else of the
    /// keep-alive connection idle longest (closed between requests); when every held
    /// connection has a request in progress (an event stream counts), the new one is closed
    /// at once. An eighth more may still be closing.
    pub max_connections: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            keep_alive_ms: 15_000,
            request_timeout_ms: 60_000,
            read_timeout_ms: 30_000,
            write_stall_ms: 30_000,
            max_connections: 1024,
        }
    }
}

impl HttpConfig {
    /// Every problem with the settings, each naming its key; `max_request_bytes` is the
    /// gateway's, which a body must be able to carry.
    pub fn problems(&self, max_request_bytes: usize) -> Vec<String> {
        let mut problems = Vec::new();
        if self.max_body_bytes < max_request_bytes {
            problems.push(format!(
                "gateway_http.max_body_bytes ({}) must be at least gateway.max_request_bytes ({max_request_bytes}): a request the gateway accepts must fit",
                self.max_body_bytes
            ));
        }
        for (name, v) in [
            ("keep_alive_ms", self.keep_alive_ms),
            ("request_timeout_ms", self.request_timeout_ms),
            ("read_timeout_ms", self.read_timeout_ms),
            ("write_stall_ms", self.write_stall_ms),
        ] {
            if v < 10 {
                problems.push(format!("gateway_http.{name} must be at least 10, got {v}"));
            }
        }
        if self.max_connections == 0 {
            problems.push("gateway_http.max_connections must be at least 1".into());
        }
        problems
    }

    /// Every problem at once, joined with "; " (what callers that take one message get).
    pub fn validate(&self, max_request_bytes: usize) -> Result<(), String> {
        let problems = self.problems(max_request_bytes);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// The cap as the runtime's connection registry takes it: `read_timeout_ms` is the
    /// deadline for what a client sends first (a request head).
    fn limits(&self) -> ConnectionConfig {
        ConnectionConfig {
            max_connections: self.max_connections,
            preface_timeout_ms: self.read_timeout_ms,
            idle_timeout_ms: self.read_timeout_ms,
            write_stall_ms: self.write_stall_ms,
        }
    }

    /// File descriptors the face may hold at most: its cap and the connections it is closing.
    pub fn descriptors(&self) -> usize {
        self.limits().descriptors()
    }
}

/// How the face names itself in its logs.
const WORDS: PortWords = PortWords {
    port: "gateway HTTP face",
    cap_key: "gateway_http.max_connections",
    opening: "request head",
    work: "request",
};

/// What every handler shares: the gateway, the settings, the OpenAPI document (built once),
/// the signal that ends event streams, and the face's connections.
pub struct Face {
    gateway: Arc<GatewayService>,
    cfg: HttpConfig,
    openapi: Bytes,
    stop: watch::Receiver<bool>,
    port: Arc<Port>,
}

/// Serves the HTTP face of `gateway` on `listener` (over TLS with `tls`, each connection's
/// handshake within its deadline) until `shutdown` resolves; then stops
/// accepting, ends event streams (clients resume with `Last-Event-ID`) and gives calls in
/// progress up to `drain` to finish.
pub async fn serve<F>(
    listener: TcpListener,
    tls: Option<ServerTls>,
    gateway: Arc<GatewayService>,
    cfg: HttpConfig,
    drain: Duration,
    shutdown: F,
) -> Result<(), String>
where
    F: Future<Output = ()> + Send,
{
    let document = openapi::document().map_err(|e| e.message)?;
    let (stop_tx, stop) = watch::channel(false);
    let port = Port::with_words("gateway_http", cfg.limits(), Arc::default(), WORDS);
    let face = Arc::new(Face {
        gateway,
        openapi: Bytes::from(document.to_string()),
        cfg,
        stop,
        port: Arc::clone(&port),
    });
    let router = routes::router(Arc::clone(&face));
    let mut connections = JoinSet::new();
    if let Ok(addr) = listener.local_addr() {
        let scheme = if tls.is_some() { "https" } else { "http" };
        tracing::info!(%addr, "gateway HTTP face: serving {scheme}://{addr} (/openapi.json)");
    }
    tokio::pin!(shutdown);
    // The first refusal warns at once; the counts since then every WARN_EVERY.
    let mut warn_tick =
        tokio::time::interval_at(tokio::time::Instant::now() + WARN_EVERY, WARN_EVERY);
    warn_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            _ = warn_tick.tick() => {
                port.warn_unreported();
                continue;
            }
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                port.accept_failed(&e);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // At the cap with nothing to make room: closed at once (dropped).
        let Some((slot, conn)) = port.admit() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        connections.spawn(conn::connection(
            Arc::clone(&face),
            router.clone(),
            conn,
            slot,
            stream,
            peer,
            tls.clone(),
        ));
    }
    let _ = stop_tx.send(true);
    // Connections that have not sent a whole request head have nothing to finish.
    port.stop();
    drop(listener);
    tracing::info!(
        connections = connections.len(),
        "gateway HTTP face: shutting down, draining calls in progress"
    );
    let drained = tokio::time::timeout(drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(timeout = ?drain, "gateway HTTP face: drain deadline passed; closing the rest");
        port.kill_all();
        connections.shutdown().await;
    }
    port.warn_unreported();
    Ok(())
}

/// Resolves once `stop` turns true (or its sender is gone).
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

#[cfg(test)]
mod tests;
