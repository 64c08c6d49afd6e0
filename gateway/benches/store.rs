//! Cost of one event through the task store: a task's event is appended in memory, written by
//! the store's writer (one transaction per batch) and only then shown to its watchers; the
//! figure is the time from the append until every one of `WATCHERS` watch streams has the
//! event. Two patterns: one event at a time (each waits for the previous to be seen), and
//! bursts of `BURST` events appended back to back (the writer batches them; the figure is the
//! burst's time divided by its events). For the in-memory store (no writer), SQLite (WAL,
//! `synchronous = NORMAL`) in a temporary directory, and PostgreSQL (a throwaway server on
//! loopback with fsync on, as in production; skipped, saying so, without its binaries).
//! Run with `cargo bench -p droidmesh-gateway --bench store`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use droidmesh_gateway::entry::Limits;
use droidmesh_gateway::limits::Retention;
use droidmesh_gateway::persist::TaskStore;
use droidmesh_gateway::persist::pg_testkit::{PgServer, bin_dir};
use droidmesh_gateway::persist::postgres::PostgresStore;
use droidmesh_gateway::persist::sqlite::SqliteStore;
use droidmesh_gateway::store::Store;
use droidmesh_gateway::watch::EventStream;
use droidmesh_proto::v1::{Task, TaskState, TaskStatus, task_event};
use tokio_stream::StreamExt as _;

const WATCHERS: usize = 4;
const SINGLES: usize = 400;
const BURST: usize = 100;
const BURSTS: usize = 20;

fn store(backend: Option<Arc<dyn TaskStore>>) -> Arc<Store> {
    let retention = Retention {
        keep: 1_000,
        keep_for_ms: u64::MAX,
    };
    let limits = Limits {
        max_events: 100_000,
        max_event_bytes: 64 << 20,
        max_queued: 4,
    };
    let store = Arc::new(match backend {
        Some(b) => Store::durable(retention, limits, b, "bench".into()),
        None => Store::new(retention, limits),
    });
    droidmesh_gateway::writer::spawn(&store);
    store
}

/// Waits until every watcher has had the event `seq`.
async fn seen_by_all(watchers: &mut [EventStream], seq: u64) {
    for w in watchers.iter_mut() {
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(30), w.next())
                .await
                .expect("an event was not seen within 30 s")
                .unwrap()
                .unwrap();
            if ev.seq >= seq {
                break;
            }
        }
    }
}

fn p(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

async fn measure(name: &str, store: Arc<Store>) {
    let task = Task {
        id: format!("task-{name}"),
        state: TaskState::Running as i32,
        ..Task::default()
    };
    let (entry, _control) = store.create(task, Default::default()).await.unwrap();
    let mut watchers: Vec<EventStream> = (0..WATCHERS)
        .map(|_| droidmesh_gateway::watch::watch(entry.clone(), 1, false).unwrap())
        .collect();
    let event = |n: usize| {
        task_event::Kind::Status(TaskStatus {
            state: TaskState::Running as i32,
            detail: format!("step {n}: the Wi-Fi switch is on the Network & internet page"),
        })
    };
    let mut n = 0;
    let mut singles = Vec::with_capacity(SINGLES);
    for _ in 0..SINGLES {
        n += 1;
        let t = Instant::now();
        let seq = entry.push(event(n));
        seen_by_all(&mut watchers, seq).await;
        singles.push(t.elapsed());
    }
    let mut bursts = Vec::with_capacity(BURSTS);
    for _ in 0..BURSTS {
        let t = Instant::now();
        let mut seq = 0;
        for _ in 0..BURST {
            n += 1;
            seq = entry.push(event(n));
        }
        seen_by_all(&mut watchers, seq).await;
        bursts.push(t.elapsed() / BURST as u32);
    }
    singles.sort();
    bursts.sort();
    println!(
        "{name:<10} one at a time: p50 {:>9.1?}  p90 {:>9.1?} per event | bursts of {BURST}: p50 {:>8.1?}  p90 {:>8.1?} per event  ({WATCHERS} watchers)",
        p(&singles, 0.5),
        p(&singles, 0.9),
        p(&bursts, 0.5),
        p(&bursts, 0.9),
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        measure("memory", store(None)).await;
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteStore::open(&dir.path().join("bench.sqlite")).unwrap();
        measure("sqlite", store(Some(Arc::new(sqlite)))).await;
        if bin_dir().is_none() {
            println!("postgres   skipped: PostgreSQL's initdb and pg_ctl are not installed");
            return;
        }
        let pg = PgServer::start_with(true).unwrap();
        let backend = PostgresStore::open(&pg.url(), "bench", Duration::from_secs(60))
            .await
            .unwrap();
        measure("postgres", store(Some(Arc::new(backend)))).await;
    });
}
