//! The face's own deadlines and limits over a real loopback connection, on a gateway whose
//! peers are not running (nothing here reaches them): a body that stops arriving, headers that
//! never end, connections beyond the cap (which of them makes room for a new one, in
//! `cap_tests`), and a shutdown that ends the server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;
use crate::{GatewayConfig, Peers};

async fn face(
    cfg: HttpConfig,
) -> (
    SocketAddr,
    watch::Sender<bool>,
    tokio::task::JoinHandle<Result<(), String>>,
) {
    let nowhere = "http://127.0.0.1:9".to_owned();
    let peers = Peers {
        device: nowhere.clone(),
        executor: nowhere.clone(),
        manager: nowhere.clone(),
        scripter: nowhere.clone(),
        text_manipulator: nowhere,
    };
    let memory = GatewayConfig {
        store: "memory".into(),
        ..GatewayConfig::default()
    };
    let gateway = crate::gateway(memory, &peers, None).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, mut rx) = watch::channel(false);
    let task = tokio::spawn(serve(
        listener,
        None,
        gateway,
        cfg,
        Duration::from_secs(1),
        async move {
            let _ = rx.wait_for(|s| *s).await;
        },
    ));
    (addr, stop, task)
}

/// Writes `bytes`, then reads what comes back until the server closes (at most 5 s).
async fn exchange(addr: SocketAddr, bytes: &[u8]) -> (String, Duration) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let started = std::time::Instant::now();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .expect("the server neither answered nor closed within 5 s")
        .unwrap_or_default();
    (
        String::from_utf8_lossy(&out).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn slow_bodies_and_headers_run_into_the_read_deadline() {
    let cfg = HttpConfig {
        read_timeout_ms: 300,
        ..HttpConfig::default()
    };
    let (addr, _stop, _task) = face(cfg).await;
    // Ten bytes announced, two sent: 408 once the deadline passes.
    let (reply, took) = exchange(
        addr,
        b"POST /v1/tasks HTTP/1.1\r\nhost: t\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n{\"",
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("\"code\":\"DEADLINE_EXCEEDED\""), "{reply}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    // Headers that never end: the connection is closed.
    let (reply, took) = exchange(addr, b"GET /v1/devices HTTP/1.1\r\nhost: t\r\n").await;
    assert!(!reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(took < Duration::from_secs(5));
    // The face still answers.
    let (reply, _) = exchange(
        addr,
        b"GET /openapi.json HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

#[tokio::test]
async fn connections_beyond_the_cap_are_closed_and_shutdown_ends_the_server() {
    let cfg = HttpConfig {
        max_connections: 1,
        ..HttpConfig::default()
    };
    let (addr, stop, task) = face(cfg).await;
    // The first connection holds the only slot with a request in progress (its body is still
    // to come); the second is closed unread.
    let _first = busy(addr).await;
    let (reply, _) = exchange(addr, b"GET /openapi.json HTTP/1.1\r\nhost: t\r\n\r\n").await;
    assert_eq!(reply, "", "a second connection got an answer");
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the face did not stop within 5 s")
        .unwrap()
        .unwrap();
    assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
}

#[tokio::test]
async fn a_client_that_sends_a_refused_body_whole_still_reads_the_answer() {
    let (addr, _stop, _task) = face(HttpConfig::default()).await;
    for (path, status) in [
        // Over the cap by its Content-Length: refused before a byte of it is read.
        ("/v1/tasks", "413"),
        // No such route: nothing reads the body.
        ("/v1/nowhere", "404"),
    ] {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: 8388608\r\n\r\n"
        );
        s.write_all(request.as_bytes()).await.unwrap();
        // The whole body, as a client that does not wait for an early answer sends it.
        let body = vec![b' '; 8 * 1024 * 1024];
        tokio::time::timeout(Duration::from_secs(10), s.write_all(&body))
            .await
            .expect("the body was not taken within 10 s")
            .expect("the server reset the connection instead of draining the body");
        let mut reply = vec![0u8; 12];
        s.read_exact(&mut reply).await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&reply),
            format!("HTTP/1.1 {status}")
        );
    }
}

#[tokio::test]
async fn a_body_too_slow_to_arrive_is_not_drained_after_its_408() {
    let cfg = HttpConfig {
        read_timeout_ms: 300,
        ..HttpConfig::default()
    };
    let (addr, _stop, _task) = face(cfg).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST /v1/tasks HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{")
        .await
        .unwrap();
    let mut head = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut head))
        .await
        .expect("no answer within 5 s")
        .unwrap();
    assert_eq!(&head, b"HTTP/1.1 408");
    // The body keeps trickling in: a face that drained it would hold the connection for as
    // long as it comes (5 s at most); this one closes it after the answer.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
    let mut rest = [0u8; 1024];
    loop {
        let drip = tokio::time::sleep(Duration::from_millis(50));
        tokio::select! {
            read = s.read(&mut rest) => if !matches!(read, Ok(n) if n > 0) { break },
            () = drip => if s.write_all(b" ").await.is_err() { break },
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still open 4 s after the 408 while the body kept coming"
        );
    }
}

/// A connection with a request in progress that the client can see: its body is announced
/// with `expect: 100-continue`, and the face says go on once the handler reads it.
async fn busy(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST /v1/tasks HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\nexpect: 100-continue\r\ncontent-length: 10\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 25];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut head))
        .await
        .expect("no 100 Continue within 5 s")
        .unwrap();
    assert_eq!(&head, b"HTTP/1.1 100 Continue\r\n\r\n");
    s
}

#[path = "cap_tests.rs"]
mod cap;

#[path = "route_tests.rs"]
mod route;
