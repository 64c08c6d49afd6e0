//! The face at its connection cap, over real loopback connections: silent connections make
//! room for a real request long before the read deadline would free a slot, an idle
//! keep-alive connection makes room (closed between requests) while an event stream or a
//! request in progress never does, and a flood of refusals is one warning.
use std::sync::{Arc, Mutex};

use super::*;

const CAP: usize = 4;

fn capped(max_connections: usize) -> HttpConfig {
    HttpConfig {
        max_connections,
        keep_alive_ms: 100,
        ..HttpConfig::default()
    }
}

/// Whether the server still holds `conn` open: nothing to read and no end of stream.
fn still_open(conn: &TcpStream) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match conn.try_read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::WouldBlock,
        }
    }
}

/// Reads `conn` until the server closes it (at most 5 s); what it sent before.
async fn closed(conn: &mut TcpStream, what: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "{what}: still open after 5 s");
    out
}

/// Reads from `conn` until `buf` holds `end`, at most 5 s.
async fn read_until(conn: &mut TcpStream, buf: &mut Vec<u8>, end: &[u8], what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !buf.windows(end.len()).any(|w| w == end) {
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout_at(deadline, conn.read(&mut chunk))
            .await
            .unwrap_or_else(|_| panic!("{what}: nothing more within 5 s"))
            .unwrap_or(0);
        assert!(
            n > 0,
            "{what}: closed after {:?}",
            String::from_utf8_lossy(buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Sends `GET path` on `conn`, kept alive, and reads the whole answer; its status line.
async fn get_kept(conn: &mut TcpStream, path: &str) -> String {
    conn.write_all(format!("GET {path} HTTP/1.1\r\nhost: t\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    read_until(conn, &mut buf, b"\r\n\r\n", "a kept-alive request").await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let head_len = text.find("\r\n\r\n").unwrap() + 4;
    let len: usize = text[..head_len]
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(str::to_owned)
        })
        .expect("a content-length")
        .trim()
        .parse()
        .unwrap();
    let mut rest = vec![0u8; (head_len + len).saturating_sub(buf.len())];
    tokio::time::timeout(Duration::from_secs(5), conn.read_exact(&mut rest))
        .await
        .expect("the body within 5 s")
        .unwrap();
    text.lines().next().unwrap_or_default().to_owned()
}

/// A task that waits for a device (there is none to ask): its event stream stays open.
async fn pending_task(addr: SocketAddr) -> String {
    let body = r#"{"goal":"wait","waitForDevice":true}"#;
    let request = format!(
        "POST /v1/tasks HTTP/1.1\r\nhost: t\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (reply, _) = exchange(addr, request.as_bytes()).await;
    assert!(reply.starts_with("HTTP/1.1 201"), "{reply}");
    let json = &reply[reply.find("\r\n\r\n").unwrap() + 4..];
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["taskId"].as_str().unwrap().to_owned()
}

/// A connection following the task's events, its first event read.
async fn following(addr: SocketAddr, task: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET /v1/tasks/{task}/events HTTP/1.1\r\nhost: t\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, b"\r\n\r\n", "the event stream's head").await;
    assert!(
        buf.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf)
    );
    s
}

/// The event stream on `conn` still flows: a keep-alive comment or an event within 5 s.
async fn still_streaming(conn: &mut TcpStream, what: &str) {
    let mut buf = Vec::new();
    read_until(conn, &mut buf, b"\n\n", what).await;
}

const CLOSE: &[u8] = b"GET /openapi.json HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n";

#[tokio::test]
async fn silent_connections_at_the_cap_make_room_for_a_real_request() {
    // The read deadline is 30 s: a slot freed by it would come far too late.
    let (addr, _stop, _task) = face(capped(CAP)).await;
    let mut silent = Vec::new();
    for _ in 0..40 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    let (reply, took) = exchange(addr, CLOSE).await;
    assert!(
        reply.starts_with("HTTP/1.1 200"),
        "refused during the flood: {reply:?}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    // Each new connection took the place of the oldest silent one, or was closed at once
    // while an eighth of the cap were still closing: all but the newest are cut, long before
    // the read deadline.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let open = silent.iter().filter(|c| still_open(c)).count();
        if open < CAP {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{open} silent connections still held after 5 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_silent_connection_makes_room_before_an_idle_keep_alive_one() {
    let (addr, _stop, _task) = face(capped(2)).await;
    let mut kept = TcpStream::connect(addr).await.unwrap();
    assert_eq!(
        get_kept(&mut kept, "/openapi.json").await,
        "HTTP/1.1 200 OK"
    );
    // Newer than the idle keep-alive connection, but it has sent nothing.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let (reply, _) = exchange(addr, CLOSE).await;
    assert!(
        reply.starts_with("HTTP/1.1 200"),
        "refused at the cap: {reply:?}"
    );
    closed(&mut silent, "the silent connection").await;
    // The kept-alive connection was left alone and serves its next request.
    assert_eq!(
        get_kept(&mut kept, "/openapi.json").await,
        "HTTP/1.1 200 OK"
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_makes_room_and_busy_ones_never_do() {
    let (addr, _stop, _task) = face(capped(2)).await;
    let task = pending_task(addr).await;
    let mut events = following(addr, &task).await;
    let mut idle = TcpStream::connect(addr).await.unwrap();
    assert_eq!(
        get_kept(&mut idle, "/openapi.json").await,
        "HTTP/1.1 200 OK"
    );

    // At the cap: the idle keep-alive connection goes, closed between requests (nothing
    // written to it), the event stream stays.
    let (reply, _) = exchange(addr, CLOSE).await;
    assert!(
        reply.starts_with("HTTP/1.1 200"),
        "refused at the cap: {reply:?}"
    );
    let sent = closed(&mut idle, "the idle keep-alive connection").await;
    assert!(sent.is_empty(), "{}", String::from_utf8_lossy(&sent));
    still_streaming(&mut events, "the event stream after the idle one made room").await;

    // Every held connection busy (the event stream, a body still to come): a new one is
    // closed unanswered, and both go on.
    let mut body_due = busy(addr).await;
    for _ in 0..3 {
        let (reply, _) = exchange(addr, CLOSE).await;
        assert_eq!(reply, "", "a connection beyond busy ones got an answer");
    }
    still_streaming(&mut events, "the event stream at the cap").await;
    assert!(still_open(&body_due), "the request in progress was cut");
    body_due.write_all(b"{\"goal\":5}").await.unwrap();
    let mut answer = Vec::new();
    read_until(&mut body_due, &mut answer, b"\r\n\r\n", "the answer").await;
    assert!(
        answer.starts_with(b"HTTP/1.1 400"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

/// Every warning (and error) logged on this thread while the subscriber is set.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Line<'a>(&'a mut String);

impl tracing::field::Visit for Line<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl tracing::Subscriber for Warnings {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        *m.level() <= tracing::Level::WARN
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = event.metadata().target().to_owned();
        event.record(&mut Line(&mut line));
        self.0.lock().unwrap().push(line);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn a_flood_of_refusals_is_one_warning() {
    // This test's tasks all run on its thread, where the subscriber is. With one dispatcher
    // alive, a call site met first on another test's thread would be asked of that thread's
    // (none) only and marked as never logged; with two, every call site asks both.
    let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let warnings = Warnings::default();
    let _logging = tracing::subscriber::set_default(warnings.clone());
    let (addr, _stop, _task) = face(capped(1)).await;
    let _busy = busy(addr).await;
    for _ in 0..50 {
        let (reply, _) = exchange(addr, CLOSE).await;
        assert_eq!(reply, "", "a connection beyond a busy one got an answer");
    }
    let lines = warnings.0.lock().unwrap().clone();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains("gateway_http.max_connections") && lines[0].contains("refused=1"),
        "{lines:#?}"
    );
}
