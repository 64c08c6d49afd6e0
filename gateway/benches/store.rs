//! The task store's costs, in one run:
//! 1. Append + fan-out: the time from `push` of an event to a watcher seeing it (the writer
//!    has committed it to the store), p50 and p99, for one task alone (a transaction per
//!    event) and for 50 tasks pushing at once (batched), with the memory-only store beside
//!    them; and the writer's cost per event (wall time / events) in the batched case.
//! 2. Restart to serving with 10,000 stored tasks: opening the store, recovering what was
//!    left unfinished, the first page of ListTasks and the oldest task's record.
//!
//! Run with `cargo bench -p droidmesh-gateway --bench store`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use droidmesh_gateway::persist::sqlite::SqliteStore;
use droidmesh_gateway::persist::{StoredEvent, TaskStore, TaskWrite, persister};
use droidmesh_gateway::store::{Limits, Retention, Store, TaskEntry};
use droidmesh_proto::v1::{Task, TaskEvent, TaskState, Thought, task_event};
use prost::Message as _;

const LIMITS: Limits = Limits {
    max_events: 2_000,
    max_event_bytes: 2 << 20,
    max_queued: 8,
};
const KEEP: Retention = Retention {
    keep: 100_000,
    keep_for_ms: u64::MAX / 2,
};

fn thought(i: u64) -> task_event::Kind {
    task_event::Kind::Thought(Thought {
        text: format!(
            "step {i}: the Wi-Fi switch is on the Network & internet page, so open it first"
        ),
        ..Thought::default()
    })
}

fn task(i: usize) -> Task {
    Task {
        id: format!("task-{i:032x}"),
        state: TaskState::Running as i32,
        created_at_ms: 1,
        ..Task::default()
    }
}

fn pct(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// Pushes `per_task` events to each of `tasks` tasks at once, each task waiting to see its
/// event before the next; returns every push-to-visible latency and the wall time.
async fn fan_out(store: &Arc<Store>, tasks: usize, per_task: u64) -> (Vec<Duration>, Duration) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let mut entries: Vec<Arc<TaskEntry>> = Vec::new();
    for _ in 0..tasks {
        let i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        entries.push(store.create(task(i)).await.unwrap().0);
    }
    let started = Instant::now();
    let runs: Vec<_> = entries
        .into_iter()
        .map(|entry| {
            tokio::spawn(async move {
                let mut seen = entry.subscribe();
                let mut lat = Vec::new();
                for i in 0..per_task {
                    let t = Instant::now();
                    let seq = entry.push(thought(i));
                    tokio::time::timeout(Duration::from_secs(10), seen.wait_for(|s| *s >= seq))
                        .await
                        .expect("an event never became visible")
                        .unwrap();
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut all = Vec::new();
    for r in runs {
        all.extend(r.await.unwrap());
    }
    let wall = started.elapsed();
    all.sort();
    (all, wall)
}

fn report(what: &str, (lat, wall): &(Vec<Duration>, Duration)) {
    println!(
        "  {what:<34} p50 {:>7.1} µs  p99 {:>7.1} µs  {:>7.1} µs/event wall ({} events)",
        pct(lat, 50).as_secs_f64() * 1e6,
        pct(lat, 99).as_secs_f64() * 1e6,
        wall.as_secs_f64() * 1e6 / lat.len() as f64,
        lat.len()
    );
}

fn sqlite(dir: &std::path::Path) -> Arc<Store> {
    let backend = SqliteStore::open(&dir.join("bench.sqlite")).unwrap();
    let store = Arc::new(Store::durable(
        KEEP,
        LIMITS,
        Arc::new(backend),
        "bench".into(),
    ));
    persister::spawn(&store);
    store
}

/// Fills a store with `n` ended tasks of 12 events each and 3 unfinished ones.
async fn fill(path: &std::path::Path, n: usize) {
    let backend = SqliteStore::open(path).unwrap();
    let mut batch = Vec::new();
    for i in 0..n + 3 {
        let mut t = task(i);
        backend.create(&t, "gone").await.unwrap();
        let events: Vec<StoredEvent> = (1..=12)
            .map(|seq| StoredEvent {
                seq,
                bytes: TaskEvent {
                    seq,
                    kind: Some(thought(seq)),
                    ..TaskEvent::default()
                }
                .encode_to_vec(),
            })
            .collect();
        t.first_seq = 1;
        t.last_seq = 12;
        let ended = i < n;
        if ended {
            t.state = TaskState::Succeeded as i32;
        }
        batch.push(TaskWrite {
            task: t,
            events,
            lease: None,
            ended_at_ms: ended.then_some(1_000 + i as i64),
        });
        if batch.len() == 500 {
            backend.write(std::mem::take(&mut batch)).await.unwrap();
        }
    }
    backend.write(batch).await.unwrap();
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    println!("1. append + fan-out: push of an event to a watcher seeing it");
    let memory = Arc::new(Store::new(KEEP, LIMITS));
    report("memory, 50 tasks at once", &fan_out(&memory, 50, 200).await);
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(dir.path());
    // Warm up the file and the statement cache.
    fan_out(&store, 1, 50).await;
    report(
        "sqlite, 1 task (a commit per event)",
        &fan_out(&store, 1, 2_000).await,
    );
    report(
        "sqlite, 50 tasks at once (batched)",
        &fan_out(&store, 50, 200).await,
    );
    drop(store);

    println!("2. restart to serving with 10,000 stored tasks");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restart.sqlite");
    fill(&path, 10_000).await;
    let mut samples = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let backend: Arc<dyn TaskStore> = Arc::new(SqliteStore::open(&path).unwrap());
        let opened = t.elapsed();
        let store = Store::durable(KEEP, LIMITS, backend.clone(), "bench".into());
        // No device service here: the recovered tasks held no lease.
        let orphans = backend.orphans("bench").await.unwrap();
        let recovered = t.elapsed();
        let (page, _) = store.page_any(&[], 100, "").await.unwrap();
        assert_eq!(page.len(), 100);
        let oldest = store.find(&task(0).id).await.unwrap();
        assert!(oldest.is_some());
        samples.push((opened, recovered, t.elapsed(), orphans.len()));
    }
    for (opened, recovered, serving, orphans) in samples {
        println!(
            "  open {:>6.1} ms  orphans listed ({orphans}) {:>6.1} ms  first page + oldest task {:>6.1} ms",
            opened.as_secs_f64() * 1e3,
            recovered.as_secs_f64() * 1e3,
            serving.as_secs_f64() * 1e3
        );
    }
}
