//! ConnectDevice is an operator's call: refused unless `device.allow_connect` is on, and then
//! its failures say the same thing, after the same least time, whatever answered at the
//! address (nothing, a silent port, another protocol, a phone that refuses the key), so the
//! device service cannot be used to learn what listens where.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use droidmesh_adb_wire::{A_AUTH, A_CNXN, AUTH_TOKEN, HEADER_LEN, Header, encode};
use droidmesh_device::DeviceConfig;
use droidmesh_proto::v1::{ConnectDeviceRequest, Transport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tonic::Code;

use super::common::*;

/// How long a listener at a refused address is watched for a late connection. The service
/// never dials it, so the outcome does not depend on this.
const WATCH: Duration = Duration::from_millis(700);

fn test_key() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/adbkey_test.pem")
        .display()
        .to_string()
}

fn attach(address: SocketAddr) -> ConnectDeviceRequest {
    ConnectDeviceRequest {
        address: address.to_string(),
        transport: Transport::TcpDirect as i32,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connect_device_is_refused_unless_the_operator_turned_it_on() {
    let outside = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = outside.local_addr().unwrap();
    let client = serve(DeviceConfig {
        adb_server: String::new(),
        ..DeviceConfig::default()
    })
    .await;
    let mut c = client.clone();
    let answer = tokio::select! {
        _ = outside.accept() => panic!("the device service connected to {at} with connecting off"),
        answer = c.connect_device(attach(at)) => answer,
    };
    let late = tokio::time::timeout(WATCH, outside.accept()).await;
    assert!(late.is_err(), "the device service connected to {at}");
    let status = answer.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains("device.allow_connect = true"),
        "{}",
        status.message()
    );
    // Whatever the request holds, the answer is the same: nothing of it is looked at.
    let status = client
        .clone()
        .connect_device(ConnectDeviceRequest {
            address: "not an address".into(),
            transport: 77,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
}

/// Reads one ADB message; `None` when the peer is gone or sends garbage.
async fn read_msg(s: &mut TcpStream) -> Option<(u32, Vec<u8>)> {
    let mut h = [0u8; HEADER_LEN];
    s.read_exact(&mut h).await.ok()?;
    let h = Header::decode(&h).ok()?;
    let mut payload = vec![0u8; usize::try_from(h.data_length).ok()?];
    s.read_exact(&mut payload).await.ok()?;
    Some((h.command, payload))
}

/// A loopback port where `serve` answers each connection.
async fn answering<F, Fut>(serve: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(serve(sock));
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread")]
async fn what_answered_at_an_address_is_not_told() {
    let timeout = Duration::from_millis(1_000);
    let client = serve(DeviceConfig {
        adb_server: String::new(),
        command_timeout_ms: u64::try_from(timeout.as_millis()).unwrap(),
        adb_key_path: test_key(),
        allow_connect: true,
        ..DeviceConfig::default()
    })
    .await;
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    // Accepts and never says a word.
    let silent = answering(|mut sock| async move {
        let mut sink = Vec::new();
        let _ = sock.read_to_end(&mut sink).await;
    })
    .await;
    let http = answering(|mut sock| async move {
        let _ = sock
            .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            .await;
    })
    .await;
    // A phone whose user never allows this key: every answer is another AUTH token.
    let declined = answering(|mut sock| async move {
        while let Some((command, _)) = read_msg(&mut sock).await {
            if command == A_CNXN || command == A_AUTH {
                let token: Vec<u8> = (100u8..120).collect();
                if sock
                    .write_all(&encode(A_AUTH, AUTH_TOKEN, 0, &token))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    })
    .await;
    let cases = [
        ("nothing listens", closed),
        ("silent", silent),
        ("not adb", http),
        ("key refused", declined),
    ];
    let mut calls = tokio::task::JoinSet::new();
    for (name, addr) in cases {
        let mut c = client.clone();
        calls.spawn(async move {
            let started = Instant::now();
            // Generous: a debug build signs with RSA slowly on a loaded machine.
            let answer =
                tokio::time::timeout(Duration::from_secs(60), c.connect_device(attach(addr)))
                    .await
                    .unwrap_or_else(|_| panic!("{name}: no answer within 60 s"));
            (name, addr, answer, started.elapsed())
        });
    }
    let mut seen = Vec::new();
    while let Some(done) = calls.join_next().await {
        let (name, addr, answer, took) = done.unwrap();
        let status = answer.expect_err(name);
        assert_eq!(status.code(), Code::Unavailable, "{name}: {status:?}");
        let message = status.message().replace(&addr.to_string(), "ADDR");
        assert!(
            message.starts_with("could not attach a phone at ADDR"),
            "{name}: {}",
            status.message()
        );
        // However soon the attempt failed, the answer comes no sooner than this.
        assert!(took >= timeout, "{name}: answered in {took:?}");
        seen.push((name, message));
    }
    for (name, message) in &seen {
        assert_eq!(
            message, &seen[0].1,
            "{name} is told apart from {}",
            seen[0].0
        );
    }
    let mut c = client.clone();
    assert!(
        devices(&mut c).await.is_empty(),
        "a failed attach stays listed"
    );
}

/// What happened at the address is in the service's log, not in the answer.
#[tokio::test]
async fn the_reason_goes_to_the_log_only() {
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let sink = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || Sink(sink.clone()))
        .finish();
    // The service runs on this test's one thread, so this subscriber sees all it logs.
    let _guard = tracing::subscriber::set_default(subscriber);
    let client = serve(DeviceConfig {
        adb_server: String::new(),
        command_timeout_ms: 100,
        allow_connect: true,
        ..DeviceConfig::default()
    })
    .await;
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let status = client
        .clone()
        .connect_device(attach(closed))
        .await
        .unwrap_err();
    assert!(
        !status.message().contains("Connection refused"),
        "{}",
        status.message()
    );
    let logged = String::from_utf8_lossy(&lines.lock().unwrap()).into_owned();
    assert!(
        logged.contains("could not attach a phone")
            && logged.contains(&closed.to_string())
            && logged.contains("Connection refused"),
        "{logged}"
    );
}

struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
