//! The server bootstrap every droidmesh service uses: gRPC health (per service and overall),
//! reflection v1 and v1alpha, the load report balancing clients read, a trace-context span per
//! RPC, and a graceful drain with a deadline on shutdown. Each port holds at most
//! `[grpc] max_connections` connections, closes those that send no HTTP/2 preface in time or
//! stop reading, tells idle ones to go away, and refuses a request message over
//! [`MAX_MESSAGE_BYTES`] with RESOURCE_EXHAUSTED (see `accept`, `port`, `calls`).
use crate::error::{Result, RuntimeError};
use crate::load::{InFlightLayer, LoadReporter, LoadState};
use crate::tls::ServerTls;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic_health::ServingStatus;

mod accept;
mod calls;
mod descriptors;
mod io;
mod limits;
pub mod port;
mod stats;

pub use calls::MAX_MESSAGE_BYTES;
pub use descriptors::{RESERVED_DESCRIPTORS, ensure_descriptors};
pub use limits::ConnectionConfig;
pub use stats::ConnectionStats;

#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Short name used in logs and spans ("device", "gateway", ...).
    pub name: String,
    /// Fully qualified gRPC service names reported as SERVING by the health service.
    pub services: Vec<String>,
    /// How long in-flight RPCs may run after shutdown is requested.
    pub drain_timeout: Duration,
    /// How long the server keeps taking calls after shutdown is requested while it already
    /// reports NOT_SERVING and draining, so balancing clients notice before it stops
    /// accepting (their probe interval, or the time an orchestrator takes to stop routing).
    pub drain_notice: Duration,
    /// Work in progress, reported by `ReplicaService/GetLoad`; shared so the owner can read it.
    /// Its capacity (see [`LoadState::with_capacity`]) bounds the calls served at once.
    pub load: Arc<LoadState>,
    /// Serve TLS (and check callers' certificates as it says); `None`: plain HTTP/2.
    pub tls: Option<ServerTls>,
    /// How many connections the port holds, and how long it waits for clients (`[grpc]`).
    pub connections: ConnectionConfig,
    /// What the port did with its connections; shared so the owner can read it.
    pub connection_stats: Arc<ConnectionStats>,
    /// How long the RPC metrics watch a stream whose client left before the server's status
    /// for that status (see [`crate::metrics::rpc`]); the handler's stream is kept that long.
    pub metrics_end_grace: Duration,
}

impl ServeOptions {
    pub fn new(name: &str, services: &[&str]) -> Self {
        Self {
            name: name.to_owned(),
            services: services.iter().map(|s| (*s).to_owned()).collect(),
            drain_timeout: Duration::from_secs(10),
            drain_notice: Duration::ZERO,
            load: Arc::default(),
            tls: None,
            connections: ConnectionConfig::default(),
            connection_stats: Arc::default(),
            metrics_end_grace: crate::metrics::rpc::DEFAULT_END_GRACE,
        }
    }
}

/// How long a port waits, once it has cut its last connections, for their tasks to end.
const CUT_WAIT: Duration = Duration::from_secs(1);

const HEALTH: &str = "grpc.health.v1.Health";
const REFLECTION_V1: &str = "grpc.reflection.v1.ServerReflection";
const REFLECTION_V1ALPHA: &str = "grpc.reflection.v1alpha.ServerReflection";

/// A reflection builder that advertises exactly what this port serves: `services`, health, the
/// load report and the reflection service itself. Every droidmesh type stays resolvable by symbol, so a
/// client can still describe a message it meets in a served method.
fn reflection(
    services: &[String],
    reflection_service: &str,
) -> tonic_reflection::server::Builder<'static> {
    let mut builder = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(droidmesh_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .with_service_name(HEALTH)
        .with_service_name(droidmesh_proto::service_names::REPLICA)
        .with_service_name(reflection_service);
    for service in services {
        builder = builder.with_service_name(service.as_str());
    }
    builder
}

/// Binds a TCP listener, naming the address on failure.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| RuntimeError::Bind {
            addr: addr.to_string(),
            source: e,
        })
}

/// Serves `routes` plus health and reflection on `listener` until `shutdown` resolves, then
/// reports NOT_SERVING, stops accepting, and waits up to the drain timeout for in-flight RPCs.
pub async fn serve<F>(
    listener: TcpListener,
    routes: Routes,
    opts: ServeOptions,
    shutdown: F,
) -> Result<()>
where
    F: Future<Output = ()> + Send,
{
    let server_err = |message: String| RuntimeError::Server {
        name: opts.name.clone(),
        message,
    };
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    for service in &opts.services {
        reporter
            .set_service_status(service.as_str(), ServingStatus::Serving)
            .await;
    }
    let reflection_v1 = reflection(&opts.services, REFLECTION_V1)
        .build_v1()
        .map_err(|e| server_err(format!("reflection v1: {e}")))?;
    let reflection_v1alpha = reflection(&opts.services, REFLECTION_V1ALPHA)
        .build_v1alpha()
        .map_err(|e| server_err(format!("reflection v1alpha: {e}")))?;

    // Every service this port registers: the RPC metrics label their methods only.
    let mut served: Vec<&str> = opts.services.iter().map(String::as_str).collect();
    served.extend([
        HEALTH,
        droidmesh_proto::service_names::REPLICA,
        REFLECTION_V1,
        REFLECTION_V1ALPHA,
    ]);
    let local = listener.local_addr().ok();
    let span_name = opts.name.clone();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tonic::transport::Server::builder()
        .layer(crate::metrics::RpcMetricsLayer::with_end_grace(
            &served,
            opts.metrics_end_grace,
        ))
        .trace_fn(move |req| crate::trace_context::server_span(&span_name, req))
        .layer(InFlightLayer(Arc::clone(&opts.load)))
        .layer(calls::CallsLayer)
        .layer(calls::MessageLimitLayer)
        .layer(crate::metrics::StreamEndLayer);
    let routes = routes
        .add_service(health)
        .add_service(LoadReporter(Arc::clone(&opts.load)).server())
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .prepare();
    // Each connection is served by a server of its own (a clone: shared layers and routes),
    // so that one connection can be told to go away (GOAWAY) without the others.
    let serve_conn: accept::ServeConn = Arc::new(move |io, close| {
        let incoming = tokio_stream::StreamExt::chain(
            tokio_stream::once(Ok::<_, std::io::Error>(io)),
            tokio_stream::pending(),
        );
        Box::pin(
            server
                .clone()
                .serve_with_incoming_shutdown(routes.clone(), incoming, close),
        )
    });
    let port = port::Port::new(
        &opts.name,
        opts.connections.clone(),
        Arc::clone(&opts.connection_stats),
    );
    let stopped = async {
        let _ = stop_rx.await;
    };
    let scheme = if opts.tls.is_some() { "https" } else { "http" };
    let mut serving = Box::pin(accept::accept_loop(
        listener,
        Arc::clone(&port),
        opts.tls.clone(),
        serve_conn,
        stopped,
    ));
    tracing::info!(service = %opts.name, addr = ?local, scheme, "serving");

    tokio::select! {
        () = &mut serving => return Ok(()),
        () = shutdown => {}
    }
    opts.load.set_draining();
    reporter
        .set_service_status("", ServingStatus::NotServing)
        .await;
    for service in &opts.services {
        reporter
            .set_service_status(service.as_str(), ServingStatus::NotServing)
            .await;
    }
    if !opts.drain_notice.is_zero() {
        tracing::info!(
            service = %opts.name,
            notice = ?opts.drain_notice,
            "shutting down: reporting NOT_SERVING before refusing connections"
        );
        tokio::select! {
            () = &mut serving => return Ok(()),
            () = tokio::time::sleep(opts.drain_notice) => {}
        }
    }
    tracing::info!(
        service = %opts.name,
        in_flight = opts.load.in_flight(),
        "shutting down: draining in-flight calls"
    );
    let _ = stop_tx.send(());
    if tokio::time::timeout(opts.drain_timeout, serving)
        .await
        .is_err()
    {
        tracing::warn!(
            service = %opts.name,
            timeout = ?opts.drain_timeout,
            "drain deadline passed; closing remaining calls"
        );
        port.kill_all();
        // Each connection's task sees the cut at its next poll: moments.
        let _ = tokio::time::timeout(CUT_WAIT, port.all_closed()).await;
    }
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
