//! ADB flow control, seen from the host side of the wire: a stream sends one WRTE and then
//! waits for the host's OKAY, so a host that does not read cannot make the simulator queue
//! output; once the host acknowledges, the rest follows in order.
use std::collections::HashMap;
use std::time::Duration;

use droidmesh_adb_wire::{
    A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_VERSION, A_WRTE, HEADER_LEN, Header, encode,
};
use droidmesh_sim::SimOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn next(s: &mut TcpStream) -> (Header, Vec<u8>) {
    let mut head = [0u8; HEADER_LEN];
    tokio::time::timeout(Duration::from_secs(20), s.read_exact(&mut head))
        .await
        .expect("no message from the simulator within 20 s")
        .unwrap();
    let h = Header::decode(&head).unwrap();
    let mut payload = vec![0u8; h.data_length as usize];
    s.read_exact(&mut payload).await.unwrap();
    (h, payload)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_waits_for_the_hosts_okay_before_each_write() {
    let fleet = droidmesh_sim::start(SimOptions {
        host: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        base_port: 0,
        devices: 1,
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let mut s = TcpStream::connect(fleet.addrs()[0]).await.unwrap();
    // A host that takes 4 KB per message: a screenshot needs many.
    s.write_all(&encode(A_CNXN, A_VERSION, 4096, b"host::\0"))
        .await
        .unwrap();
    assert_eq!(next(&mut s).await.0.command, A_CNXN);
    const STREAMS: u32 = 8;
    for id in 1..=STREAMS {
        s.write_all(&encode(A_OPEN, id, 0, b"exec:screencap -p\0"))
            .await
            .unwrap();
    }
    // Each stream: its OKAY, then exactly one WRTE while the host acknowledges nothing.
    let mut local = HashMap::new();
    let mut writes: HashMap<u32, Vec<u8>> = HashMap::new();
    while writes.len() < STREAMS as usize {
        let (h, payload) = next(&mut s).await;
        match h.command {
            A_OKAY => {
                local.insert(h.arg1, h.arg0);
            }
            A_WRTE => {
                assert!(
                    writes.insert(h.arg1, payload).is_none(),
                    "stream {} sent a second WRTE before the host's OKAY",
                    h.arg1
                );
            }
            other => panic!("unexpected message {other:#x}"),
        }
    }
    // A round trip on another stream: anything a stream sent without waiting would be here
    // before its answer.
    s.write_all(&encode(A_OPEN, 100, 0, b"shell,v2,raw:echo marker\0"))
        .await
        .unwrap();
    loop {
        let (h, payload) = next(&mut s).await;
        assert_ne!(h.arg1, 0);
        if h.arg1 == 100 && h.command == A_CLSE {
            break;
        }
        if h.arg1 == 100 {
            if h.command == A_WRTE {
                s.write_all(&encode(A_OKAY, 100, h.arg0, b""))
                    .await
                    .unwrap();
            }
            continue;
        }
        panic!(
            "stream {} sent {:#x} ({} bytes) without the host's OKAY",
            h.arg1,
            h.command,
            payload.len()
        );
    }
    // Acknowledge everything: each stream delivers a whole PNG, then closes.
    for (&host, first) in &writes {
        assert!(first.len() <= 4096);
        s.write_all(&encode(A_OKAY, host, local[&host], b""))
            .await
            .unwrap();
    }
    let mut closed = 0;
    while closed < STREAMS {
        let (h, payload) = next(&mut s).await;
        match h.command {
            A_WRTE => {
                assert!(payload.len() <= 4096);
                writes.get_mut(&h.arg1).unwrap().extend_from_slice(&payload);
                s.write_all(&encode(A_OKAY, h.arg1, h.arg0, b""))
                    .await
                    .unwrap();
            }
            A_CLSE => closed += 1,
            other => panic!("unexpected message {other:#x}"),
        }
    }
    for png in writes.values() {
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 8192);
        let info = png::Decoder::new(std::io::Cursor::new(png))
            .read_info()
            .unwrap();
        assert_eq!((info.info().width, info.info().height), (1080, 2400));
    }
}
