//! TLS and mutual TLS on a real gRPC port, with real clients: certificates from a private CA
//! made for each test, checked names, refused callers, renewed files, slow handshakes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use droidmesh_runtime::balance::{Discovery, StaticResolver};
use droidmesh_runtime::tls::dev::write_dev_certs;
use droidmesh_runtime::tls::{ClientAuth, ClientTls, ServerTls, TlsConfig};
use droidmesh_runtime::{ClientOptions, ServeOptions, connect, serve};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// `[tls]` of a process whose certificate is `DIR/NAME.crt`, checking peers against
/// `DIR/ca.crt`.
fn config(dir: &Path, name: &str) -> TlsConfig {
    TlsConfig {
        cert: Some(dir.join(format!("{name}.crt"))),
        key: Some(dir.join(format!("{name}.key"))),
        ca: Some(dir.join("ca.crt")),
        handshake_timeout_ms: 2_000,
        ..TlsConfig::default()
    }
}

/// Serves health on `ip`:0 with `tls`; returns the port and a stop.
async fn start(ip: &str, tls: ServerTls) -> (u16, tokio::sync::oneshot::Sender<()>) {
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut opts = ServeOptions::new("tls-test", &[droidmesh_proto::service_names::DEVICE]);
    opts.drain_timeout = Duration::from_secs(1);
    opts.tls = Some(tls);
    tokio::spawn(serve(listener, Routes::default(), opts, async {
        let _ = rx.await;
    }));
    (port, tx)
}

fn client_options(tls: ClientTls) -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_secs(3),
        request_timeout: Some(Duration::from_secs(5)),
        tls,
        ..ClientOptions::default()
    }
}

/// A health check through `endpoint`: Ok, or the status's message with its sources.
async fn check(endpoint: &str, tls: ClientTls) -> Result<(), String> {
    let channel = connect(endpoint, &client_options(tls)).map_err(|e| e.to_string())?;
    HealthClient::new(channel)
        .check(HealthCheckRequest::default())
        .await
        .map(drop)
        .map_err(|s| {
            let mut text = format!("{:?}: {}", s.code(), s.message());
            let mut source = std::error::Error::source(&s);
            while let Some(e) = source {
                text.push_str(&format!(" / {e}"));
                source = e.source();
            }
            text
        })
}

fn client(cfg: &TlsConfig) -> ClientTls {
    ClientTls::from_config(cfg).unwrap()
}

#[tokio::test]
async fn a_tls_port_serves_clients_that_trust_its_ca_and_refuses_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    write_dev_certs(
        dir.path(),
        "server",
        &names(&["localhost", "127.0.0.1"]),
        30,
    )
    .unwrap();
    let other = tempfile::tempdir().unwrap();
    write_dev_certs(other.path(), "tls", &names(&["127.0.0.1"]), 30).unwrap();
    let server = ServerTls::grpc(&config(dir.path(), "server"), ClientAuth::None)
        .unwrap()
        .unwrap();
    let (port, _stop) = start("127.0.0.1", server).await;
    let trusting = client(&TlsConfig {
        ca: Some(dir.path().join("ca.crt")),
        ..TlsConfig::default()
    });

    check(&format!("https://127.0.0.1:{port}"), trusting.clone())
        .await
        .unwrap();
    // Checked against the name the certificate gives, reached at its address.
    check(&format!("https://localhost:{port}"), trusting.clone())
        .await
        .unwrap();

    // Another CA's client does not trust it, and says why.
    let err = check(
        &format!("https://127.0.0.1:{port}"),
        client(&TlsConfig {
            ca: Some(other.path().join("ca.crt")),
            ..TlsConfig::default()
        }),
    )
    .await
    .unwrap_err();
    assert!(err.contains("not signed by a CA in tls.ca"), "{err}");

    // Cleartext HTTP/2 to the TLS port gets nothing served.
    let err = check(&format!("http://127.0.0.1:{port}"), trusting.clone())
        .await
        .unwrap_err();
    assert!(
        err.starts_with("Unavailable") || err.starts_with("Unknown"),
        "{err}"
    );

    // A name the certificate does not hold is refused, and the fix named.
    let err = check(
        &format!("https://127.0.0.1:{port}"),
        client(&TlsConfig {
            ca: Some(dir.path().join("ca.crt")),
            server_name: Some("droidmesh-device.example".to_owned()),
            ..TlsConfig::default()
        }),
    )
    .await
    .unwrap_err();
    assert!(err.contains("does not name this host"), "{err}");
    assert!(err.contains("droidmesh-device.example"), "{err}");
}

#[tokio::test]
async fn a_plain_port_called_over_tls_says_it_does_not_speak_tls() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let opts = ServeOptions::new("plain", &[]);
    tokio::spawn(serve(
        listener,
        Routes::default(),
        opts,
        std::future::pending(),
    ));
    let dir = tempfile::tempdir().unwrap();
    write_dev_certs(dir.path(), "tls", &names(&["127.0.0.1"]), 30).unwrap();
    let err = check(
        &format!("https://127.0.0.1:{port}"),
        client(&TlsConfig {
            ca: Some(dir.path().join("ca.crt")),
            ..TlsConfig::default()
        }),
    )
    .await
    .unwrap_err();
    assert!(err.contains("does not speak TLS"), "{err}");
}

#[tokio::test]
async fn mutual_tls_refuses_callers_without_a_certificate_from_the_ca() {
    let dir = tempfile::tempdir().unwrap();
    let all = names(&["127.0.0.1"]);
    write_dev_certs(dir.path(), "server", &all, 30).unwrap();
    write_dev_certs(dir.path(), "client", &names(&["droidmesh-gateway"]), 30).unwrap();
    let other = tempfile::tempdir().unwrap();
    write_dev_certs(other.path(), "client", &all, 30).unwrap();

    let required = ServerTls::grpc(&config(dir.path(), "server"), ClientAuth::Required)
        .unwrap()
        .unwrap();
    let (port, _stop) = start("127.0.0.1", required).await;
    let at = format!("https://127.0.0.1:{port}");
    let ca_only = TlsConfig {
        ca: Some(dir.path().join("ca.crt")),
        ..TlsConfig::default()
    };

    let err = check(&at, client(&ca_only)).await.unwrap_err();
    assert!(
        err.contains("Unavailable") || err.contains("Unknown"),
        "a caller without a certificate must be refused: {err}"
    );
    // A certificate from another CA is refused too.
    let foreign = TlsConfig {
        cert: Some(other.path().join("client.crt")),
        key: Some(other.path().join("client.key")),
        ..ca_only.clone()
    };
    assert!(check(&at, client(&foreign)).await.is_err());
    check(&at, client(&config(dir.path(), "client")))
        .await
        .unwrap();

    // Optional: a caller without one is served, one with a foreign one is not.
    let optional = ServerTls::grpc(&config(dir.path(), "server"), ClientAuth::Optional)
        .unwrap()
        .unwrap();
    let (port, _stop2) = start("127.0.0.1", optional).await;
    let at = format!("https://127.0.0.1:{port}");
    check(&at, client(&ca_only)).await.unwrap();
    check(&at, client(&config(dir.path(), "client")))
        .await
        .unwrap();
    assert!(check(&at, client(&foreign)).await.is_err());
}

#[tokio::test]
async fn balanced_replicas_are_checked_against_the_name_they_were_found_for() {
    let dir = tempfile::tempdir().unwrap();
    // The certificate names the service, not the replicas' addresses.
    write_dev_certs(dir.path(), "server", &names(&["droidmesh-executor"]), 30).unwrap();
    let tls = ServerTls::grpc(&config(dir.path(), "server"), ClientAuth::None)
        .unwrap()
        .unwrap();
    let (port_a, _a) = start("127.0.0.2", tls.clone()).await;
    let listener = TcpListener::bind(("127.0.0.3", port_a)).await.unwrap();
    let (_tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut opts = ServeOptions::new("tls-test", &[]);
    opts.tls = Some(tls);
    tokio::spawn(serve(listener, Routes::default(), opts, async {
        let _ = rx.await;
    }));

    let resolver = Arc::new(StaticResolver::default());
    resolver.set(
        "droidmesh-executor",
        &["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()],
    );
    let opts = ClientOptions {
        discovery: Discovery {
            resolver,
            probe_every: Duration::from_millis(100),
            ..Discovery::default()
        },
        ..client_options(client(&TlsConfig {
            ca: Some(dir.path().join("ca.crt")),
            ..TlsConfig::default()
        }))
    };
    let mesh =
        droidmesh_runtime::connect_mesh(&format!("https://droidmesh-executor:{port_a}"), &opts)
            .unwrap();
    // Both replicas pass their probes (health over TLS) only if each certificate is checked
    // against the name.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let replicas = mesh.replicas();
        if replicas.len() == 2 && replicas.iter().all(|(_, healthy)| *healthy) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "replicas never healthy: {replicas:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut health = HealthClient::new(droidmesh_runtime::traced(mesh));
    for _ in 0..4 {
        health.check(HealthCheckRequest::default()).await.unwrap();
    }
}

#[tokio::test]
async fn renewed_certificate_files_are_used_by_new_connections_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ip = names(&["127.0.0.1"]);
    write_dev_certs(dir.path(), "server", &ip, 30).unwrap();
    let old_ca = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join("ca.crt"), old_ca.path().join("ca.crt")).unwrap();
    let server = ServerTls::grpc(&config(dir.path(), "server"), ClientAuth::None)
        .unwrap()
        .unwrap();
    let (port, _stop) = start("127.0.0.1", server).await;
    let at = format!("https://127.0.0.1:{port}");
    let trusts_old = TlsConfig {
        ca: Some(old_ca.path().join("ca.crt")),
        ..TlsConfig::default()
    };
    check(&at, client(&trusts_old)).await.unwrap();

    // A new CA and certificate written over the old files (as a renewed Secret is).
    std::fs::remove_file(dir.path().join("ca.crt")).unwrap();
    std::fs::remove_file(dir.path().join("ca.key")).unwrap();
    write_dev_certs(dir.path(), "server", &ip, 30).unwrap();
    let trusts_new = TlsConfig {
        ca: Some(dir.path().join("ca.crt")),
        ..TlsConfig::default()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while check(&at, client(&trusts_new)).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "the renewed certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let err = check(&at, client(&trusts_old)).await.unwrap_err();
    assert!(err.contains("not signed by a CA in tls.ca"), "{err}");

    // Files that do not load (half written) leave the last good ones in use.
    std::fs::write(
        dir.path().join("server.crt"),
        "-----BEGIN CERTIFICATE-----\nAAAA",
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    check(&at, client(&trusts_new)).await.unwrap();
}

#[tokio::test]
async fn a_caller_that_never_finishes_its_handshake_is_dropped_and_holds_up_no_one() {
    let dir = tempfile::tempdir().unwrap();
    write_dev_certs(dir.path(), "server", &names(&["127.0.0.1"]), 30).unwrap();
    let mut cfg = config(dir.path(), "server");
    cfg.handshake_timeout_ms = 300;
    let server = ServerTls::grpc(&cfg, ClientAuth::None).unwrap().unwrap();
    let (port, _stop) = start("127.0.0.1", server).await;
    let mut silent = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    // Another caller is served meanwhile.
    check(
        &format!("https://127.0.0.1:{port}"),
        client(&TlsConfig {
            ca: Some(dir.path().join("ca.crt")),
            ..TlsConfig::default()
        }),
    )
    .await
    .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buf))
        .await
        .expect("the silent caller was never dropped");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_tls_port_at_its_cap_makes_room_for_a_caller_that_speaks() {
    let dir = tempfile::tempdir().unwrap();
    write_dev_certs(dir.path(), "server", &names(&["127.0.0.1"]), 30).unwrap();
    let server = ServerTls::grpc(&config(dir.path(), "server"), ClientAuth::None)
        .unwrap()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (_stop, rx) = tokio::sync::oneshot::channel::<()>();
    let mut opts = ServeOptions::new("tls-test", &[]);
    opts.tls = Some(server);
    opts.connections.max_connections = 2;
    let stats = Arc::clone(&opts.connection_stats);
    tokio::spawn(serve(listener, Routes::default(), opts, async {
        let _ = rx.await;
    }));
    let mut silent = Vec::new();
    for n in 1..=2u64 {
        silent.push(
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while stats.accepted() < n {
            assert!(Instant::now() < deadline, "not accepted");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let trusting = client(&TlsConfig {
        ca: Some(dir.path().join("ca.crt")),
        ..TlsConfig::default()
    });
    check(&format!("https://127.0.0.1:{port}"), trusting)
        .await
        .unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), silent[0].read(&mut buf))
        .await
        .expect("the oldest silent caller was not closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert_eq!(stats.made_room(), 1);
}

#[test]
fn unusable_files_are_refused_at_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write_dev_certs(dir.path(), "a", &names(&["127.0.0.1"]), 30).unwrap();
    write_dev_certs(dir.path(), "b", &names(&["127.0.0.1"]), 30).unwrap();
    let err = |cfg: TlsConfig| {
        ServerTls::grpc(&cfg, ClientAuth::None)
            .map(drop)
            .unwrap_err()
            .to_string()
    };

    let missing = TlsConfig {
        cert: Some(dir.path().join("nope.crt")),
        ..config(dir.path(), "a")
    };
    let e = err(missing);
    assert!(e.starts_with("tls.cert ") && e.contains("nope.crt"), "{e}");

    let mismatched = TlsConfig {
        key: Some(dir.path().join("b.key")),
        ..config(dir.path(), "a")
    };
    let e = err(mismatched);
    assert!(e.contains("does not go with tls.cert"), "{e}");

    let not_pem = TlsConfig {
        cert: Some(dir.path().join("a.key")),
        ..config(dir.path(), "a")
    };
    let e = err(not_pem);
    assert!(e.contains("holds no PEM certificate"), "{e}");

    let no_key = TlsConfig {
        key: Some(dir.path().join("a.crt")),
        ..config(dir.path(), "a")
    };
    let e = err(no_key);
    assert!(e.starts_with("tls.key ") && e.contains("a.crt"), "{e}");

    let no_ca = TlsConfig {
        ca: None,
        ..config(dir.path(), "a")
    };
    let e = ServerTls::grpc(&no_ca, ClientAuth::Required)
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(e.contains("tls.ca"), "{e}");
    // Without cert and key nothing is served over TLS.
    assert!(
        ServerTls::grpc(&TlsConfig::default(), ClientAuth::None)
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_refused_certificate_or_a_protocol_mismatch_is_named_a_tls_failure() {
    use droidmesh_runtime::peer::{Transport, transport_failure};
    let dir = tempfile::tempdir().unwrap();
    write_dev_certs(dir.path(), "server", &names(&["127.0.0.1"]), 30).unwrap();
    let other = tempfile::tempdir().unwrap();
    write_dev_certs(other.path(), "tls", &names(&["127.0.0.1"]), 30).unwrap();
    let server = ServerTls::grpc(&config(dir.path(), "server"), ClientAuth::None)
        .unwrap()
        .unwrap();
    let (tls_port, _stop) = start("127.0.0.1", server).await;
    let plain = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain_port = plain.local_addr().unwrap().port();
    tokio::spawn(serve(
        plain,
        Routes::default(),
        ServeOptions::new("plain", &[]),
        std::future::pending(),
    ));
    let failure = |endpoint: String, ca: &Path| {
        let tls = client(&TlsConfig {
            ca: Some(ca.join("ca.crt")),
            ..TlsConfig::default()
        });
        async move {
            let channel = connect(&endpoint, &client_options(tls)).unwrap();
            let status = HealthClient::new(channel)
                .check(HealthCheckRequest::default())
                .await
                .unwrap_err();
            transport_failure(&status)
        }
    };
    // Cleartext HTTP/2 to a TLS port breaks the connection (the server closes it as the
    // client still writes); a probe after the break finds the TLS port.
    let cleartext = format!("http://127.0.0.1:{tls_port}");
    assert!(failure(cleartext.clone(), dir.path()).await.is_some());
    assert_eq!(
        droidmesh_runtime::peer::probe(&cleartext, Duration::from_secs(2)).await,
        Transport::Tls
    );
    // A probe of a TLS port over https:// (one that broke and is back) is not a mismatch.
    assert_eq!(
        droidmesh_runtime::peer::probe(
            &format!("https://127.0.0.1:{tls_port}"),
            Duration::from_secs(2)
        )
        .await,
        Transport::Broken
    );
    for (endpoint, ca) in [
        (format!("https://127.0.0.1:{plain_port}"), dir.path()),
        (format!("https://127.0.0.1:{tls_port}"), other.path()),
    ] {
        assert_eq!(
            failure(endpoint.clone(), ca).await,
            Some(Transport::Tls),
            "{endpoint}"
        );
    }
    // Nothing listening is still unreachable, not a TLS failure.
    let gone = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone_port = gone.local_addr().unwrap().port();
    drop(gone);
    assert_eq!(
        failure(format!("https://127.0.0.1:{gone_port}"), dir.path()).await,
        Some(Transport::Unreachable)
    );
}
