//! One connection of the HTTP face, from its accept to its close, held at the face's cap the
//! way a gRPC port holds its own (the runtime's connection registry): nothing is built for it
//! until its client sends something; it is silent until a whole request head has come (then
//! the oldest silent one is what a new connection replaces, closed at once); a request is in
//! progress from its head until its response body ends, so an event stream keeps its
//! connection; between requests it is an idle keep-alive connection, which a new one may
//! replace (closed as a graceful shutdown closes it: at once while idle, after the response
//! when a request raced in).
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use droidmesh_runtime::server::port::{CallGuard, Conn, SERVED, STARTING, Slot};
use droidmesh_runtime::tls::ServerTls;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tower::ServiceExt as _;

use super::{Body, Face, body, io, stopped};

/// Serves one accepted connection until it closes, the face stops, or it is cut.
pub(super) async fn connection(
    face: Arc<Face>,
    router: axum::Router,
    conn: Arc<Conn>,
    slot: Slot,
    // Declared after `slot`, so dropped before it: the socket closes first.
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<ServerTls>,
) {
    // The first request head is due this long after the accept, the TLS handshake included.
    let head_by = conn.accepted + Duration::from_millis(face.cfg.read_timeout_ms);
    // Nothing is built for a connection (TLS state, HTTP buffers) until its client sends
    // something: a client that only connects costs a socket and this task.
    let mut first = [0u8; 1];
    tokio::select! {
        peeked = stream.peek(&mut first) => {
            // Closed before it said anything, or broken.
            if !matches!(peeked, Ok(n) if n > 0) {
                return;
            }
        }
        () = tokio::time::sleep_until(head_by) => {
            face.port.no_preface(peer);
            return;
        }
        // Made room for a newer connection, or the face stops.
        () = conn.killed() => return,
    }
    conn.set_phase(STARTING);
    let Some(tls) = tls else {
        return serve(face, router, conn, slot, stream, peer, head_by).await;
    };
    let accepted = tokio::select! {
        accepted = tls.accept(stream) => accepted,
        () = tokio::time::sleep_until(head_by) => {
            face.port.no_preface(peer);
            return;
        }
        () = conn.killed() => return,
    };
    match accepted {
        Ok(stream) => serve(face, router, conn, slot, stream, peer, head_by).await,
        Err(e) => {
            tracing::info!(%peer, error = %e, "gateway HTTP face: TLS handshake refused");
        }
    }
}

/// Serves HTTP/1.1 (keep-alive) on the connection until it closes, its first request head is
/// not in by `head_by`, the face stops (graceful: event streams end, calls in progress
/// finish) or it is told to make room. `router` answers each request.
async fn serve<S>(
    face: Arc<Face>,
    router: axum::Router,
    conn: Arc<Conn>,
    slot: Slot,
    stream: S,
    peer: SocketAddr,
    head_by: Instant,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut stop = face.stop.clone();
    let read_timeout = Duration::from_millis(face.cfg.read_timeout_ms);
    let stall = Duration::from_millis(face.cfg.write_stall_ms);
    let io = io::StallGuard::held(stream, stall, Arc::clone(&conn), slot);
    let on = Arc::clone(&conn);
    let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
        // Counted before the connection counts as served, so one seen served with no call
        // in progress is really between requests.
        let call = on.begin_call();
        on.set_phase(SERVED);
        // What a handler leaves of the body is drained, so the client reads the answer.
        let answer = router.clone().oneshot(body::lingering(req));
        async move {
            let resp = match answer.await {
                Ok(resp) => resp,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(resp.map(|inner| Counted { inner, _call: call }))
        }
    });
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout)
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(served);
    let result = tokio::select! {
        r = served.as_mut() => r,
        // Counted from the accept: hyper's own header deadline starts once it reads.
        () = first_head_overdue(&conn, head_by) => {
            face.port.no_preface(peer);
            return;
        }
        () = stopped(&mut stop) => {
            served.as_mut().graceful_shutdown();
            served.await
        }
        () = told_to_make_room(&conn) => {
            served.as_mut().graceful_shutdown();
            // Idle, it closes at once. One that does not close within the read deadline is
            // cut once no request is in progress (one that raced the choice finishes first).
            let grace = tokio::time::sleep(read_timeout);
            tokio::pin!(grace);
            tokio::select! {
                r = served.as_mut() => r,
                () = &mut grace => tokio::select! {
                    r = served.as_mut() => r,
                    () = no_call_then_cut(&conn) => served.await,
                },
            }
        }
    };
    match result {
        // The header deadline: before a first request, a client that never sent one.
        Err(e) if e.is_timeout() && conn.phase() != SERVED => face.port.no_preface(peer),
        Err(e) => tracing::debug!(%peer, error = %e, "gateway HTTP face: connection ended"),
        Ok(()) => {}
    }
}

/// Resolves at `by` if the connection has not sent a whole request head by then.
async fn first_head_overdue(conn: &Conn, by: Instant) {
    tokio::time::sleep_until(by).await;
    if conn.phase() == SERVED {
        std::future::pending::<()>().await;
    }
}

/// Resolves once the face has told the connection to make room for a new one.
async fn told_to_make_room(conn: &Conn) {
    loop {
        let changed = conn.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if conn.making_room() {
            return;
        }
        changed.await;
    }
}

/// Waits until no request is in progress on the connection, then cuts it.
async fn no_call_then_cut(conn: &Conn) {
    loop {
        let changed = conn.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if conn.calls() == 0 {
            conn.kill();
            return;
        }
        changed.await;
    }
}

/// A response body that keeps its request counted as in progress until it ends or is
/// dropped: an event stream counts for as long as it streams.
struct Counted {
    inner: Body,
    _call: CallGuard,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
