//! A connection that fails a write the client has not taken within a deadline: a client that
//! stops reading (an SSE follower that froze, a slow-loris reader) is cut off instead of
//! holding its connection, its watcher and its buffers for ever. A held connection is also cut
//! when the face closes it (to make room, or when a drain runs out), and gives its place at
//! the face back when it is dropped, socket first.
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use droidmesh_runtime::server::port::{Conn, Slot};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

pin_project_lite::pin_project! {
    pub struct StallGuard<T> {
        #[pin]
        inner: T,
        limit: Duration,
        // Armed while a write waits for the client; reset by any progress.
        timer: Option<Pin<Box<Sleep>>>,
        // Reads and writes fail once the face cuts this connection.
        conn: Option<Arc<Conn>>,
        // Dropped after `inner` (fields drop in order): the socket is closed before its place
        // is given back.
        slot: Option<Slot>,
    }
}

impl<T> StallGuard<T> {
    pub fn new(inner: T, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            timer: None,
            conn: None,
            slot: None,
        }
    }

    /// `inner`, the connection `conn` holding `slot` at the face.
    pub fn held(inner: T, limit: Duration, conn: Arc<Conn>, slot: Slot) -> Self {
        Self {
            conn: Some(conn),
            slot: Some(slot),
            ..Self::new(inner, limit)
        }
    }
}

/// Ready once the face has cut the connection; `read` picks which side's waker to keep.
fn cut(conn: &Option<Arc<Conn>>, cx: &mut Context<'_>, read: bool) -> bool {
    conn.as_ref()
        .is_some_and(|c| c.poll_killed(cx, read).is_ready())
}

fn cut_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "the server closed the connection",
    )
}

/// Applies the deadline to one poll of a write: `Pending` arms the timer, progress disarms it,
/// an expired timer fails the write.
fn guard<R>(
    timer: &mut Option<Pin<Box<Sleep>>>,
    limit: Duration,
    cx: &mut Context<'_>,
    poll: Poll<io::Result<R>>,
) -> Poll<io::Result<R>> {
    match poll {
        Poll::Ready(r) => {
            *timer = None;
            Poll::Ready(r)
        }
        Poll::Pending => {
            let t = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
            match t.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the client took nothing for {limit:?}"),
                ))),
                Poll::Pending => Poll::Pending,
            }
        }
    }
}

impl<T: AsyncRead> AsyncRead for StallGuard<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        if cut(this.conn, cx, true) {
            return Poll::Ready(Err(cut_error()));
        }
        this.inner.poll_read(cx, buf)
    }
}

impl<T: AsyncWrite> AsyncWrite for StallGuard<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        if cut(this.conn, cx, false) {
            return Poll::Ready(Err(cut_error()));
        }
        let poll = this.inner.poll_write(cx, buf);
        guard(this.timer, *this.limit, cx, poll)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        if cut(this.conn, cx, false) {
            return Poll::Ready(Err(cut_error()));
        }
        let poll = this.inner.poll_flush(cx);
        guard(this.timer, *this.limit, cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        if cut(this.conn, cx, false) {
            return Poll::Ready(Err(cut_error()));
        }
        let poll = this.inner.poll_shutdown(cx);
        guard(this.timer, *this.limit, cx, poll)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        if cut(this.conn, cx, false) {
            return Poll::Ready(Err(cut_error()));
        }
        let poll = this.inner.poll_write_vectored(cx, bufs);
        guard(this.timer, *this.limit, cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::AsyncWriteExt as _;

    #[tokio::test]
    async fn a_write_the_peer_never_takes_fails_after_the_limit() {
        // A pipe of 64 bytes that nobody reads.
        let (a, _b) = tokio::io::duplex(64);
        let mut g = StallGuard::new(a, Duration::from_millis(50));
        let started = std::time::Instant::now();
        let e = g.write_all(&[0u8; 1024]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test]
    async fn writes_the_peer_takes_go_through() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut g = StallGuard::new(a, Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut b, &mut got)
                .await
                .unwrap();
            got.len()
        });
        g.write_all(&[7u8; 4096]).await.unwrap();
        g.shutdown().await.unwrap();
        drop(g);
        assert_eq!(reader.await.unwrap(), 4096);
    }
}
