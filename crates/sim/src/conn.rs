//! One ADB transport connection: the CNXN handshake, then streams opened by the host
//! (`shell:`, `shell,v2,...:`, `exec:`, `sync:`), each answered without waiting for the host's
//! OKAYs; every host WRTE is acknowledged at once. Streams run concurrently, as the adb server
//! multiplexes all of its clients' requests over one connection per device.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::device::Device;
use crate::shell::{self, Output};
use crate::sync::SyncSession;
use crate::wire::{
    self, A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_VERSION, A_WRTE, HEADER_LEN, Header, MAX_PAYLOAD,
};

/// What the connection's streams share.
#[derive(Clone)]
struct Conn {
    device: Arc<Mutex<Device>>,
    out: mpsc::UnboundedSender<Vec<u8>>,
    streams: Arc<Mutex<HashMap<u32, Entry>>>,
    /// Largest payload the host accepts.
    max_payload: usize,
}

struct Entry {
    local: u32,
    kind: Kind,
}

enum Kind {
    /// A command runs; host data (e.g. a shell v2 close-stdin packet) is ignored.
    Busy,
    Sync(SyncSession),
    /// An interactive shell reading stdin.
    Stdin(mpsc::UnboundedSender<Vec<u8>>),
}

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

fn next_id() -> u32 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed).max(1)
}

impl Conn {
    fn send(&self, command: u32, arg0: u32, arg1: u32, payload: &[u8]) {
        let _ = self.out.send(wire::encode(command, arg0, arg1, payload));
    }

    fn write_all(&self, local: u32, host: u32, data: &[u8]) {
        for chunk in data.chunks(self.max_payload.max(1)) {
            self.send(A_WRTE, local, host, chunk);
        }
    }

    /// Shell v2 packets of `id` carrying `data`, one packet per WRTE.
    fn write_packets(&self, local: u32, host: u32, id: u8, data: &[u8]) {
        for chunk in data.chunks(self.max_payload.saturating_sub(5).max(1)) {
            self.send(A_WRTE, local, host, &packet(id, chunk));
        }
    }

    fn close(&self, local: u32, host: u32) {
        self.streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&host);
        self.send(A_CLSE, local, host, &[]);
    }
}

fn packet(id: u8, data: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(5 + data.len());
    p.push(id);
    p.extend_from_slice(&u32::try_from(data.len()).unwrap_or(0).to_le_bytes());
    p.extend_from_slice(data);
    p
}

/// Serves one connection until the host closes it or `stop` fires.
pub async fn serve(
    stream: TcpStream,
    device: Arc<Mutex<Device>>,
    banner: Arc<str>,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        while let Some(buf) = rx.recv().await {
            if wr.write_all(&buf).await.is_err() {
                break;
            }
        }
    });
    let mut conn = Conn {
        device,
        out: tx,
        streams: Arc::default(),
        max_payload: 4096,
    };
    let reason = tokio::select! {
        r = read_loop(&mut rd, &mut conn, &banner) => r,
        _ = stop.changed() => "simulator stopped".to_owned(),
    };
    tracing::debug!(%peer, %reason, "adb connection ended");
    drop(conn);
    writer.abort();
}

/// Acknowledges received segments at once instead of delaying the ACK (Linux re-arms delayed
/// ACKs, so this is set before every read). adb_client writes a message's header and payload in
/// two writes without TCP_NODELAY: with a delayed ACK here, Nagle holds the payload back ~40 ms.
fn quick_ack(rd: &tokio::net::tcp::OwnedReadHalf) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let stream: &TcpStream = rd.as_ref();
        let _ = socket2::SockRef::from(stream).set_tcp_quickack(true);
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = rd;
}

async fn read_loop(
    rd: &mut tokio::net::tcp::OwnedReadHalf,
    conn: &mut Conn,
    banner: &str,
) -> String {
    let mut head = [0u8; HEADER_LEN];
    loop {
        quick_ack(rd);
        if let Err(e) = rd.read_exact(&mut head).await {
            return format!("read: {e}");
        }
        quick_ack(rd);
        let h = match Header::decode(&head) {
            Ok(h) => h,
            Err(e) => return format!("protocol error: {e}"),
        };
        let mut payload = vec![0u8; h.data_length as usize];
        if let Err(e) = rd.read_exact(&mut payload).await {
            return format!("read payload: {e}");
        }
        match h.command {
            A_CNXN => {
                conn.max_payload = (h.arg1 as usize).clamp(4096, MAX_PAYLOAD as usize);
                conn.send(A_CNXN, A_VERSION, MAX_PAYLOAD, banner.as_bytes());
            }
            A_OPEN => open(conn, h.arg0, &payload),
            A_WRTE => write(conn, h, &payload),
            A_CLSE => {
                let removed = conn
                    .streams
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&h.arg0);
                if let Some(e) = removed {
                    conn.send(A_CLSE, e.local, h.arg0, &[]);
                }
            }
            // OKAYs need no answer (this device never waits for them); AUTH and STLS are not
            // used, as the banner is sent without asking for authentication.
            A_OKAY => {}
            other => tracing::debug!(command = wire::command_name(other), "ignored message"),
        }
    }
}

/// Keys of `streams` are the host's stream ids (arg1 of the host's WRTE/CLSE is our id, arg0
/// theirs); OPEN carries the host id in arg0.
fn open(conn: &Conn, host: u32, payload: &[u8]) {
    let service =
        String::from_utf8_lossy(payload.strip_suffix(&[0]).unwrap_or(payload)).into_owned();
    let local = next_id();
    let (kind, start): (Kind, Option<Starter>) = if service == "sync:" {
        (Kind::Sync(SyncSession::default()), None)
    } else if let Some(cmd) = service.strip_prefix("exec:") {
        let cmd = cmd.to_owned();
        (
            Kind::Busy,
            Some(Box::new(move |c| one_shot(c, local, host, cmd, Mode::Raw))),
        )
    } else if let Some(rest) = service.strip_prefix("shell") {
        let (opts, cmd) = rest.split_once(':').unwrap_or((rest, ""));
        let v2 = opts.split(',').any(|o| o == "v2");
        let cmd = cmd.to_owned();
        if cmd.trim().is_empty() {
            let (tx, rx) = mpsc::unbounded_channel();
            (
                Kind::Stdin(tx),
                Some(Box::new(move |c| interactive(c, local, host, v2, rx))),
            )
        } else {
            let mode = if v2 { Mode::V2 } else { Mode::Raw };
            (
                Kind::Busy,
                Some(Box::new(move |c| one_shot(c, local, host, cmd, mode))),
            )
        }
    } else {
        tracing::debug!(%service, "unsupported service");
        conn.send(A_CLSE, 0, host, &[]);
        return;
    };
    conn.streams
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(host, Entry { local, kind });
    conn.send(A_OKAY, local, host, &[]);
    if let Some(start) = start {
        start(conn.clone());
    }
}

fn write(conn: &Conn, h: Header, payload: &[u8]) {
    let host = h.arg0;
    let mut streams = conn.streams.lock().unwrap_or_else(|p| p.into_inner());
    let Some(entry) = streams.get_mut(&host) else {
        return;
    };
    let local = entry.local;
    conn.send(A_OKAY, local, host, &[]);
    match &mut entry.kind {
        Kind::Busy => {}
        Kind::Stdin(tx) => {
            let _ = tx.send(payload.to_vec());
        }
        Kind::Sync(session) => {
            let fed = session.feed(payload, &conn.device);
            drop(streams);
            conn.write_all(local, host, &fed.reply);
            if fed.quit {
                conn.close(local, host);
            }
        }
    }
}

/// Starts the task that serves a newly opened stream.
type Starter = Box<dyn FnOnce(Conn) + Send>;

#[derive(Clone, Copy)]
enum Mode {
    /// `shell:` and `exec:`: bytes, stderr mixed in, no exit code.
    Raw,
    /// `shell,v2`: stdout, stderr and exit code as separate packets.
    V2,
}

fn one_shot(conn: Conn, local: u32, host: u32, cmd: String, mode: Mode) {
    tokio::spawn(async move {
        let device = conn.device.clone();
        let out = tokio::task::spawn_blocking(move || shell::run(&device, &cmd))
            .await
            .unwrap_or_else(|e| Output::fail(1, format!("/system/bin/sh: internal error: {e}")));
        send_output(&conn, local, host, out, mode);
        conn.close(local, host);
    });
}

fn send_output(conn: &Conn, local: u32, host: u32, out: Output, mode: Mode) {
    match mode {
        Mode::Raw => conn.write_all(local, host, &out.merged()),
        Mode::V2 => {
            conn.write_packets(local, host, 1, &out.stdout);
            conn.write_packets(local, host, 2, &out.stderr);
            let code = u8::try_from(out.code.rem_euclid(256)).unwrap_or(1);
            conn.send(A_WRTE, local, host, &packet(3, &[code]));
        }
    }
}

const PROMPT: &[u8] = b"sim:/ $ ";

/// `adb shell` without a command: reads lines from stdin and runs each.
fn interactive(
    conn: Conn,
    local: u32,
    host: u32,
    v2: bool,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    tokio::spawn(async move {
        let say = |data: &[u8]| {
            if v2 {
                conn.write_packets(local, host, 1, data);
            } else {
                conn.write_all(local, host, data);
            }
        };
        say(PROMPT);
        let mut raw = Vec::new();
        let mut line = Vec::new();
        while let Some(data) = rx.recv().await {
            let stdin = if v2 {
                raw.extend_from_slice(&data);
                let mut bytes = Vec::new();
                while raw.len() >= 5 {
                    let len = u32::from_le_bytes([raw[1], raw[2], raw[3], raw[4]]) as usize;
                    if raw.len() < 5 + len {
                        break;
                    }
                    if raw[0] == 0 {
                        bytes.extend_from_slice(&raw[5..5 + len]);
                    }
                    raw.drain(..5 + len);
                }
                bytes
            } else {
                data
            };
            for b in stdin {
                if b != b'\n' && b != b'\r' {
                    line.push(b);
                    continue;
                }
                let cmd = String::from_utf8_lossy(&std::mem::take(&mut line))
                    .trim()
                    .to_owned();
                if cmd == "exit" {
                    if v2 {
                        conn.send(A_WRTE, local, host, &packet(3, &[0]));
                    }
                    conn.close(local, host);
                    return;
                }
                if !cmd.is_empty() {
                    let device = conn.device.clone();
                    let out = tokio::task::spawn_blocking(move || shell::run(&device, &cmd))
                        .await
                        .unwrap_or_default();
                    say(&out.merged());
                }
                say(PROMPT);
            }
        }
    });
}
