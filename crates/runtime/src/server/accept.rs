//! The accept loop of a gRPC port, plain or TLS, and each connection's life: held to the
//! port's cap, nothing built for it until its client sends something, closed when it sends no
//! preface in time, told to go away (GOAWAY) when idle or when a new connection needs its
//! place, and cut if it then does not close.
use super::io::{ServedIo, Stream};
use super::port::{Conn, Port, STARTING, Slot, WARN_EVERY};
use crate::tls::ServerTls;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Serves one connection's I/O with tonic until the given future resolves (then gracefully:
/// GOAWAY, calls in progress finish).
pub(crate) type ServeConn = Arc<
    dyn Fn(ServedIo, BoxFuture<()>) -> BoxFuture<Result<(), tonic::transport::Error>> + Send + Sync,
>;

/// A failed accept (out of file descriptors and the like) waits this long rather than spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Accepts connections on `listener` until `stop` resolves; then stops accepting, tells every
/// connection to go away and resolves once all are closed.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    port: Arc<Port>,
    tls: Option<ServerTls>,
    serve_conn: ServeConn,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut warn_tick = tokio::time::interval(WARN_EVERY);
    warn_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let accepted = tokio::select! {
            () = &mut stop => break,
            _ = warn_tick.tick() => {
                port.warn_unreported();
                continue;
            }
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                port.accept_failed(&e);
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        // Over the cap with nothing to make room: closed at once (dropped).
        let Some((slot, conn)) = port.admit() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(
            Arc::clone(&port),
            conn,
            slot,
            stream,
            peer,
            tls.clone(),
            Arc::clone(&serve_conn),
        ));
    }
    drop(listener);
    port.stop();
    port.all_closed().await;
}

/// One connection, from its accept to its close.
async fn connection(
    port: Arc<Port>,
    conn: Arc<Conn>,
    slot: Slot,
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<ServerTls>,
    serve_conn: ServeConn,
) {
    let preface_by = conn.accepted + port.cfg.preface_timeout();
    // A TLS port's handshake deadline counts from the accept too.
    let first_by = tls.as_ref().map_or(preface_by, |tls| {
        preface_by.min(conn.accepted + tls.handshake_timeout())
    });
    // Nothing is built for a connection (TLS state, HTTP/2 buffers) until its client sends
    // something: a client that only connects costs a socket and this task.
    let mut first = [0u8; 1];
    tokio::select! {
        peeked = stream.peek(&mut first) => {
            // Closed before it said anything, or broken.
            if !matches!(peeked, Ok(n) if n > 0) {
                return;
            }
        }
        () = tokio::time::sleep_until(first_by) => {
            port.no_preface(peer);
            return;
        }
        () = conn.killed() => return,
    }
    conn.set_phase(STARTING);
    let stream = match tls {
        None => Stream::Plain(stream),
        Some(tls) => tokio::select! {
            accepted = tls.accept(stream) => match accepted {
                Ok(s) => Stream::Tls(Box::new(s)),
                Err(e) => {
                    tracing::info!(service = %port.name, %peer, error = %e, "tls: handshake refused");
                    return;
                }
            },
            () = tokio::time::sleep_until(preface_by) => {
                port.no_preface(peer);
                return;
            }
            () = conn.killed() => return,
        },
    };
    let io = ServedIo::new(stream, Arc::clone(&port), Arc::clone(&conn), slot, peer);
    let close = Box::pin(until_close(Arc::clone(&port), Arc::clone(&conn)));
    let mut serving = serve_conn(io, close);
    tokio::select! {
        served = &mut serving => return ended(&port, peer, served),
        () = conn.going.notified() => {}
    }
    // Told to go away for idleness or room: a live client answers the GOAWAY's ping and the
    // connection closes; one that does not is cut after the preface timeout, unless a call
    // started meanwhile (it raced the GOAWAY), which is left to finish first.
    let grace = tokio::time::sleep(port.cfg.preface_timeout());
    tokio::pin!(grace);
    tokio::select! {
        served = &mut serving => return ended(&port, peer, served),
        () = &mut grace => {}
    }
    loop {
        let changed = conn.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if conn.calls() == 0 {
            conn.kill();
            break;
        }
        tokio::select! {
            served = &mut serving => return ended(&port, peer, served),
            () = changed => {}
        }
    }
    ended(&port, peer, serving.await);
}

fn ended(port: &Port, peer: SocketAddr, served: Result<(), tonic::transport::Error>) {
    if let Err(e) = served {
        tracing::debug!(service = %port.name, %peer, error = %e, "connection ended");
    }
}

/// Resolves when the connection is to close: gone already, the port stops, it must make room,
/// or it had no call in progress for the idle timeout. Tells `conn.going` for the last two.
async fn until_close(port: Arc<Port>, conn: Arc<Conn>) {
    let idle = port.cfg.idle_timeout();
    let mut stopping = port.stopping();
    loop {
        let changed = conn.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if conn.is_gone() {
            return;
        }
        if *stopping.borrow_and_update() {
            conn.ask_stop();
            return;
        }
        if conn.making_room() {
            conn.going.notify_one();
            return;
        }
        let deadline = conn.idle_deadline(idle);
        let idle_for = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = changed => {}
            stopped = stopping.changed() => {
                if stopped.is_err() {
                    return;
                }
            }
            () = idle_for => {
                if conn
                    .idle_deadline(idle)
                    .is_some_and(|d| d <= tokio::time::Instant::now())
                {
                    conn.ask_idle();
                    super::stats::ConnectionStats::add(&port.stats.idle_closed);
                    tracing::debug!(service = %port.name, ?idle, "telling an idle connection to go away");
                    conn.going.notify_one();
                    return;
                }
            }
        }
    }
}
