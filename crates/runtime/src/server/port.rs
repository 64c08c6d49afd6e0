//! One port's connections: the cap, which held connection makes room for a new one, each
//! connection's phase and calls in progress, and one warning at most every ten seconds while
//! the port turns connections away. Every gRPC port holds its connections here, and so does
//! the gateway's HTTP face (a request there is a call; its words are given by [`PortWords`]).
use super::limits::ConnectionConfig;
use super::stats::ConnectionStats;
use futures::task::AtomicWaker;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// How often, at most, a port warns that it turns connections away.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// A connection's progress: nothing received yet, receiving its TLS handshake or preface (a
/// request head), or served (HTTP/2 spoken; a whole request head received).
pub const SILENT: u8 = 0;
pub const STARTING: u8 = 1;
pub const SERVED: u8 = 2;

/// How a port names itself in its logs.
#[derive(Debug, Clone, Copy)]
pub struct PortWords {
    /// What the port is: "gRPC port".
    pub port: &'static str,
    /// The setting that caps it: "grpc.max_connections".
    pub cap_key: &'static str,
    /// What a client sends first, within the deadline: "HTTP/2 preface".
    pub opening: &'static str,
    /// What a connection has in progress: "call".
    pub work: &'static str,
}

impl PortWords {
    /// A gRPC port's.
    pub const GRPC: PortWords = PortWords {
        port: "gRPC port",
        cap_key: "grpc.max_connections",
        opening: "HTTP/2 preface",
        work: "call",
    };
}

/// Why a connection was told to go: still open, to make room at the cap, idle too long, or the
/// port stops.
const OPEN: u8 = 0;
const MAKE_ROOM: u8 = 1;
const IDLE: u8 = 2;
const STOP: u8 = 3;

/// What the port turned away since its last warning.
#[derive(Default)]
struct Unreported {
    refused: u64,
    made_room: u64,
    no_preface: u64,
    accept_failed: u64,
    last_accept_error: Option<String>,
    last_warning: Option<Instant>,
}

struct Registry {
    held: HashMap<u64, Arc<Conn>>,
    /// Held connections in accept order, those that have finished their preface or left
    /// dropped from the front as it is looked at: the front is the oldest one not started.
    unstarted: VecDeque<Arc<Conn>>,
    /// Connections told to make room: no longer held, not closed yet.
    closing: HashMap<u64, Arc<Conn>>,
    next_id: u64,
}

/// The connections of one port.
pub struct Port {
    pub(crate) name: String,
    pub(crate) cfg: ConnectionConfig,
    pub(crate) stats: Arc<ConnectionStats>,
    words: PortWords,
    registry: Mutex<Registry>,
    /// Connections' idle times are counted from here, so they compare.
    epoch: Instant,
    /// Signalled each time a connection closes.
    left: Notify,
    /// True once the port stops: every connection is told to go away.
    stopping: watch::Sender<bool>,
    unreported: Mutex<Unreported>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Port {
    /// A gRPC port's connections.
    pub(crate) fn new(name: &str, cfg: ConnectionConfig, stats: Arc<ConnectionStats>) -> Arc<Self> {
        Self::with_words(name, cfg, stats, PortWords::GRPC)
    }

    /// The connections of a port that names itself with `words`. Of `cfg` only the cap
    /// (`max_connections`, and an eighth of it closing) and the preface timeout (named in a
    /// log line) apply here; deadlines are the serving side's.
    pub fn with_words(
        name: &str,
        cfg: ConnectionConfig,
        stats: Arc<ConnectionStats>,
        words: PortWords,
    ) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            cfg,
            stats,
            words,
            registry: Mutex::new(Registry {
                held: HashMap::new(),
                unstarted: VecDeque::new(),
                closing: HashMap::new(),
                next_id: 0,
            }),
            epoch: Instant::now(),
            left: Notify::new(),
            stopping: watch::Sender::new(false),
            unreported: Mutex::default(),
        })
    }

    /// Takes a new connection: a slot when the port has room or a held connection can make
    /// room for it; `None` (the connection is to be closed at once) otherwise.
    pub fn admit(self: &Arc<Self>) -> Option<(Slot, Arc<Conn>)> {
        let mut reg = lock(&self.registry);
        let mut made_room = false;
        if reg.held.len() >= self.cfg.max_connections {
            let victim = (reg.closing.len() < self.cfg.most_closing())
                .then(|| victim(&mut reg))
                .flatten();
            let Some(victim) = victim else {
                drop(reg);
                ConnectionStats::add(&self.stats.refused);
                self.note(|u| u.refused += 1);
                return None;
            };
            reg.held.remove(&victim.id);
            reg.closing.insert(victim.id, Arc::clone(&victim));
            if victim.phase() == SERVED {
                victim.ask(MAKE_ROOM);
            } else {
                victim.kill();
            }
            made_room = true;
        }
        let id = reg.next_id;
        reg.next_id += 1;
        let conn = Arc::new(Conn::new(id, self.epoch));
        reg.held.insert(id, Arc::clone(&conn));
        oldest_unstarted(&mut reg);
        reg.unstarted.push_back(Arc::clone(&conn));
        drop(reg);
        if made_room {
            ConnectionStats::add(&self.stats.made_room);
            self.note(|u| u.made_room += 1);
        }
        ConnectionStats::add(&self.stats.accepted);
        ConnectionStats::add(&self.stats.open);
        Some((
            Slot {
                port: Arc::clone(self),
                id,
            },
            conn,
        ))
    }

    /// Counts a connection closed for sending no preface in time.
    pub fn no_preface(&self, peer: std::net::SocketAddr) {
        ConnectionStats::add(&self.stats.no_preface);
        tracing::debug!(service = %self.name, %peer, timeout = ?self.cfg.preface_timeout(), "closing a connection that sent no {} in time", self.words.opening);
        lock(&self.unreported).no_preface += 1;
    }

    /// Counts a failed accept (out of file descriptors, say).
    pub fn accept_failed(&self, e: &std::io::Error) {
        self.note(|u| {
            u.accept_failed += 1;
            u.last_accept_error = Some(e.to_string());
        });
    }

    /// Records what was turned away and warns at once unless a warning went out less than
    /// [`WARN_EVERY`] ago (then [`Port::warn_unreported`] tells it later).
    fn note(&self, add: impl FnOnce(&mut Unreported)) {
        let mut u = lock(&self.unreported);
        add(&mut u);
        if u.last_warning.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            self.warn(&mut u);
        }
    }

    /// Warns about connections turned away since the last warning, if any.
    pub fn warn_unreported(&self) {
        let mut u = lock(&self.unreported);
        if u.refused + u.made_room + u.accept_failed > 0 {
            self.warn(&mut u);
        }
    }

    fn warn(&self, u: &mut Unreported) {
        let since = u.last_warning.map(|at| at.elapsed());
        if u.accept_failed > 0 {
            tracing::warn!(
                service = %self.name,
                failed = u.accept_failed,
                error = u.last_accept_error.as_deref().unwrap_or(""),
                "cannot accept connections (out of file descriptors? see {} and the process's \
                 open-file limit)",
                self.words.cap_key,
            );
        }
        if u.refused + u.made_room > 0 {
            let over = since.map_or(String::new(), |s| format!(" over the last {s:.1?}"));
            tracing::warn!(
                service = %self.name,
                max_connections = self.cfg.max_connections,
                refused = u.refused,
                made_room = u.made_room,
                no_preface = u.no_preface,
                "{} at its connection cap ({}){over}: {} new connections closed at once, {} \
                 held ones (silent, or with no {} in progress) closed to make room",
                self.words.port,
                self.words.cap_key,
                u.refused,
                u.made_room,
                self.words.work,
            );
        }
        *u = Unreported {
            last_warning: Some(Instant::now()),
            ..Unreported::default()
        };
    }

    /// A receiver that turns true when the port stops.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// Tells every connection to go away (each closes once its calls are done); those that
    /// have not finished their preface have none and are closed at once.
    pub fn stop(&self) {
        self.stopping.send_replace(true);
        for conn in lock(&self.registry).held.values() {
            if conn.phase() != SERVED {
                conn.kill();
            }
        }
    }

    /// Cuts every connection still open.
    pub fn kill_all(&self) {
        let reg = lock(&self.registry);
        for conn in reg.held.values().chain(reg.closing.values()) {
            conn.kill();
        }
    }

    /// Resolves once no connection is open.
    pub async fn all_closed(&self) {
        loop {
            let left = self.left.notified();
            tokio::pin!(left);
            left.as_mut().enable();
            if self.stats.open() == 0 {
                return;
            }
            left.await;
        }
    }
}

/// The connection to close to make room: the oldest one that has not finished its preface,
/// else the one without a call for longest; never one with a call in progress.
fn victim(reg: &mut Registry) -> Option<Arc<Conn>> {
    if let Some(oldest) = oldest_unstarted(reg) {
        return Some(oldest);
    }
    // Rare (every held connection speaks HTTP/2): a pass over them.
    reg.held
        .values()
        .filter(|c| c.asked() == OPEN && c.calls() == 0)
        .min_by_key(|c| c.idle_since())
        .cloned()
}

/// The oldest held connection that has not finished its preface, dropping from the queue's
/// front those that did, left or were told to go: each connection is dropped once, so a flood
/// costs the same per connection whatever the cap.
fn oldest_unstarted(reg: &mut Registry) -> Option<Arc<Conn>> {
    while let Some(front) = reg.unstarted.front() {
        if front.phase() != SERVED && front.asked() == OPEN && reg.held.contains_key(&front.id) {
            return Some(Arc::clone(front));
        }
        reg.unstarted.pop_front();
    }
    None
}

/// A place at the port, given back when the connection closes.
pub struct Slot {
    port: Arc<Port>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut reg = lock(&self.port.registry);
        if reg.held.remove(&self.id).is_none() {
            reg.closing.remove(&self.id);
        }
        drop(reg);
        self.port.stats.open.fetch_sub(1, Ordering::Relaxed);
        self.port.left.notify_waiters();
    }
}

/// One connection's state, shared by its task, its I/O and its calls.
pub struct Conn {
    id: u64,
    epoch: Instant,
    pub accepted: Instant,
    phase: AtomicU8,
    calls: AtomicU32,
    /// When the last call ended (or the connection was accepted), in ms after `epoch`.
    idle_since_ms: AtomicU64,
    asked: AtomicU8,
    killed: AtomicBool,
    gone: AtomicBool,
    read_waker: AtomicWaker,
    write_waker: AtomicWaker,
    /// Told when a close is asked for, the last call ends, or the connection is gone.
    pub changed: Notify,
    /// Told when the connection has been asked to go away for room or idleness.
    pub(crate) going: Notify,
}

impl Conn {
    fn new(id: u64, epoch: Instant) -> Self {
        Self {
            id,
            epoch,
            accepted: Instant::now(),
            phase: AtomicU8::new(SILENT),
            calls: AtomicU32::new(0),
            idle_since_ms: AtomicU64::new(ms_since(epoch)),
            asked: AtomicU8::new(OPEN),
            killed: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            read_waker: AtomicWaker::new(),
            write_waker: AtomicWaker::new(),
            changed: Notify::new(),
            going: Notify::new(),
        }
    }

    pub fn phase(&self) -> u8 {
        self.phase.load(Ordering::Acquire)
    }

    pub fn set_phase(&self, phase: u8) {
        self.phase.store(phase, Ordering::Release);
    }

    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::Acquire)
    }

    fn idle_since(&self) -> u64 {
        self.idle_since_ms.load(Ordering::Acquire)
    }

    fn asked(&self) -> u8 {
        self.asked.load(Ordering::Acquire)
    }

    /// When the connection will have been idle for `idle`; `None` while a call is in progress.
    pub(crate) fn idle_deadline(&self, idle: Duration) -> Option<Instant> {
        (self.calls() == 0).then(|| self.epoch + Duration::from_millis(self.idle_since()) + idle)
    }

    /// Counts a call until the guard is dropped.
    pub fn begin_call(self: &Arc<Self>) -> CallGuard {
        self.calls.fetch_add(1, Ordering::AcqRel);
        CallGuard(Arc::clone(self))
    }

    /// Asks the connection to go away; the first reason given is kept.
    fn ask(&self, why: u8) {
        let _ = self
            .asked
            .compare_exchange(OPEN, why, Ordering::AcqRel, Ordering::Acquire);
        self.changed.notify_one();
    }

    pub(crate) fn ask_idle(&self) {
        self.ask(IDLE);
    }

    pub(crate) fn ask_stop(&self) {
        self.ask(STOP);
    }

    /// Whether it was told to make room.
    pub fn making_room(&self) -> bool {
        self.asked() == MAKE_ROOM
    }

    /// Cuts the connection: its reads and writes fail from now on.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.read_waker.wake();
        self.write_waker.wake();
        self.changed.notify_one();
    }

    /// Ready once the connection is cut; `read` picks which side's waker to keep.
    pub fn poll_killed(&self, cx: &mut Context<'_>, read: bool) -> Poll<()> {
        let waker = if read {
            &self.read_waker
        } else {
            &self.write_waker
        };
        waker.register(cx.waker());
        if self.killed.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Resolves once the connection is cut.
    pub async fn killed(&self) {
        std::future::poll_fn(|cx| self.poll_killed(cx, true)).await;
    }

    pub(crate) fn set_gone(&self) {
        self.gone.store(true, Ordering::Release);
        self.changed.notify_one();
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }
}

fn ms_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A call in progress on a connection.
pub struct CallGuard(Arc<Conn>);

impl Drop for CallGuard {
    fn drop(&mut self) {
        let conn = &self.0;
        // Written before the count drops, so whoever sees no call sees this end's time.
        conn.idle_since_ms
            .store(ms_since(conn.epoch), Ordering::Release);
        if conn.calls.fetch_sub(1, Ordering::AcqRel) == 1 {
            conn.changed.notify_one();
        }
    }
}

impl crate::counted::BodyGuard for CallGuard {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Log lines written while `f` runs.
    fn logged(f: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                lock(&self.0).extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || out.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        String::from_utf8_lossy(&lock(&buf.0)).into_owned()
    }

    #[test]
    fn a_flood_of_refusals_is_one_warning_then_one_summary() {
        let port = Port::new(
            "test",
            ConnectionConfig {
                max_connections: 1,
                ..ConnectionConfig::default()
            },
            Arc::default(),
        );
        // The one held connection is busy: nothing can make room.
        let (_slot, conn) = port.admit().unwrap();
        conn.set_phase(SERVED);
        let _call = conn.begin_call();
        let log = logged(|| {
            for _ in 0..500 {
                assert!(port.admit().is_none());
            }
        });
        assert_eq!(log.lines().count(), 1, "{log}");
        assert!(log.contains("1 new connections closed at once"), "{log}");
        let log = logged(|| port.warn_unreported());
        assert!(log.contains("499 new connections closed at once"), "{log}");
        assert_eq!(port.stats.refused(), 500);
        // Nothing new: nothing said.
        assert!(logged(|| port.warn_unreported()).is_empty());
    }
}
