//! The direct client against droidmesh-sim (the real device side of the protocol) and against
//! small scripted devices on loopback for what the simulator does not do (authentication,
//! refusals, dropped connections, garbage).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use rsa::Pkcs1v15Sign;
use tokio::net::TcpListener;

use super::*;

fn test_key_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/adbkey_test.pem")
}

async fn sim() -> droidmesh_sim::SimFleet {
    droidmesh_sim::start(droidmesh_sim::SimOptions {
        base_port: 0,
        ..Default::default()
    })
    .await
    .unwrap()
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

#[tokio::test]
async fn runs_shell_commands_on_the_simulator_over_one_connection() {
    let fleet = sim().await;
    let dev = DirectDevice::new(fleet.addrs()[0], Some(test_key_path()));
    assert_eq!(text(dev.shell("echo hello").await.unwrap()), "hello\n");
    dev.shell("settings put global wifi_on 1").await.unwrap();
    assert_eq!(
        text(dev.shell("settings get global wifi_on").await.unwrap()).trim(),
        "1"
    );
    // Binary output arrives intact: a PNG from screencap.
    let png = dev.shell("screencap -p").await.unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{:?}", &png[..8]);
    assert!(png.len() > 1000);

    // Many commands at once share the connection and each gets its own answer.
    let dev = Arc::new(dev);
    let calls = (0..40).map(|i| {
        let dev = dev.clone();
        tokio::spawn(async move { (i, dev.shell(&format!("echo n{i}")).await) })
    });
    for call in calls {
        let (i, out) = call.await.unwrap();
        assert_eq!(text(out.unwrap()), format!("n{i}\n"));
    }
    fleet.shutdown().await;
}

#[tokio::test]
async fn a_restarted_device_is_reconnected_and_a_gone_one_is_an_error() {
    let fleet = sim().await;
    let addr = fleet.addrs()[0];
    let dev = DirectDevice::new(addr, Some(test_key_path()));
    assert_eq!(text(dev.shell("echo one").await.unwrap()), "one\n");
    fleet.shutdown().await;
    // The device's end of the connection closes as its task sees the stop; the client sees it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while dev
        .conn
        .lock()
        .await
        .as_ref()
        .is_some_and(|c| c.alive.load(Ordering::Acquire))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the connection outlived the device by 10 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let err = dev.shell("echo two").await.unwrap_err();
    assert!(matches!(err, DirectError::Connection(_)), "{err:?}");
    assert!(err.to_string().contains(&addr.to_string()), "{err}");

    // The device comes back on the same port: the next call connects again by itself.
    let back = droidmesh_sim::start(droidmesh_sim::SimOptions {
        host: addr.ip(),
        base_port: addr.port(),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(text(dev.shell("echo three").await.unwrap()), "three\n");
    back.shutdown().await;
}

/// What a scripted device does with a connection.
#[derive(Clone, Copy, PartialEq)]
enum Script {
    /// Asks for AUTH; `knows_key` decides whether the signature is accepted.
    Auth { knows_key: bool },
    /// Asks for AUTH, refuses the signature and, after the public key, asks again (the phone's
    /// user declined the prompt).
    AuthDeclined,
    /// Accepts the handshake, then refuses every service.
    RefuseServices,
    /// Accepts, answers one command, then drops the connection.
    DropAfterOne,
    /// Accepts, acknowledges OPEN, never answers.
    Stall,
    /// Accepts the handshake, then reads and never answers anything (a device gone silent).
    Silent,
    /// Speaks HTTP instead of ADB.
    Garbage,
    /// Answers `exec:big` with 300 KiB in WRTEs of 100 KiB, other commands as usual.
    Huge,
    /// Asks for TLS.
    Tls,
}

struct Seen {
    signature: Option<Vec<u8>>,
    public_key: Option<Vec<u8>>,
    token: Vec<u8>,
    /// OPENs the device has read, over all connections.
    opens: u32,
}

async fn read_msg(s: &mut BufReader<tokio::net::TcpStream>) -> Option<Message> {
    let mut h = [0u8; HEADER_LEN];
    s.read_exact(&mut h).await.ok()?;
    let h = Header::decode(&h).ok()?;
    let mut payload = vec![0u8; h.data_length as usize];
    s.read_exact(&mut payload).await.ok()?;
    Some(Message {
        command: h.command,
        arg0: h.arg0,
        arg1: h.arg1,
        payload,
    })
}

/// Serves connections on a loopback port following `script`; returns the address and what
/// the device received during authentication.
async fn scripted(script: Script) -> (SocketAddr, Arc<Mutex<Seen>>) {
    let (addr, seen, _) = scripted_counting(script).await;
    (addr, seen)
}

/// [`scripted`], also counting the connections accepted.
async fn scripted_counting(script: Script) -> (SocketAddr, Arc<Mutex<Seen>>, Arc<AtomicU32>) {
    let accepted = Arc::new(AtomicU32::new(0));
    let counter = accepted.clone();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen {
        signature: None,
        public_key: None,
        token: (100u8..120).collect(),
        opens: 0,
    }));
    let seen2 = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::Relaxed);
            let seen = seen2.clone();
            tokio::spawn(async move {
                let mut s = BufReader::new(sock);
                let hello = read_msg(&mut s).await.unwrap();
                assert_eq!(hello.command, A_CNXN);
                let banner = b"device::ro.product.model=Scripted\0";
                let cnxn = encode(A_CNXN, A_VERSION, 256 * 1024, banner);
                match script {
                    Script::Garbage => {
                        s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\nxxxxxxxxxxxxxxxx")
                            .await
                            .unwrap();
                        return;
                    }
                    Script::Tls => {
                        s.write_all(&encode(A_STLS, 0x0100_0000, 0, &[]))
                            .await
                            .unwrap();
                        return;
                    }
                    Script::AuthDeclined => {
                        let token = seen.lock().unwrap().token.clone();
                        for expect in [AUTH_SIGNATURE, AUTH_RSAPUBLICKEY] {
                            s.write_all(&encode(A_AUTH, AUTH_TOKEN, 0, &token))
                                .await
                                .unwrap();
                            let m = read_msg(&mut s).await.unwrap();
                            assert_eq!((m.command, m.arg0), (A_AUTH, expect));
                        }
                        s.write_all(&encode(A_AUTH, AUTH_TOKEN, 0, &token))
                            .await
                            .unwrap();
                        // Whatever the host does next, this device never says CNXN.
                        let _ = read_msg(&mut s).await;
                        return;
                    }
                    Script::Auth { knows_key } => {
                        let token = seen.lock().unwrap().token.clone();
                        s.write_all(&encode(A_AUTH, AUTH_TOKEN, 0, &token))
                            .await
                            .unwrap();
                        let sig = read_msg(&mut s).await.unwrap();
                        assert_eq!((sig.command, sig.arg0), (A_AUTH, AUTH_SIGNATURE));
                        seen.lock().unwrap().signature = Some(sig.payload);
                        if !knows_key {
                            s.write_all(&encode(A_AUTH, AUTH_TOKEN, 0, &token))
                                .await
                                .unwrap();
                            let pk = read_msg(&mut s).await.unwrap();
                            assert_eq!((pk.command, pk.arg0), (A_AUTH, AUTH_RSAPUBLICKEY));
                            seen.lock().unwrap().public_key = Some(pk.payload);
                        }
                    }
                    _ => {}
                }
                s.write_all(&cnxn).await.unwrap();
                let mut answered = 0;
                while let Some(m) = read_msg(&mut s).await {
                    if m.command != A_OPEN {
                        continue;
                    }
                    seen.lock().unwrap().opens += 1;
                    let host = m.arg0;
                    match script {
                        Script::RefuseServices => {
                            s.write_all(&encode(A_CLSE, 0, host, &[])).await.unwrap();
                        }
                        Script::Stall => {
                            s.write_all(&encode(A_OKAY, 7, host, &[])).await.unwrap();
                        }
                        Script::Silent => {}
                        _ => {
                            if script == Script::DropAfterOne && answered == 1 {
                                return;
                            }
                            let cmd = String::from_utf8_lossy(&m.payload).to_string();
                            let cmd = cmd.trim_end_matches('\0');
                            let mut out = encode(A_OKAY, 7, host, &[]);
                            if script == Script::Huge && cmd == "exec:big" {
                                for _ in 0..3 {
                                    out.extend(encode(A_WRTE, 7, host, &[b'x'; 100 * 1024]));
                                }
                            } else {
                                let reply = format!("ran {cmd}\n");
                                out.extend(encode(A_WRTE, 7, host, reply.as_bytes()));
                            }
                            out.extend(encode(A_CLSE, 7, host, &[]));
                            s.write_all(&out).await.unwrap();
                            answered += 1;
                        }
                    }
                }
            });
        }
    });
    (addr, seen, accepted)
}

#[tokio::test]
async fn a_device_that_knows_the_key_checks_our_signature() {
    let (addr, seen) = scripted(Script::Auth { knows_key: true }).await;
    let dev = DirectDevice::new(addr, Some(test_key_path()));
    assert_eq!(text(dev.shell("id").await.unwrap()), "ran exec:id\n");
    let key = key::load_key(&test_key_path()).unwrap();
    let seen = seen.lock().unwrap();
    key.to_public_key()
        .verify(
            Pkcs1v15Sign::new::<sha1::Sha1>(),
            &seen.token,
            seen.signature.as_ref().unwrap(),
        )
        .unwrap();
    assert!(seen.public_key.is_none());
}

#[tokio::test]
async fn a_device_that_does_not_know_the_key_is_offered_it() {
    let (addr, seen) = scripted(Script::Auth { knows_key: false }).await;
    let dev = DirectDevice::new(addr, Some(test_key_path()));
    assert_eq!(text(dev.shell("id").await.unwrap()), "ran exec:id\n");
    let key = key::load_key(&test_key_path()).unwrap();
    let payload = seen.lock().unwrap().public_key.clone().unwrap();
    let text = std::str::from_utf8(&payload).unwrap();
    let (b64, who) = text.trim_end_matches('\0').split_once(' ').unwrap();
    assert!(who.starts_with("droidmesh@"));
    let blob = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    assert_eq!(blob, key::android_pubkey(&key.to_public_key()).unwrap());
}

#[tokio::test]
async fn a_declined_key_is_a_clear_refusal_not_a_loop() {
    let (addr, _) = scripted(Script::AuthDeclined).await;
    let dev = DirectDevice::new(addr, Some(test_key_path()));
    // Generous: a debug build signs with RSA slowly on a loaded machine; a loop never ends.
    let err = tokio::time::timeout(Duration::from_secs(60), dev.shell("id"))
        .await
        .expect("the handshake must end, not loop")
        .unwrap_err();
    assert!(
        matches!(&err, DirectError::Refused(m) if m.contains("did not allow debugging")),
        "{err}"
    );
}

#[tokio::test]
async fn a_missing_key_file_is_created_when_a_device_asks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("adbkey");
    let (addr, _) = scripted(Script::Auth { knows_key: true }).await;
    let dev = DirectDevice::new(addr, Some(path.clone()));
    dev.shell("id").await.unwrap();
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .starts_with("-----BEGIN PRIVATE KEY-----")
    );
}

#[tokio::test]
async fn refusals_garbage_and_tls_are_clear_errors() {
    let (addr, _) = scripted(Script::RefuseServices).await;
    let dev = DirectDevice::new(addr, Some(test_key_path()));
    let err = dev.shell("id").await.unwrap_err();
    assert_eq!(
        err,
        DirectError::Refused("the device refused `exec`".into())
    );

    let (addr, _) = scripted(Script::Garbage).await;
    let err = DirectDevice::new(addr, Some(test_key_path()))
        .shell("id")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, DirectError::Connection(m) if m.contains("not an ADB message")),
        "{err}"
    );

    let (addr, _) = scripted(Script::Tls).await;
    let err = DirectDevice::new(addr, Some(test_key_path()))
        .shell("id")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, DirectError::Refused(m) if m.contains("adb pair")),
        "{err}"
    );

    // A command longer than the device accepts is refused before it is sent.
    let (addr, _) = scripted(Script::DropAfterOne).await;
    let dev = DirectDevice::new(addr, Some(test_key_path()));
    let long = "x".repeat(300 * 1024);
    let err = dev.shell(&format!("echo {long}")).await.unwrap_err();
    assert!(
        matches!(&err, DirectError::Refused(m) if m.contains("262144")),
        "{err}"
    );
}

#[tokio::test]
async fn a_connection_dropped_mid_command_is_reported_not_retried() {
    let (addr, _) = scripted(Script::DropAfterOne).await;
    let dev = DirectDevice::new(addr, Some(test_key_path()));
    assert_eq!(text(dev.shell("a").await.unwrap()), "ran exec:a\n");
    let err = dev.shell("b").await.unwrap_err();
    assert!(
        matches!(&err, DirectError::Connection(m) if m.contains("closed during")),
        "{err}"
    );
    // The next call opens a new connection.
    assert_eq!(text(dev.shell("c").await.unwrap()), "ran exec:c\n");
}

/// Runs `command` until `ready` holds (looked at every 5 ms, for at most 30 s), then abandons
/// it as a caller's timeout would, whatever the machine's speed. The call must not return.
async fn abandon_when(dev: &DirectDevice, command: &str, ready: impl Fn() -> bool) {
    let call = dev.shell(command);
    tokio::pin!(call);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "`{command}`: not ready within 30 s"
        );
        tokio::select! {
            r = &mut call => panic!("`{command}` returned: {r:?}"),
            () = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    }
}

/// Messages the device's connection has delivered to `dev` (0 without a connection).
fn delivered(dev: &DirectDevice) -> u64 {
    dev.conn
        .try_lock()
        .ok()
        .and_then(|c| c.as_ref().map(|c| c.received.load(Ordering::Relaxed)))
        .unwrap_or(0)
}

#[tokio::test]
async fn a_stalled_command_can_be_abandoned_and_the_connection_keeps_working() {
    let (addr, _) = scripted(Script::Stall).await;
    let dev = DirectDevice::new(addr, Some(test_key_path()));
    // Abandoned once the device's answer to the open (OKAY, then nothing) has arrived.
    abandon_when(&dev, "sleep", || delivered(&dev) >= 1).await;
    let conn = dev.conn.lock().await.clone().unwrap();
    assert!(
        conn.streams().is_empty(),
        "the abandoned stream is forgotten"
    );
    assert!(conn.alive.load(Ordering::Acquire));
}

#[tokio::test]
async fn a_device_gone_silent_is_reconnected_on_the_next_call() {
    let (addr, seen, accepted) = scripted_counting(Script::Silent).await;
    let dev = DirectDevice::new(addr, Some(test_key_path()));
    for n in 1..=2 {
        // Abandoned once the device has the open, which it never answers.
        abandon_when(&dev, "id", || seen.lock().unwrap().opens >= n).await;
    }
    // Nothing arrived while each call waited: each call after the first used a new connection.
    assert_eq!(accepted.load(Ordering::Relaxed), 2);

    // A device that answers something (the OKAY of the open) is slow, not gone: kept.
    let (addr, _, accepted) = scripted_counting(Script::Stall).await;
    let dev = DirectDevice::new(addr, Some(test_key_path()));
    for n in 1..=2 {
        abandon_when(&dev, "sleep", || delivered(&dev) >= n).await;
    }
    assert_eq!(accepted.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn output_past_the_limit_is_an_error_and_the_connection_keeps_working() {
    let (addr, _, accepted) = scripted_counting(Script::Huge).await;
    let mut dev = DirectDevice::new(addr, Some(test_key_path()));
    dev.max_output = 256 * 1024;
    let err = dev.shell("big").await.unwrap_err();
    assert_eq!(
        err,
        DirectError::Refused(
            "the output is larger than the 262144 byte limit for one command".into()
        )
    );
    // The stream was closed on the device; the connection serves the next command.
    assert_eq!(text(dev.shell("small").await.unwrap()), "ran exec:small\n");
    assert_eq!(accepted.load(Ordering::Relaxed), 1);
}
