//! One ADB transport connection: the CNXN handshake, then streams opened by the host
//! (`shell:`, `shell,v2,...:`, `exec:`, `sync:`, and the services a user build refuses).
//! Streams run concurrently, as the adb server multiplexes all of its clients' requests over one
//! connection per device.
//!
//! Streams are known by the simulator's own id (the host names it in arg1 of its OKAY, WRTE and
//! CLSE, with its own id in arg0), as adbd keeps them: a host that reuses one of its ids gets a
//! separate stream. As in adbd, nothing but CNXN is served before the handshake, and an OPEN
//! with host id 0 is ignored.
//!
//! Flow control follows the protocol: a stream sends its next WRTE only after the host's OKAY
//! for the last one, and host data is acknowledged only once the stream's bounded stdin queue
//! took it; a host that sends more than [`HOST_WINDOW`] WRTEs on a stream without waiting for
//! those OKAYs gets the stream closed. Every queue is bounded: at most [`MAX_STREAMS`] streams
//! per connection, two stdin chunks per stream, [`OUT_QUEUE`] messages waiting for the socket (a
//! host that sends that many without reading is disconnected).
//!
//! A stream the host opens after closing one whose command still works on the input it was
//! sent is accepted once that command has finished ([`drain`]), so `adb exec-in 'cat > f'`
//! followed by `adb shell wc -c f` counts the bytes.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc, watch};

mod drain;
mod input;
mod run;

use crate::device::Device;
use crate::shell::Input;
use crate::sync::SyncSession;
use crate::wire::{
    self, A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_VERSION, A_WRTE, HEADER_LEN, Header, MAX_PAYLOAD,
};
use input::host_data;
use run::{HostStdin, Mode, interactive, one_shot, packet};

/// Streams open at once on one connection; an OPEN beyond is refused (closed at once).
pub const MAX_STREAMS: usize = 64;
/// Messages waiting for the socket; a host that lets more pile up is disconnected.
pub const OUT_QUEUE: usize = 1024;
/// Queued messages the writer takes for one write (held besides the queue while it writes).
const OUT_BATCH: usize = 16;
/// Bytes read from the socket at a time: the host's messages that arrived together (an OKAY
/// and a CLSE, say) are taken in one read. A payload larger than this is read past it.
const READ_BUFFER: usize = 8 * 1024;
/// Host data chunks a stream's stdin holds before the host must wait for our OKAY.
const STDIN_QUEUE: usize = 2;
/// Host WRTEs a stream holds unacknowledged; one more closes the stream. adb's server sends
/// one and waits for the OKAY.
pub const HOST_WINDOW: usize = 2;

/// What the connection's streams share.
#[derive(Clone)]
struct Conn {
    device: Arc<Mutex<Device>>,
    streams_opened: Arc<crate::StreamLog>,
    out: mpsc::Sender<Vec<u8>>,
    /// Keyed by the simulator's id of each stream.
    streams: Arc<Mutex<HashMap<u32, Entry>>>,
    /// Largest payload the host accepts.
    max_payload: usize,
    /// Commands the host closed while they still ran on its input.
    draining: Arc<drain::Draining>,
}

struct Entry {
    /// The host's id of the stream.
    host: u32,
    kind: Kind,
    /// One permit per WRTE the host has acknowledged: a stream sends only with a permit.
    acked: Arc<Semaphore>,
}

enum Kind {
    /// File transfer: requests are answered in order by the stream's writer task.
    Sync(SyncSession, mpsc::Sender<SyncReply>),
    /// A stream that takes no input (a refusal being sent): host data is acknowledged and
    /// dropped.
    Discard,
    /// A command or shell: host data is its standard input.
    Stdin(Feed),
}

/// A sync reply, and whether the session ends after it.
type SyncReply = (Vec<u8>, bool);

/// Sync requests answered but not yet sent; a host pipelining more is cut off.
const SYNC_QUEUE: usize = 16;

/// Where a stream's host data goes.
struct Feed {
    /// `None` once the host closed stdin.
    tx: Option<mpsc::Sender<Vec<u8>>>,
    /// Host WRTEs taken but not yet acknowledged.
    unacked: Arc<std::sync::atomic::AtomicUsize>,
    /// Shell v2 packets (stdin data is packet id 0; id 4 closes stdin).
    v2: bool,
    /// A v2 packet split across WRTEs.
    partial: Vec<u8>,
    /// Whether the host has sent any input.
    fed: bool,
    /// Set when the stream's command has finished.
    done: watch::Receiver<bool>,
}

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// A stream id not in use on this connection (ids are never 0).
fn next_id(streams: &HashMap<u32, Entry>) -> u32 {
    loop {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        if id != 0 && !streams.contains_key(&id) {
            return id;
        }
    }
}

impl Conn {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Entry>> {
        self.streams.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a control message (OKAY, CLSE, CNXN) without waiting; false if the host has let
    /// [`OUT_QUEUE`] messages pile up unread.
    fn control(&self, command: u32, arg0: u32, arg1: u32, payload: &[u8]) -> bool {
        self.out
            .try_send(wire::encode(command, arg0, arg1, payload))
            .is_ok()
    }

    /// Sends `data` on stream `local` in WRTEs of at most the host's payload size, each after
    /// the host acknowledged the previous one. False if the stream or the connection is gone.
    async fn write(&self, local: u32, data: &[u8]) -> bool {
        for chunk in data.chunks(self.max_payload.max(1)) {
            if !self.write_one(local, chunk).await {
                return false;
            }
        }
        true
    }

    async fn write_one(&self, local: u32, payload: &[u8]) -> bool {
        let Some((host, acked)) = self.lock().get(&local).map(|e| (e.host, e.acked.clone())) else {
            return false;
        };
        match acked.acquire().await {
            Ok(permit) => permit.forget(),
            Err(_) => return false,
        }
        self.out
            .send(wire::encode(A_WRTE, local, host, payload))
            .await
            .is_ok()
    }

    /// Shell v2 packets of `id` carrying `data`.
    async fn write_packets(&self, local: u32, id: u8, data: &[u8]) -> bool {
        for chunk in data.chunks(self.max_payload.saturating_sub(5).max(1)) {
            if !self.write_one(local, &packet(id, chunk)).await {
                return false;
            }
        }
        true
    }

    /// Ends a stream from our side.
    fn close(&self, local: u32) {
        if let Some(e) = self.lock().remove(&local) {
            e.acked.close();
            self.control(A_CLSE, local, e.host, &[]);
        }
    }
}

/// Serves one connection until the host closes it or `stop` fires.
pub async fn serve(
    stream: TcpStream,
    device: Arc<Mutex<Device>>,
    streams_opened: Arc<crate::StreamLog>,
    banner: Arc<str>,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::with_capacity(READ_BUFFER, rd);
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(OUT_QUEUE);
    // Messages already queued together go out in one write (a command's last WRTE and its
    // CLSE, say): the host wakes once for them.
    let writer = tokio::spawn(async move {
        let mut queued = Vec::with_capacity(OUT_BATCH);
        while rx.recv_many(&mut queued, OUT_BATCH).await > 0 {
            let written = match queued.as_slice() {
                [one] => wr.write_all(one).await,
                many => wr.write_all(&many.concat()).await,
            };
            queued.clear();
            if written.is_err() {
                break;
            }
        }
    });
    let mut conn = Conn {
        device,
        streams_opened,
        out: tx,
        streams: Arc::default(),
        max_payload: 4096,
        draining: Arc::default(),
    };
    let reason = tokio::select! {
        r = read_loop(&mut rd, &mut conn, &banner) => r,
        _ = stop.changed() => "simulator stopped".to_owned(),
    };
    tracing::debug!(%peer, %reason, "adb connection ended");
    // Streams still running see their host gone: writers stop, stdin ends.
    for (_, e) in conn.lock().drain() {
        e.acked.close();
    }
    drop(conn);
    writer.abort();
}

/// Acknowledges received segments at once instead of delaying the ACK (Linux re-arms delayed
/// ACKs, so this is set before every read from the socket: whenever fewer than `need` bytes
/// are buffered). adb_client writes a message's header and payload in two writes without
/// TCP_NODELAY: with a delayed ACK here, Nagle holds the payload back ~40 ms.
fn quick_ack(rd: &BufReader<tokio::net::tcp::OwnedReadHalf>, need: usize) {
    if rd.buffer().len() >= need {
        return;
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let stream: &TcpStream = rd.get_ref().as_ref();
        let _ = socket2::SockRef::from(stream).set_tcp_quickack(true);
    }
}

async fn read_loop(
    rd: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    conn: &mut Conn,
    banner: &str,
) -> String {
    let mut head = [0u8; HEADER_LEN];
    // Until the host's CNXN, nothing else is served (adbd's `online`).
    let mut online = false;
    loop {
        quick_ack(rd, HEADER_LEN);
        if let Err(e) = rd.read_exact(&mut head).await {
            return format!("read: {e}");
        }
        let h = match Header::decode(&head) {
            Ok(h) => h,
            Err(e) => return format!("protocol error: {e}"),
        };
        let mut payload = vec![0u8; h.data_length as usize];
        quick_ack(rd, payload.len());
        if let Err(e) = rd.read_exact(&mut payload).await {
            return format!("read payload: {e}");
        }
        // The host's messages name (host id, our id); as adbd, ignore the ones that cannot
        // name a stream (an id of 0) and the ones naming a stream of another host id. A CLSE
        // may leave the host id out.
        let (host, local) = (h.arg0, h.arg1);
        let ours = |e: &Entry, wildcard: bool| e.host == host || (wildcard && host == 0);
        let sent = match h.command {
            A_CNXN => {
                online = true;
                conn.max_payload = (h.arg1 as usize).clamp(4096, MAX_PAYLOAD as usize);
                conn.control(A_CNXN, A_VERSION, MAX_PAYLOAD, banner.as_bytes())
            }
            A_OPEN if online && host != 0 && local == 0 => open(conn, host, &payload),
            A_WRTE if online && host != 0 && local != 0 => host_data(conn, host, local, payload),
            A_CLSE if online && local != 0 => {
                let removed = {
                    let mut streams = conn.lock();
                    match streams.get(&local) {
                        Some(e) if ours(e, true) => streams.remove(&local),
                        _ => None,
                    }
                };
                match removed {
                    // Dropping the entry ends the stream's stdin; a command still running
                    // finishes (`exec-in` closes as soon as it has sent its input), and
                    // streams opened from now on wait for it.
                    Some(e) => {
                        e.acked.close();
                        if let Kind::Stdin(feed) = &e.kind
                            && feed.fed
                        {
                            conn.draining.add(feed.done.clone());
                        }
                        conn.control(A_CLSE, local, e.host, &[])
                    }
                    None => true,
                }
            }
            A_OKAY if online && host != 0 && local != 0 => {
                if let Some(e) = conn.lock().get(&local).filter(|e| ours(e, false)) {
                    // At most one WRTE is ever unacknowledged; a repeated OKAY adds nothing.
                    if e.acked.available_permits() == 0 {
                        e.acked.add_permits(1);
                    }
                }
                true
            }
            // AUTH and STLS are not used: the banner is sent without asking for authentication.
            other => {
                tracing::debug!(
                    command = wire::command_name(other),
                    online,
                    host,
                    local,
                    "ignored message"
                );
                true
            }
        };
        if !sent {
            return format!("the host let {OUT_QUEUE} messages pile up without reading");
        }
    }
}

/// What a user build answers for a service the simulator does not offer, as adbd would: the
/// text, then the stream closes.
fn refusal(service: &str) -> Option<&'static [u8]> {
    let name = service.split(':').next().unwrap_or(service);
    Some(match name {
        "root" => b"adbd cannot run as root in production builds\n",
        "unroot" => b"adbd not running as root\n",
        "remount" => b"Not running as root. Try \"adb root\" first.\n",
        "disable-verity" | "enable-verity" => b"verity cannot be disabled/enabled - USER build\n",
        "reboot" => b"reboot: the simulated phone cannot reboot; restart `droidmesh sim`\n",
        "tcpip" | "usb" => b"the simulated phone is already on TCP and cannot switch\n",
        _ => return None,
    })
}

/// Opens a stream for host stream `host` (OPEN carries the host id in arg0). Returns false if
/// the host stopped reading.
fn open(conn: &Conn, host: u32, payload: &[u8]) -> bool {
    let service =
        String::from_utf8_lossy(payload.strip_suffix(&[0]).unwrap_or(payload)).into_owned();
    conn.streams_opened.record(&service);
    let local = next_id(&conn.lock());
    if conn.lock().len() >= MAX_STREAMS {
        tracing::warn!(%service, "refused a stream: {MAX_STREAMS} are open on this connection");
        return conn.control(A_CLSE, 0, host, &[]);
    }
    let feed = |v2| {
        let (tx, rx) = mpsc::channel(STDIN_QUEUE);
        let input = Input::source(Box::new(HostStdin {
            rx,
            handle: tokio::runtime::Handle::current(),
        }));
        let (finished, done) = drain::done_signal();
        (
            Kind::Stdin(Feed {
                tx: Some(tx),
                unacked: Arc::default(),
                v2,
                partial: Vec::new(),
                fed: false,
                done,
            }),
            input,
            finished,
        )
    };
    let (kind, start): (Kind, Starter) = if service == "sync:" {
        let (tx, mut rx) = mpsc::channel::<SyncReply>(SYNC_QUEUE);
        (
            Kind::Sync(SyncSession::default(), tx),
            Box::new(move |c: Conn| {
                tokio::spawn(async move {
                    while let Some((reply, quit)) = rx.recv().await {
                        if !c.write(local, &reply).await || quit {
                            c.close(local);
                            break;
                        }
                    }
                });
            }),
        )
    } else if let Some(cmd) = service.strip_prefix("exec:") {
        let cmd = cmd.to_owned();
        let (kind, input, finished) = feed(false);
        (
            kind,
            Box::new(move |c| one_shot(c, local, cmd, input, Mode::Raw, finished)),
        )
    } else if let Some(rest) = service.strip_prefix("shell") {
        let (opts, cmd) = rest.split_once(':').unwrap_or((rest, ""));
        let opts: Vec<&str> = opts.split(',').collect();
        let v2 = opts.contains(&"v2");
        let (kind, input, finished) = feed(v2);
        let cmd = cmd.to_owned();
        if cmd.trim().is_empty() {
            // A terminal (the default without a command) gets a prompt; `raw` (adb's choice
            // when its stdin is not a terminal) reads a script silently.
            let pty = !opts.contains(&"raw");
            (
                kind,
                Box::new(move |c| interactive(c, local, v2, pty, input, finished)),
            )
        } else {
            let mode = if v2 { Mode::V2 } else { Mode::Raw };
            (
                kind,
                Box::new(move |c| one_shot(c, local, cmd, input, mode, finished)),
            )
        }
    } else if let Some(text) = refusal(&service) {
        (
            Kind::Discard,
            Box::new(move |c: Conn| {
                tokio::spawn(async move {
                    c.write(local, text).await;
                    c.close(local);
                });
            }),
        )
    } else if let Some(req) = service.strip_prefix("reverse:") {
        // adb's reverse protocol: OKAY or FAIL, then a hex length and the text.
        let answer = if req == "list-forward" {
            b"OKAY0000".to_vec()
        } else {
            let msg = "reverse forwarding is not supported by the simulated phone";
            format!("FAIL{:04x}{msg}", msg.len()).into_bytes()
        };
        (
            Kind::Discard,
            Box::new(move |c: Conn| {
                tokio::spawn(async move {
                    c.write(local, &answer).await;
                    c.close(local);
                });
            }),
        )
    } else {
        tracing::debug!(%service, "unsupported service");
        return conn.control(A_CLSE, 0, host, &[]);
    };
    conn.lock().insert(
        local,
        Entry {
            host,
            kind,
            acked: Arc::new(Semaphore::new(1)),
        },
    );
    let pending = conn.draining.pending();
    if pending.is_empty() {
        let sent = conn.control(A_OKAY, local, host, &[]);
        start(conn.clone());
        return sent;
    }
    // The host sends nothing on the stream before our OKAY: it waits with it.
    let c = conn.clone();
    tokio::spawn(async move {
        drain::wait(pending).await;
        if c.lock().contains_key(&local) && c.control(A_OKAY, local, host, &[]) {
            start(c);
        }
    });
    true
}

/// Starts the task that serves a newly opened stream.
type Starter = Box<dyn FnOnce(Conn) + Send>;
