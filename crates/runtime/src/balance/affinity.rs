//! Calls with an affinity key (the `droidmesh-affinity` metadata, a task id): a key's first
//! call goes to the replica the key ranks highest by rendezvous (highest-random-weight) hashing
//! among the healthy replicas; the channel remembers where each key went (for a bounded number
//! of keys) and sends its later calls there while that replica is healthy, so a replica that
//! joins takes no key already placed, and when a replica goes only the keys it held move (each
//! to its next-ranked healthy replica). A replica at capacity keeps its keys: the call waits
//! for room, as a keyless call would. A call that lands elsewhere than its key's last call
//! carries `droidmesh-affinity-moved: <earlier replica> (<why it was left>)`, so the server can
//! say what it does not have. Calls without a key are balanced by load as before.
use super::pool::{Seen, Snapshot};
use super::replica::{BoxError, Replica};
use super::{PICK_TICK, no_replica};
use http::HeaderValue;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;
use tonic::body::Body;

/// The metadata a caller sets to keep its calls on one replica (see [`set_affinity`]).
pub const AFFINITY_HEADER: &str = "droidmesh-affinity";

/// The metadata the balancer adds to a keyed call that lands on another replica than the
/// key's previous call: that replica's address and why it was left.
pub const MOVED_HEADER: &str = "droidmesh-affinity-moved";

/// Longest key sent as it is; longer keys, and keys that are not visible ASCII, are sent as a
/// hash of themselves.
const MAX_KEY_BYTES: usize = 128;

/// Keys whose last replica is remembered; beyond, the least recently used eighth is forgotten
/// (a forgotten key that moves is not told it moved).
const MAX_REMEMBERED: usize = 16_384;

/// Longest reason carried in the moved header, in bytes.
const MAX_WHY_BYTES: usize = 200;

/// Asks the balancer to send this call where the earlier calls with `key` went (a task id,
/// say). A channel to one address ignores it.
pub fn set_affinity<T>(request: &mut tonic::Request<T>, key: &str) {
    let shown = key.trim();
    if shown.is_empty() {
        return;
    }
    let plain = shown.len() <= MAX_KEY_BYTES && shown.bytes().all(|b| b.is_ascii_graphic());
    let text = if plain {
        shown.to_owned()
    } else {
        format!("h{:016x}", fnv1a(FNV_OFFSET, shown.as_bytes()))
    };
    if let Ok(value) = text.parse() {
        request.metadata_mut().insert(AFFINITY_HEADER, value);
    }
}

/// The key's hash, when the request names one.
pub(crate) fn key_of(request: &http::Request<Body>) -> Option<u64> {
    let value = request.headers().get(AFFINITY_HEADER)?.as_bytes();
    let value = value.trim_ascii();
    (!value.is_empty()).then(|| fnv1a(FNV_OFFSET, value))
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, 64 bit, continuing from `h`: stable across builds, so every client ranks alike.
fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// The key's weight on a replica: the key and the address hashed together, then mixed (the
/// SplitMix64 finaliser) so that neighbouring addresses rank independently.
pub(crate) fn weight(key: u64, addr: &SocketAddr) -> u64 {
    let mut z = fnv1a(key, addr.to_string().as_bytes());
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The replica the key's last call went to while it is healthy, else the healthy replica the
/// key ranks highest on, if any is healthy.
fn pick(key: u64, last: Option<SocketAddr>, snapshot: &Snapshot) -> Option<Seen> {
    let healthy = || snapshot.replicas.iter().filter(|r| r.state.healthy());
    if let Some(seen) = last.and_then(|a| healthy().find(|r| r.addr == a)) {
        return Some(seen.clone());
    }
    healthy()
        .max_by_key(|r| (weight(key, &r.addr), r.addr))
        .cloned()
}

/// Where each key's last call went, for a bounded number of keys.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    inner: Mutex<Remembered>,
}

#[derive(Debug, Default)]
struct Remembered {
    last: HashMap<u64, (SocketAddr, u64)>,
    tick: u64,
}

impl Memory {
    /// Where the key's last call went, if it is remembered.
    fn last(&self, key: u64) -> Option<SocketAddr> {
        let m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        m.last.get(&key).map(|(a, _)| *a)
    }

    /// Records that `key` went to `addr`; returns where it went before, if elsewhere.
    fn went(&self, key: u64, addr: SocketAddr) -> Option<SocketAddr> {
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        m.tick += 1;
        let tick = m.tick;
        if m.last.len() >= MAX_REMEMBERED && !m.last.contains_key(&key) {
            forget_oldest(&mut m.last);
        }
        let before = m.last.insert(key, (addr, tick)).map(|(a, _)| a);
        before.filter(|b| *b != addr)
    }
}

/// Forgets the least recently used eighth of the keys.
fn forget_oldest(last: &mut HashMap<u64, (SocketAddr, u64)>) {
    let mut ticks: Vec<u64> = last.values().map(|(_, t)| *t).collect();
    let cut = ticks.len() / 8;
    if cut == 0 {
        last.clear();
        return;
    }
    let (_, threshold, _) = ticks.select_nth_unstable(cut);
    let threshold = *threshold;
    last.retain(|_, (_, t)| *t >= threshold);
}

/// What an affinity call needs from its channel.
pub(crate) struct Route {
    pub(crate) snapshot: watch::Receiver<Snapshot>,
    pub(crate) memory: std::sync::Arc<Memory>,
    pub(crate) pick_timeout: Duration,
    pub(crate) capacity_wait: Duration,
    pub(crate) what: std::sync::Arc<str>,
}

/// Sends the call to the key's replica once it is ready: looks again every tick, so a
/// replica that turns unhealthy meanwhile hands the key on; fails as a keyless call does when
/// no replica takes it in time.
pub(crate) async fn call(
    key: u64,
    mut req: http::Request<Body>,
    route: Route,
) -> Result<http::Response<Body>, BoxError> {
    let started = tokio::time::Instant::now();
    loop {
        let last = route.memory.last(key);
        let chosen = pick(key, last, &route.snapshot.borrow());
        let tick = PICK_TICK.min(route.pick_timeout);
        match chosen {
            Some(seen) => {
                let mut replica = Replica {
                    channel: seen.channel.clone(),
                    state: seen.state.clone(),
                };
                let ready = std::future::poll_fn(|cx| tower::Service::poll_ready(&mut replica, cx));
                match tokio::time::timeout(tick, ready).await {
                    Ok(Ok(())) => {
                        if let Some(before) = route.memory.went(key, seen.addr) {
                            let why = why_left(before, &route.snapshot.borrow());
                            tracing::info!(from = %before, to = %seen.addr, why = %why,
                                "a keyed call moved to another replica");
                            if let Ok(v) = HeaderValue::from_str(&format!("{before} ({why})")) {
                                req.headers_mut().insert(MOVED_HEADER, v);
                            }
                        }
                        return tower::Service::call(&mut replica, req).await;
                    }
                    Ok(Err(e)) => return Err(e),
                    Err(_) => {}
                }
            }
            None => tokio::time::sleep(tick).await,
        }
        let waited = started.elapsed();
        let snapshot = route.snapshot.borrow();
        let any_healthy = snapshot.replicas.iter().any(|r| r.state.healthy());
        let limit = if any_healthy {
            route.capacity_wait
        } else {
            route.pick_timeout
        };
        if waited >= limit {
            return Err(Box::new(no_replica(&route.what, waited, &snapshot)) as BoxError);
        }
    }
}

/// Why a key's earlier replica was left, in words fit for a header value.
fn why_left(addr: SocketAddr, snapshot: &Snapshot) -> String {
    let why = match snapshot.replicas.iter().find(|r| r.addr == addr) {
        Some(r) if r.state.healthy() => "it was not healthy when the call was placed".to_owned(),
        Some(r) => format!("it is out: {}", r.state.why()),
        None => "it left the resolved set".to_owned(),
    };
    let mut shown: String = why
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if shown.len() > MAX_WHY_BYTES {
        shown.truncate(MAX_WHY_BYTES);
        shown.push_str("...");
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(n: u16) -> Vec<SocketAddr> {
        (0..n)
            .map(|i| SocketAddr::from(([10, 0, (i >> 8) as u8, i as u8], 50054)))
            .collect()
    }

    fn top(key: u64, among: &[SocketAddr]) -> SocketAddr {
        *among.iter().max_by_key(|a| (weight(key, a), **a)).unwrap()
    }

    #[test]
    fn keys_spread_evenly_and_only_a_gone_replicas_keys_move() {
        let five = addrs(5);
        let keys: Vec<u64> = (0..5000)
            .map(|i| fnv1a(FNV_OFFSET, format!("task-{i}").as_bytes()))
            .collect();
        let mut per = HashMap::new();
        for k in &keys {
            *per.entry(top(*k, &five)).or_insert(0usize) += 1;
        }
        // 1000 expected on each; the binomial spread is about 28.
        assert!(per.values().all(|n| (850..=1150).contains(n)), "{per:?}");
        let four: Vec<SocketAddr> = five[..4].to_vec();
        for k in &keys {
            let before = top(*k, &five);
            let after = top(*k, &four);
            if before != five[4] {
                assert_eq!(before, after, "a key of a replica that stayed moved");
            }
        }
    }

    #[test]
    fn memory_says_where_a_key_was_and_stays_bounded() {
        let m = Memory::default();
        let [a, b] = [addrs(2)[0], addrs(2)[1]];
        assert_eq!(m.went(7, a), None);
        assert_eq!(m.went(7, a), None);
        assert_eq!(m.went(7, b), Some(a));
        for k in 0..(MAX_REMEMBERED as u64 * 2) {
            m.went(1000 + k, a);
        }
        let len = m.inner.lock().unwrap().last.len();
        assert!(len <= MAX_REMEMBERED, "{len}");
        // The most recent keys are kept.
        assert_eq!(m.went(1000 + MAX_REMEMBERED as u64 * 2 - 1, b), Some(a));
    }

    #[test]
    fn keys_that_are_not_plain_ascii_are_sent_hashed() {
        let mut r = tonic::Request::new(());
        set_affinity(&mut r, " task-1 ");
        assert_eq!(r.metadata().get(AFFINITY_HEADER).unwrap(), "task-1");
        set_affinity(&mut r, "tâche 1");
        let sent = r.metadata().get(AFFINITY_HEADER).unwrap().to_str().unwrap();
        assert!(sent.starts_with('h') && sent.len() == 17, "{sent}");
        let mut empty = tonic::Request::new(());
        set_affinity(&mut empty, "  ");
        assert!(empty.metadata().get(AFFINITY_HEADER).is_none());
    }
}
