//! The bounds on what an MCP server's process writes: its stdout read through [`LineCap`]
//! (a message longer than `max_response_bytes` ends the connection, and says so), its stderr
//! logged line by line through [`log_stderr`] (each line cut to [`LINE_SHOWN`] bytes, at most
//! [`LINES_PER_WINDOW`] lines logged every [`WINDOW`], the rest counted; the last
//! [`TAIL_LINES`] kept for the error when the server fails to start).
use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, ReadBuf};
use tokio::time::Instant;

use crate::custom_tools::secret_text::redact;

/// Longest stderr line logged, in bytes (the rest is counted).
pub const LINE_SHOWN: usize = 1_000;
/// Stderr lines logged per [`WINDOW`]; later ones in the window are counted, not logged.
pub const LINES_PER_WINDOW: u32 = 100;
/// The window of [`LINES_PER_WINDOW`].
pub const WINDOW: Duration = Duration::from_secs(10);
/// Stderr lines kept for error messages.
pub const TAIL_LINES: usize = 5;

/// A reader that fails once a line (bytes between newlines) grows past `limit`, setting
/// `overflowed`. The bytes read with the overlong part are handed on first, so a whole
/// message before it is still read; the next read fails.
pub struct LineCap<R> {
    inner: R,
    limit: usize,
    line: usize,
    overflowed: Arc<AtomicBool>,
}

impl<R> LineCap<R> {
    pub fn new(inner: R, limit: usize, overflowed: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            limit,
            line: 0,
            overflowed,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCap<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.overflowed.load(Ordering::Relaxed) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a message longer than {} bytes", self.limit),
            )));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let mut line = self.line;
        for &byte in &buf.filled()[before..] {
            if byte == b'\n' {
                line = 0;
            } else {
                line += 1;
            }
            if line > self.limit {
                self.overflowed.store(true, Ordering::Relaxed);
                break;
            }
        }
        self.line = line;
        Poll::Ready(Ok(()))
    }
}

/// The last stderr lines of one server process.
#[derive(Debug, Default)]
pub struct Tail(Mutex<VecDeque<String>>);

impl Tail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// `its last stderr lines: a | b`, or that it wrote none.
    pub fn describe(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if lines.is_empty() {
            "it wrote nothing to stderr".into()
        } else {
            let shown: Vec<&str> = lines.iter().map(String::as_str).collect();
            format!("its last stderr lines: {}", shown.join(" | "))
        }
    }
}

/// What of a line is logged: its first [`LINE_SHOWN`] bytes, with the count of the rest.
fn shown(line: &[u8], cut: usize, secrets: &[String]) -> String {
    let text = String::from_utf8_lossy(line);
    let text = redact(text.trim_end_matches('\r'), secrets);
    if cut > 0 {
        format!("{text}…[{cut} more bytes]")
    } else {
        text
    }
}

/// Logs `stderr` of the server `server` line by line until it ends, within the bounds above;
/// every secret in `secrets` is cut out first. Keeps the last lines in `tail`.
pub async fn log_stderr<R: AsyncRead + Unpin>(
    server: String,
    mut stderr: R,
    tail: Arc<Tail>,
    secrets: Vec<String>,
) {
    let mut chunk = vec![0u8; 4096];
    let mut line: Vec<u8> = Vec::with_capacity(256);
    let mut cut = 0usize;
    let mut window = Instant::now();
    let (mut logged, mut skipped) = (0u32, 0u64);
    let mut emit = |line: &[u8], cut: usize| {
        let text = shown(line, cut, &secrets);
        if window.elapsed() >= WINDOW {
            if skipped > 0 {
                tracing::info!(
                    mcp.server = %server,
                    "{skipped} more stderr lines were not logged (at most {LINES_PER_WINDOW} every {} s)",
                    WINDOW.as_secs()
                );
            }
            window = Instant::now();
            (logged, skipped) = (0, 0);
        }
        if logged < LINES_PER_WINDOW {
            logged += 1;
            tracing::info!(mcp.server = %server, "stderr: {text}");
        } else {
            skipped += 1;
        }
        tail.push(text);
    };
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &chunk[..n] {
            if byte == b'\n' {
                emit(&line, cut);
                line.clear();
                cut = 0;
            } else if line.len() < LINE_SHOWN {
                line.push(byte);
            } else {
                cut += 1;
            }
        }
    }
    if !line.is_empty() || cut > 0 {
        emit(&line, cut);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use tokio::io::AsyncReadExt as _;

    use super::*;

    #[tokio::test]
    async fn a_line_past_the_limit_fails_the_read_after_what_came_before() {
        let flag = Arc::new(AtomicBool::new(false));
        let data = b"{\"ok\":1}\n0123456789abcdef\n".to_vec();
        let mut cap = LineCap::new(&data[..], 10, flag.clone());
        let mut got = Vec::new();
        let e = cap.read_to_end(&mut got).await.unwrap_err();
        assert!(got.starts_with(b"{\"ok\":1}\n"), "{got:?}");
        assert_eq!(e.to_string(), "a message longer than 10 bytes");
        assert!(flag.load(Ordering::Relaxed));
        let flag = Arc::new(AtomicBool::new(false));
        let mut fits = LineCap::new(&b"0123456789\n0123456789\n"[..], 10, flag.clone());
        let mut got = Vec::new();
        fits.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), 22);
        assert!(!flag.load(Ordering::Relaxed));
    }

    #[tokio::test(start_paused = true)]
    async fn stderr_lines_are_cut_counted_and_kept_without_secrets() {
        let mut text = String::new();
        text.push_str(&"y".repeat(LINE_SHOWN + 7));
        text.push('\n');
        text.push_str("token s3cr3t here\n");
        for i in 0..150 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str("no newline at the end");
        let tail = Arc::new(Tail::default());
        log_stderr(
            "echo".into(),
            text.as_bytes(),
            tail.clone(),
            vec!["s3cr3t".into()],
        )
        .await;
        assert_eq!(
            tail.describe(),
            "its last stderr lines: line 146 | line 147 | line 148 | line 149 | no newline at the end"
        );
        let first = shown("y".repeat(LINE_SHOWN).as_bytes(), 7, &[]);
        assert!(first.ends_with("y…[7 more bytes]"), "{first}");
        assert_eq!(
            shown(b"token s3cr3t here\r", 0, &["s3cr3t".into()]),
            "token [REDACTED] here"
        );
        assert_eq!(Tail::default().describe(), "it wrote nothing to stderr");
    }
}
