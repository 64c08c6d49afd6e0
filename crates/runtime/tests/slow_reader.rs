//! A client that asks for a lot and then reads nothing: a raw HTTP/2 client on loopback that
//! gives the server all the flow-control window it could want, sends reflection requests
//! whose answers fill the socket, and never reads. The port cuts it after the write-stall
//! limit and keeps serving others.
use droidmesh_runtime::server::{ConnectionConfig, ConnectionStats};
use droidmesh_runtime::{ClientOptions, ServeOptions, connect, serve};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket};
use tonic::service::Routes;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A header block of literal fields without indexing (no Huffman), each name and value
/// shorter than 127 bytes.
fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in fields {
        block.push(0);
        block.push(u8::try_from(name.len()).unwrap());
        block.extend_from_slice(name.as_bytes());
        block.push(u8::try_from(value.len()).unwrap());
        block.extend_from_slice(value.as_bytes());
    }
    block
}

/// `ServerReflectionRequest { file_containing_symbol: symbol }` as one gRPC message.
fn reflection_request(symbol: &str) -> Vec<u8> {
    let mut msg = vec![0x22, u8::try_from(symbol.len()).unwrap()];
    msg.extend_from_slice(symbol.as_bytes());
    let mut grpc = vec![0];
    grpc.extend_from_slice(&u32::try_from(msg.len()).unwrap().to_be_bytes());
    grpc.extend_from_slice(&msg);
    grpc
}

async fn wait_for(what: &str, stats: &ConnectionStats, cond: impl Fn(&ConnectionStats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond(stats) {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_client_that_reads_nothing_of_what_it_asked_for_is_cut_after_the_stall_limit() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_stop, rx) = tokio::sync::oneshot::channel::<()>();
    let mut opts = ServeOptions::new("stall-test", &[droidmesh_proto::service_names::GATEWAY]);
    opts.connections = ConnectionConfig {
        write_stall_ms: 500,
        ..ConnectionConfig::default()
    };
    let stats = Arc::clone(&opts.connection_stats);
    tokio::spawn(serve(listener, Routes::default(), opts, async {
        let _ = rx.await;
    }));

    // A small receive buffer, so the socket fills after a few answers.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut conn = socket.connect(addr).await.unwrap();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // SETTINGS: INITIAL_WINDOW_SIZE 2^31-1; the connection's window opened as far too.
    hello.extend(frame(0x4, 0, 0, &[0, 4, 0x7f, 0xff, 0xff, 0xff]));
    hello.extend(frame(0x8, 0, 0, &(0x7fff_ffffu32 - 65_535).to_be_bytes()));
    conn.write_all(&hello).await.unwrap();
    let path = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
    let block = headers(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "stall-test"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]);
    let body = reflection_request("droidmesh.v1.Gateway");
    let started = Instant::now();
    // 1,000 answers of 15 KiB: far more than the kernel buffers of both ends hold (4 MiB
    // of send buffer at most here). The writes block once the server, stuck writing, stops
    // reading; they fail once it cuts the connection.
    for stream in (1..2000u32).step_by(2) {
        let mut req = frame(0x1, 0x4, stream, &block);
        req.extend(frame(0x0, 0x1, stream, &body));
        if conn.write_all(&req).await.is_err() {
            break;
        }
    }
    wait_for("the stalled connection is cut", &stats, |s| {
        s.stalled() == 1
    })
    .await;
    wait_for("and closed", &stats, |s| s.open() == 0).await;
    assert!(started.elapsed() >= Duration::from_millis(490));

    // Others are served meanwhile and after.
    let opts = ClientOptions {
        request_timeout: Some(Duration::from_secs(5)),
        ..ClientOptions::default()
    };
    let mut health = HealthClient::new(connect(&format!("http://{addr}"), &opts).unwrap());
    health.check(HealthCheckRequest::default()).await.unwrap();
    drop(conn);
}
