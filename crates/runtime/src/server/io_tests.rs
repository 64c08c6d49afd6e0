//! The served connection's I/O alone, over in-memory pipes.
use super::*;
use crate::server::limits::ConnectionConfig;
use crate::server::stats::ConnectionStats;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn port(preface_ms: u64, stall_ms: u64) -> Arc<Port> {
    Port::new(
        "io-test",
        ConnectionConfig {
            preface_timeout_ms: preface_ms,
            write_stall_ms: stall_ms,
            ..ConnectionConfig::default()
        },
        Arc::new(ConnectionStats::default()),
    )
}

fn served(port: &Arc<Port>, pipe: tokio::io::DuplexStream) -> ServedIo<tokio::io::DuplexStream> {
    let (slot, conn) = port.admit().unwrap();
    ServedIo::new(
        pipe,
        Arc::clone(port),
        conn,
        slot,
        "127.0.0.1:9".parse().unwrap(),
    )
}

#[tokio::test]
async fn a_write_the_client_never_takes_fails_after_the_stall_limit() {
    let port = port(10_000, 50);
    // A pipe of 64 bytes that nobody reads.
    let (a, _b) = tokio::io::duplex(64);
    let mut io = served(&port, a);
    let started = std::time::Instant::now();
    let e = io.write_all(&[0u8; 1024]).await.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(port.stats.stalled(), 1);
}

#[tokio::test]
async fn reads_fail_once_the_preface_is_late_and_not_after_it_came() {
    let port = port(100, 10_000);
    let (a, mut b) = tokio::io::duplex(1024);
    let mut io = served(&port, a);
    b.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(io.read(&mut buf).await.unwrap(), 16);
    let e = io.read(&mut buf).await.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    assert_eq!(port.stats.no_preface(), 1);

    // A whole preface in time: later reads wait as long as they like.
    let (a, mut b) = tokio::io::duplex(1024);
    let mut io = served(&port, a);
    b.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(io.read(&mut buf).await.unwrap(), 24);
    let later = tokio::time::timeout(Duration::from_millis(300), io.read(&mut buf)).await;
    assert!(later.is_err(), "the read should still wait: {later:?}");
    assert_eq!(port.stats.no_preface(), 1);
}

#[tokio::test]
async fn a_cut_connection_fails_its_pending_read() {
    let port = port(10_000, 10_000);
    let (a, _b) = tokio::io::duplex(64);
    let mut io = served(&port, a);
    let conn = Arc::clone(&io.conn);
    let reader = tokio::spawn(async move {
        let mut buf = [0u8; 8];
        io.read(&mut buf).await
    });
    conn.kill();
    let read = tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.unwrap_err().kind(), io::ErrorKind::ConnectionAborted);
}

#[tokio::test]
async fn a_tcp_connection_keeps_its_vectored_writes() {
    // Without them HTTP/2 writes a response's frames one call each (a unary call measured
    // about 20 µs slower on loopback).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let _client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (accepted, _) = listener.accept().await.unwrap();
    let port = port(10_000, 10_000);
    let (slot, conn) = port.admit().unwrap();
    let io = ServedIo::new(
        Stream::Plain(accepted),
        Arc::clone(&port),
        conn,
        slot,
        "127.0.0.1:9".parse().unwrap(),
    );
    assert!(io.is_write_vectored());
}
