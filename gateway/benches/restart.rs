//! Restart to serving with 10,000 stored tasks (SQLite): opening the store (its `PRAGMA
//! quick_check` included, also timed alone), listing what a stopped gateway left unfinished,
//! the first page of ListTasks and the oldest task's record, in this process (a process start
//! adds its own time).
//!
//! Run with `cargo bench -p droidmesh-gateway --bench restart`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Instant;

use droidmesh_gateway::entry::Limits;
use droidmesh_gateway::limits::Retention;
use droidmesh_gateway::persist::sqlite::SqliteStore;
use droidmesh_gateway::persist::{StoredEvent, TaskStore, TaskWrite};
use droidmesh_gateway::store::Store;
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

fn thought(i: u64, pad: usize) -> task_event::Kind {
    task_event::Kind::Thought(Thought {
        text: format!(
            "step {i}: the Wi-Fi switch is on the Network & internet page, so open it first{}",
            " the screen shows".repeat(pad / 17)
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

/// Fills a store with `n` ended tasks of 12 events each (`pad` bytes more text in each) and 3
/// unfinished ones.
async fn fill(path: &std::path::Path, n: usize, pad: usize) {
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
                    kind: Some(thought(seq, pad)),
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
            ord: None,
            events,
            lease: None,
            ended_at_ms: ended.then_some(1_000 + i as i64),
        });
        if batch.len() == 500 {
            backend
                .write("gone", std::mem::take(&mut batch))
                .await
                .unwrap();
        }
    }
    backend.write("gone", batch).await.unwrap();
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    println!("restart to serving with 10,000 stored tasks");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restart.sqlite");
    // The check a store passes at start, alone: on these tasks, and on tasks whose events
    // carry 1 KB more text each (what a screen's observation adds).
    let padded = dir.path().join("padded.sqlite");
    fill(&padded, 10_000, 1_000).await;
    fill(&path, 10_000, 0).await;
    for p in [&path, &padded] {
        let size = std::fs::metadata(p).unwrap().len();
        for _ in 0..5 {
            let c = rusqlite::Connection::open(p).unwrap();
            let t = Instant::now();
            let ok: String = c.query_row("PRAGMA quick_check", [], |r| r.get(0)).unwrap();
            assert_eq!(ok, "ok");
            println!(
                "  quick_check of {:.1} MB {:>6.1} ms",
                size as f64 / 1e6,
                t.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    let mut samples = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let backend: Arc<dyn TaskStore> = Arc::new(SqliteStore::open(&path).unwrap());
        let opened = t.elapsed();
        let store = Store::durable(KEEP, LIMITS, backend.clone(), "bench".into());
        // No device service here: the recovered tasks held no lease.
        let orphans = backend.orphans("bench").await.unwrap();
        let recovered = t.elapsed();
        let (page, _) = store.page_any("", &[], 100, "").await.unwrap();
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
