//! Watchers when the task store fails under them: a real SQLite file made full (its page
//! limit reached) or damaged (a table gone) while tasks run. Every watcher ends with
//! UNAVAILABLE naming the store, well within the deadline each test gives it; none waits in
//! silence.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::sync::Arc;
use std::time::Duration;

use droidmesh_proto::v1::{Task, TaskState, TaskStatus, task_event};
use tokio_stream::StreamExt as _;

use super::*;
use crate::entry::Limits;
use crate::limits::Retention;
use crate::persist::sqlite::SqliteStore;
use crate::store::Store;

/// Longest any step of these tests may take; every store error here must be answered well
/// within it (the writer's first try is immediate, its retries at most 5 s apart).
const WITHIN: Duration = Duration::from_secs(20);

struct Stack {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    sqlite: Arc<SqliteStore>,
    store: Arc<Store>,
}

fn stack() -> Stack {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.sqlite");
    let sqlite = Arc::new(SqliteStore::open(&path).unwrap());
    let store = Arc::new(Store::durable(
        Retention {
            keep: 100,
            keep_for_ms: u64::MAX,
        },
        Limits {
            max_events: 1_000,
            max_event_bytes: 16 << 20,
            max_queued: 4,
        },
        sqlite.clone(),
        "me".into(),
    ));
    crate::writer::spawn(&store);
    Stack {
        _dir: dir,
        path,
        sqlite,
        store,
    }
}

fn running(id: &str) -> Task {
    Task {
        id: id.into(),
        state: TaskState::Running as i32,
        created_at_ms: 1,
        ..Task::default()
    }
}

/// A status event large enough to need new pages of its own.
fn big(n: usize) -> task_event::Kind {
    task_event::Kind::Status(TaskStatus {
        state: TaskState::Running as i32,
        detail: format!("step {n} {}", "x".repeat(20_000)),
    })
}

async fn next(s: &mut EventStream) -> Option<Result<TaskEvent, Status>> {
    tokio::time::timeout(WITHIN, s.next())
        .await
        .expect("the watcher neither got an event nor ended")
}

/// The status a watcher's stream ends with, skipping the events it still shows.
async fn end_of(s: &mut EventStream) -> Status {
    loop {
        match next(s).await {
            Some(Ok(_)) => continue,
            Some(Err(status)) => return status,
            None => panic!("the stream ended without saying why"),
        }
    }
}

#[tokio::test]
async fn a_watcher_ends_unavailable_naming_the_store_once_it_is_full() {
    let s = stack();
    let (entry, _control) = s
        .store
        .create(running("t1"), Default::default())
        .await
        .unwrap();
    entry.push(big(1));
    let mut stream = watch(entry.clone(), 1, false).unwrap();
    assert_eq!(next(&mut stream).await.unwrap().unwrap().seq, 1);
    // The file may not grow any more: what a full disk does to it.
    s.sqlite.execute("PRAGMA max_page_count = 1").await.unwrap();
    for n in 2..=4 {
        entry.push(big(n));
    }
    let status = end_of(&mut stream).await;
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    let m = status.message();
    assert!(m.contains(&s.path.display().to_string()), "{m}");
    assert!(m.contains("full"), "{m}");
    assert!(!m.contains("damaged") && !m.contains("move it away"), "{m}");

    // A watcher that comes now is refused at once (HTTP answers 503), not left waiting.
    let refused = match watch(entry.clone(), 1, false) {
        Ok(_) => panic!("a watcher was taken while the store cannot keep the task's events"),
        Err(e) => tonic::Status::from(e),
    };
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("full"), "{refused:?}");
}

#[tokio::test]
async fn a_run_task_stream_ends_and_cancels_its_task_when_the_store_loses_a_table() {
    let s = stack();
    let (entry, _control) = s
        .store
        .create(running("t1"), Default::default())
        .await
        .unwrap();
    let mut stream = watch(entry.clone(), 1, true).unwrap();
    s.sqlite.execute("DROP TABLE events").await.unwrap();
    entry.push(big(1));
    let status = end_of(&mut stream).await;
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("no such table: events"),
        "{status:?}"
    );
    // RunTask's task lives as long as its call: the call is over, so is the task.
    let reason = tokio::time::timeout(WITHIN, entry.cancelled())
        .await
        .expect("the task of a RunTask whose stream failed was not cancelled");
    assert!(reason.contains("task store"), "{reason}");
}

#[tokio::test]
async fn a_watcher_of_a_stored_task_ends_at_once_when_the_store_lost_its_events() {
    let s = stack();
    let (entry, _control) = s
        .store
        .create(running("t1"), Default::default())
        .await
        .unwrap();
    entry.push(big(1));
    let mut seen = entry.subscribe();
    tokio::time::timeout(WITHIN, seen.wait_for(|v| *v >= 1))
        .await
        .unwrap()
        .unwrap();
    let (_, task) = s.sqlite.task("t1").await.unwrap().unwrap();
    s.sqlite.execute("DROP TABLE events").await.unwrap();
    // Read from the store, as a task run elsewhere (or ended) is: the first read fails, and
    // it will not work by asking again, so the call is refused rather than polled for a minute.
    let backend: Arc<dyn crate::persist::TaskStore> = s.sqlite.clone();
    let started = std::time::Instant::now();
    let status = match watch_stored(backend, task, 1).await {
        Ok(mut stream) => end_of(&mut stream).await,
        Err(e) => tonic::Status::from(e),
    };
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("no such table: events"),
        "{status:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// A failure that may pass by itself (a database restarting): the watcher waits for it, and
/// ends with it once it has lasted [`STORE_OUTAGE`] (time paused: the runtime jumps to each
/// timer).
#[tokio::test(start_paused = true)]
async fn a_watcher_waits_out_a_passing_store_failure_for_a_minute_then_ends() {
    let dirty = Arc::new(crate::entry::Dirty::default());
    let limits = Limits {
        max_events: 100,
        max_event_bytes: 1 << 20,
        max_queued: 4,
    };
    let (entry, _control) = TaskEntry::new(running("t1"), 1, limits, Some(dirty.clone()));
    let entry = Arc::new(entry);
    let mut stream = watch(entry.clone(), 1, false).unwrap();
    entry.push(big(1));
    dirty.failing.send_replace(Some(WriteFailure {
        error: StoreError::Failed {
            store: "postgres://u@db/tasks".into(),
            message: "cannot connect: connection refused".into(),
            fault: Fault::Passing,
        },
        since: tokio::time::Instant::now(),
    }));
    let early = tokio::time::timeout(STORE_OUTAGE - Duration::from_secs(1), stream.next()).await;
    assert!(
        early.is_err(),
        "the watcher ended before the outage bound: {early:?}"
    );
    let status = match tokio::time::timeout(Duration::from_secs(2), stream.next()).await {
        Ok(Some(Err(status))) => status,
        other => panic!("the watcher did not end with the error: {other:?}"),
    };
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("postgres://u@db/tasks"),
        "{status:?}"
    );
    assert!(
        status.message().contains("connection refused"),
        "{status:?}"
    );
}
