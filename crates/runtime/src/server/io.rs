//! A served connection's I/O: plain TCP or TLS, with the deadline for the HTTP/2 client
//! preface, a write the client never takes failing after the stall limit (as on the gateway's
//! HTTP face), a switch that cuts it, and the connection's state for the calls on it.
use super::port::{Conn, Port, SERVED, Slot};
use super::stats::ConnectionStats;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;
use tokio_rustls::server::TlsStream;

/// Bytes of the HTTP/2 client preface (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`).
const PREFACE_LEN: usize = 24;

/// A connection's byte stream, with or without TLS.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Plain($s) => {
                let $s = Pin::new($s);
                $e
            }
            Stream::Tls($s) => {
                let $s = Pin::new($s.as_mut());
                $e
            }
        }
    };
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        each!(self, s => s.poll_write(cx, b))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => s.poll_write_vectored(cx, bufs))
    }

    /// True for TCP: HTTP/2 then writes a response's frames with one call (`writev`).
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => s.poll_shutdown(cx))
    }
}

/// What the calls on a connection find in their request extensions.
#[derive(Clone)]
pub(crate) struct ConnInfo {
    pub(crate) conn: Arc<Conn>,
}

/// The I/O tonic serves a connection over.
pub(crate) struct ServedIo<S = Stream> {
    inner: S,
    conn: Arc<Conn>,
    port: Arc<Port>,
    peer: SocketAddr,
    preface_left: usize,
    preface_deadline: Option<Pin<Box<Sleep>>>,
    preface_timeout: Duration,
    stall: Duration,
    stall_timer: Option<Pin<Box<Sleep>>>,
    /// Given back when the connection closes, which is when this is dropped.
    _slot: Slot,
}

impl<S> ServedIo<S> {
    /// Serves `inner` for the connection `conn` holding `slot` at `port`; the preface is due
    /// by the connection's deadline (from its accept).
    pub(crate) fn new(
        inner: S,
        port: Arc<Port>,
        conn: Arc<Conn>,
        slot: Slot,
        peer: SocketAddr,
    ) -> Self {
        let preface_timeout = port.cfg.preface_timeout();
        let preface_by = conn.accepted + preface_timeout;
        Self {
            inner,
            stall: port.cfg.write_stall(),
            conn,
            port,
            peer,
            preface_left: PREFACE_LEN,
            preface_deadline: Some(Box::pin(tokio::time::sleep_until(preface_by))),
            preface_timeout,
            stall_timer: None,
            _slot: slot,
        }
    }
}

fn cut() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "the server closed the connection",
    )
}

impl<S: AsyncRead + Unpin> AsyncRead for ServedIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.conn.poll_killed(cx, true).is_ready() {
            return Poll::Ready(Err(cut()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if this.preface_left > 0 {
                    let n = buf.filled().len() - before;
                    this.preface_left -= n.min(this.preface_left);
                    if this.preface_left == 0 {
                        this.preface_deadline = None;
                        this.conn.set_phase(SERVED);
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                if let Some(deadline) = this.preface_deadline.as_mut()
                    && deadline.as_mut().poll(cx).is_ready()
                {
                    this.preface_deadline = None;
                    this.port.no_preface(this.peer);
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no HTTP/2 preface within {:?}", this.preface_timeout),
                    )));
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> ServedIo<S> {
    /// Runs one write-side poll: fails once the connection is cut, and once a write has
    /// waited for the client longer than the stall limit (any progress starts the wait anew).
    fn guarded<R>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut S>, &mut Context<'_>) -> Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if self.conn.poll_killed(cx, false).is_ready() {
            return Poll::Ready(Err(cut()));
        }
        match poll(Pin::new(&mut self.inner), cx) {
            Poll::Ready(r) => {
                self.stall_timer = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let limit = self.stall;
                let timer = self
                    .stall_timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                if timer.as_mut().poll(cx).is_ready() {
                    ConnectionStats::add(&self.port.stats.stalled);
                    tracing::debug!(peer = %self.peer, "closing a connection whose client took nothing for {limit:?}");
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the client took nothing for {limit:?}"),
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ServedIo<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().guarded(cx, |s, cx| s.poll_write(cx, b))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .guarded(cx, |s, cx| s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().guarded(cx, |s, cx| s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().guarded(cx, |s, cx| s.poll_shutdown(cx))
    }
}

impl<S> Drop for ServedIo<S> {
    fn drop(&mut self) {
        self.conn.set_gone();
    }
}

impl<S> tonic::transport::server::Connected for ServedIo<S> {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        ConnInfo {
            conn: Arc::clone(&self.conn),
        }
    }
}

#[cfg(test)]
#[path = "io_tests.rs"]
mod tests;
