//! A gRPC port's connections under clients that send nothing, hold connections idle, flood the
//! port or send messages over the limit: raw TCP sockets and real gRPC clients on loopback.
use droidmesh_runtime::server::{ConnectionConfig, ConnectionStats};
use droidmesh_runtime::{ClientOptions, ServeOptions, connect, serve};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tonic::service::Routes;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// The HTTP/2 client preface and an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
const GOAWAY: u8 = 0x7;

struct Port {
    addr: String,
    stats: Arc<ConnectionStats>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(cfg: ConnectionConfig) -> Port {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut opts = ServeOptions::new("conn-test", &[droidmesh_proto::service_names::DEVICE]);
    opts.drain_timeout = Duration::from_secs(1);
    opts.connections = cfg;
    let stats = Arc::clone(&opts.connection_stats);
    tokio::spawn(serve(listener, Routes::default(), opts, async {
        let _ = rx.await;
    }));
    Port {
        addr,
        stats,
        _stop: tx,
    }
}

fn cfg(max_connections: usize, preface_ms: u64, idle_ms: u64) -> ConnectionConfig {
    ConnectionConfig {
        max_connections,
        preface_timeout_ms: preface_ms,
        idle_timeout_ms: idle_ms,
        ..ConnectionConfig::default()
    }
}

fn health(addr: &str) -> HealthClient<droidmesh_runtime::TracedChannel> {
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Some(Duration::from_secs(5)),
        ..ClientOptions::default()
    };
    HealthClient::new(connect(&format!("http://{addr}"), &opts).unwrap())
}

async fn check(
    client: &mut HealthClient<droidmesh_runtime::TracedChannel>,
) -> Result<(), tonic::Status> {
    client.check(HealthCheckRequest::default()).await.map(drop)
}

/// Reads `conn` until the server closes it, within `limit`: the bytes it sent, and when.
async fn until_closed(conn: &mut TcpStream, limit: Duration) -> (Vec<u8>, Instant) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Err(_) => panic!("the server did not close the connection within {limit:?}"),
            Ok(Ok(0) | Err(_)) => return (got, Instant::now()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Whether the server still holds `conn` open (nothing to read, no end of stream).
fn still_open(conn: &TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match conn.try_read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}

/// The frame types in `bytes` as the server wrote them (HTTP/2 frames, 9-byte headers).
fn frame_types(mut bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while bytes.len() >= 9 {
        let len = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        types.push(bytes[3]);
        bytes = &bytes[(9 + len).min(bytes.len())..];
    }
    types
}

/// Waits until `cond` holds, checking every 10 ms, for at most `limit`.
async fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_connection_that_sends_no_preface_is_closed_at_the_deadline() {
    let port = start(cfg(64, 300, 60_000)).await;
    let opened = Instant::now();
    let mut silent = TcpStream::connect(&port.addr).await.unwrap();
    // A slow client: half the preface, then nothing.
    let mut slow = TcpStream::connect(&port.addr).await.unwrap();
    slow.write_all(&PREFACE[..12]).await.unwrap();
    // A client meanwhile is served.
    check(&mut health(&port.addr)).await.unwrap();

    for conn in [&mut silent, &mut slow] {
        let (_, closed) = until_closed(conn, Duration::from_secs(5)).await;
        let after = closed - opened;
        assert!(
            after >= Duration::from_millis(290),
            "closed after {after:?}"
        );
    }
    assert_eq!(port.stats.no_preface(), 2);
}

#[tokio::test]
async fn at_the_cap_the_oldest_silent_connection_makes_room_and_health_answers() {
    let port = start(cfg(4, 30_000, 60_000)).await;
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(TcpStream::connect(&port.addr).await.unwrap());
        // In order: the first one is the oldest.
        let n = silent.len() as u64;
        wait_for("accepted", Duration::from_secs(5), || {
            port.stats.accepted() == n
        })
        .await;
    }
    // A fifth caller, a health check, gets in: the oldest silent connection makes room.
    let mut client = health(&port.addr);
    check(&mut client).await.unwrap();
    let (_, _) = until_closed(&mut silent[0], Duration::from_secs(5)).await;
    assert!(silent[1..].iter().all(still_open));
    assert!(port.stats.open() <= 4, "{} open", port.stats.open());
    assert_eq!(port.stats.made_room(), 1);
    drop(client);

    // Every slot doing work (a health watch in progress on each): a new connection is
    // closed at once, and counted.
    let mut watches = Vec::new();
    for _ in 0..4 {
        let mut c = health(&port.addr);
        let stream = c
            .watch(HealthCheckRequest::default())
            .await
            .unwrap()
            .into_inner();
        watches.push((c, stream));
    }
    wait_for("watches alone", Duration::from_secs(5), || {
        port.stats.open() == 4
    })
    .await;
    let mut extra = TcpStream::connect(&port.addr).await.unwrap();
    let started = Instant::now();
    until_closed(&mut extra, Duration::from_secs(5)).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(port.stats.refused(), 1);
    // A client sees its connection closed before any answer.
    let refused = check(&mut health(&port.addr)).await.unwrap_err();
    assert!(
        matches!(
            refused.code(),
            tonic::Code::Unavailable | tonic::Code::Cancelled
        ),
        "{refused:?}"
    );
}

#[tokio::test]
async fn at_the_cap_the_longest_idle_connection_is_told_to_go_away_to_make_room() {
    // The raw clients answer no ping: the one told to go away is cut 2 s (the preface
    // timeout) after its GOAWAY.
    let port = start(cfg(3, 2_000, 60_000)).await;
    // Three clients that said hello (the preface) and then nothing, oldest first.
    let mut idle = Vec::new();
    for n in 1..=3u64 {
        let mut c = TcpStream::connect(&port.addr).await.unwrap();
        c.write_all(PREFACE).await.unwrap();
        idle.push(c);
        wait_for("accepted", Duration::from_secs(5), || {
            port.stats.accepted() == n
        })
        .await;
    }
    // Each has been answered (SETTINGS), so each speaks HTTP/2 by now.
    for c in &mut idle {
        let mut head = [0u8; 9];
        c.read_exact(&mut head).await.unwrap();
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        c.read_exact(&mut vec![0u8; len]).await.unwrap();
    }
    check(&mut health(&port.addr)).await.unwrap();
    let (bytes, _) = until_closed(&mut idle[0], Duration::from_secs(10)).await;
    assert!(
        frame_types(&bytes).contains(&GOAWAY),
        "{:?}",
        frame_types(&bytes)
    );
    assert!(idle[1..].iter().all(still_open));
    assert_eq!(port.stats.made_room(), 1);
}

#[tokio::test]
async fn an_idle_connection_is_told_to_go_away_then_closed() {
    // The raw client below answers no ping, so it is cut a preface timeout after its GOAWAY.
    let port = start(cfg(64, 1_000, 300)).await;
    // A raw HTTP/2 client that says hello and then nothing: told to go away, then closed.
    let mut raw = TcpStream::connect(&port.addr).await.unwrap();
    raw.write_all(PREFACE).await.unwrap();
    let opened = Instant::now();
    let (bytes, closed) = until_closed(&mut raw, Duration::from_secs(5)).await;
    assert!(closed - opened >= Duration::from_millis(290));
    assert!(
        frame_types(&bytes).contains(&GOAWAY),
        "no GOAWAY before the close: {:?}",
        frame_types(&bytes)
    );
    assert_eq!(port.stats.idle_closed(), 1);
}

#[tokio::test]
async fn a_client_whose_idle_connection_went_away_calls_again_without_noticing() {
    // A gRPC client answers the GOAWAY's ping, so its connection closes long before the
    // 20 s after which one that does not would be cut.
    let port = start(cfg(64, 20_000, 300)).await;
    let mut client = health(&port.addr);
    check(&mut client).await.unwrap();
    wait_for("idle close", Duration::from_secs(10), || {
        port.stats.idle_closed() == 1 && port.stats.open() == 0
    })
    .await;
    check(&mut client).await.unwrap();
    assert_eq!(port.stats.accepted(), 2, "the client connected again");
}

#[tokio::test]
async fn a_stream_in_progress_keeps_its_connection_past_the_idle_timeout() {
    let port = start(cfg(64, 1_000, 300)).await;
    let mut watcher = health(&port.addr);
    let mut stream = watcher
        .watch(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap().unwrap();
    // An idle connection opened after the stream started: once it is gone, the streaming
    // connection has been without a new call for longer than the idle timeout too.
    let mut idle = TcpStream::connect(&port.addr).await.unwrap();
    idle.write_all(PREFACE).await.unwrap();
    until_closed(&mut idle, Duration::from_secs(5)).await;
    assert_eq!(port.stats.idle_closed(), 1, "only the idle connection went");
    assert_eq!(port.stats.open(), 1);
    // The stream ends; then its connection goes idle and away too.
    drop(stream);
    wait_for("idle close", Duration::from_secs(5), || {
        port.stats.idle_closed() == 2
    })
    .await;
}

#[tokio::test]
async fn a_stream_still_running_at_the_drain_deadline_is_cut() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut opts = ServeOptions::new("drain-test", &[]);
    opts.drain_timeout = Duration::from_millis(300);
    let stats = Arc::clone(&opts.connection_stats);
    let server = tokio::spawn(serve(listener, Routes::default(), opts, async {
        let _ = rx.await;
    }));
    let mut stream = health(&addr)
        .watch(HealthCheckRequest::default())
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap().unwrap();
    tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server returns after its drain deadline")
        .unwrap()
        .unwrap();
    assert_eq!(stats.open(), 0, "no connection outlives the server");
    // The watch saw NOT_SERVING, then its connection go.
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(Some(_)) = stream.message().await {}
    })
    .await;
    assert!(ended.is_ok(), "the stream was not cut");
}

#[tokio::test]
async fn a_silent_connection_does_not_hold_up_a_shutdown() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut opts = ServeOptions::new("drain-test", &[]);
    opts.drain_timeout = Duration::from_secs(20);
    let server = tokio::spawn(serve(listener, Routes::default(), opts, async {
        let _ = rx.await;
    }));
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    // Served once, so the server has surely accepted the silent one before.
    check(&mut health(&addr)).await.unwrap();
    let started = Instant::now();
    tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // Nothing in progress: the server stops at once, not at the silent one's deadline (10 s).
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    until_closed(&mut silent, Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_request_over_the_message_limit_is_resource_exhausted() {
    let port = start(ConnectionConfig::default()).await;
    let mut client = health(&port.addr);
    let big = HealthCheckRequest {
        service: "x".repeat(5_000_000),
    };
    let err = client.check(big).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
    assert!(
        err.message().contains("5000005 bytes") && err.message().contains("4194304"),
        "{}",
        err.message()
    );
    // Just under the limit, the call is served (an unknown service is NOT_FOUND).
    let under = HealthCheckRequest {
        service: "x".repeat(4 * 1024 * 1024 - 8),
    };
    let err = client.check(under).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound, "{err:?}");
}

#[tokio::test]
async fn a_flood_of_silent_connections_is_held_to_the_cap_while_health_answers() {
    let port = start(cfg(16, 1_000, 60_000)).await;
    let mut flood = Vec::new();
    for i in 0..400 {
        flood.push(TcpStream::connect(&port.addr).await.unwrap());
        if i % 100 == 99 {
            let started = Instant::now();
            check(&mut health(&port.addr)).await.unwrap();
            assert!(started.elapsed() < Duration::from_secs(3));
        }
    }
    // The last ones may still be in the kernel's backlog: wait for the port to take them all.
    wait_for("the port catches up", Duration::from_secs(5), || {
        port.stats.accepted() + port.stats.refused() >= 400
    })
    .await;
    assert!(port.stats.open() <= 16 + 2, "{} open", port.stats.open());
    // From the clients' side too: at most the cap (and the two it may be closing) stay open.
    wait_for("held to the cap", Duration::from_secs(5), || {
        flood.iter().filter(|c| still_open(c)).count() <= 16 + 2
    })
    .await;
    // Every silent one is closed by its preface deadline.
    for mut c in flood {
        until_closed(&mut c, Duration::from_secs(10)).await;
    }
    wait_for("all closed", Duration::from_secs(5), || {
        port.stats.open() == 0
    })
    .await;
}
