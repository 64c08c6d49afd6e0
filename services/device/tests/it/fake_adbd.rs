//! A scriptable device side of the ADB protocol for fault injection: it answers `exec:` and
//! `shell:` commands from a function, or stalls, so tests can make a device hang mid-call. (The
//! simulator in droidmesh-sim is the realistic device; this one only misbehaves on purpose.)
#![allow(dead_code)]
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CNXN: u32 = 0x4e58_4e43;
const OPEN: u32 = 0x4e45_504f;
const OKAY: u32 = 0x5941_4b4f;
const WRTE: u32 = 0x4554_5257;
const CLSE: u32 = 0x4553_4c43;

/// What the device does with a shell command.
#[derive(Clone)]
pub enum Reply {
    Output(Vec<u8>),
    /// Accept the stream and never answer.
    Stall,
}

pub type Script = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

/// Starts the fake device on 127.0.0.1:0.
pub async fn start(script: Script) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            sock.set_nodelay(true).unwrap();
            tokio::spawn(serve(sock, script.clone()));
        }
    });
    addr
}

async fn send(
    sock: &mut TcpStream,
    cmd: u32,
    a0: u32,
    a1: u32,
    payload: &[u8],
) -> std::io::Result<()> {
    let sum: u32 = payload.iter().map(|&b| u32::from(b)).sum();
    let mut msg = Vec::with_capacity(24 + payload.len());
    for v in [cmd, a0, a1, payload.len() as u32, sum, cmd ^ 0xffff_ffff] {
        msg.extend_from_slice(&v.to_le_bytes());
    }
    msg.extend_from_slice(payload);
    sock.write_all(&msg).await
}

async fn serve(mut sock: TcpStream, script: Script) -> std::io::Result<()> {
    let mut next_id = 1000u32;
    loop {
        let mut h = [0u8; 24];
        sock.read_exact(&mut h).await?;
        let f = |i: usize| u32::from_le_bytes([h[i * 4], h[i * 4 + 1], h[i * 4 + 2], h[i * 4 + 3]]);
        let (cmd, a0, len) = (f(0), f(1), f(3) as usize);
        let mut payload = vec![0u8; len];
        sock.read_exact(&mut payload).await?;
        match cmd {
            CNXN => {
                send(&mut sock, CNXN, 0x0100_0001, 0x0010_0000, b"device::ro.product.name=fake;ro.product.model=Fake;ro.product.device=fake;features=stat_v2").await?;
            }
            OPEN => {
                next_id += 1;
                let service = String::from_utf8_lossy(&payload)
                    .trim_end_matches('\0')
                    .to_owned();
                let command = service
                    .strip_prefix("exec:")
                    .or_else(|| service.strip_prefix("shell:"))
                    .unwrap_or(&service)
                    .to_owned();
                send(&mut sock, OKAY, next_id, a0, &[]).await?;
                match script(&command) {
                    Reply::Output(out) => {
                        for chunk in out.chunks(64 * 1024) {
                            send(&mut sock, WRTE, next_id, a0, chunk).await?;
                        }
                        send(&mut sock, CLSE, next_id, a0, &[]).await?;
                    }
                    Reply::Stall => {}
                }
            }
            WRTE => send(&mut sock, OKAY, f(2), a0, &[]).await?,
            _ => {}
        }
    }
}
