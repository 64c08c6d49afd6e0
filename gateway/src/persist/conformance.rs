//! What every task store does, whatever its backend: the bodies of tests that
//! `sqlite_tests.rs` and `postgres_tests.rs` run against their own store.
use droidmesh_proto::v1::{
    LeaseRef, Task, TaskEvent, TaskRequest, TaskState, TaskStatus, task_event,
};
use prost::Message as _;

use super::{Retention, SCHEMA_VERSION, StoreError, StoredEvent, TaskStore, TaskWrite};

/// A backend under test: opens its store (again, on the same data) and can pretend that a
/// newer droidmesh wrote it.
#[tonic::async_trait]
pub(crate) trait Backend: Send + Sync {
    async fn open(&self) -> Result<Box<dyn TaskStore>, StoreError>;
    async fn set_schema_version(&self, version: u32);
    /// Bytes the store has written to its log so far (SQLite's WAL, PostgreSQL's WAL).
    async fn log_bytes(&self) -> u64;
    /// Runs `sql` on the store's data behind the store's back (as a user's own tool would).
    async fn execute(&self, sql: &str);
}

pub(crate) fn task(id: &str, state: TaskState) -> Task {
    Task {
        id: id.into(),
        state: state as i32,
        created_at_ms: 1,
        ..Task::default()
    }
}

pub(crate) fn event(seq: u64) -> StoredEvent {
    StoredEvent {
        seq,
        bytes: TaskEvent {
            seq,
            kind: Some(task_event::Kind::Status(TaskStatus {
                state: TaskState::Running as i32,
                detail: format!("event {seq}"),
            })),
            ..TaskEvent::default()
        }
        .encode_to_vec(),
    }
}

pub(crate) fn write(task: Task, events: Vec<StoredEvent>, ended_at_ms: Option<i64>) -> TaskWrite {
    TaskWrite {
        task,
        ord: None,
        events,
        lease: None,
        ended_at_ms,
    }
}

/// A write as the gateway's writer makes it: knowing the task's creation order.
pub(crate) async fn a_write_that_knows_the_creation_order_finds_its_task(b: &dyn Backend) {
    let store = b.open().await.unwrap();
    let mut t = task("t1", TaskState::Running);
    let ord = store.create(&t, "me").await.unwrap();
    let other = store
        .create(&task("t2", TaskState::Running), "me")
        .await
        .unwrap();
    t.last_seq = 2;
    t.first_seq = 1;
    t.steps = 7;
    let mut w = write(t, (1..=2).map(event).collect(), None);
    w.ord = Some(ord);
    store.write("me", vec![w]).await.unwrap();
    assert_eq!(store.task("t1").await.unwrap().unwrap().1.steps, 7);
    assert_eq!(seqs(store.events("t1", 1, 100).await.unwrap()), [1, 2]);
    // The other task is untouched.
    assert_eq!(store.task("t2").await.unwrap().unwrap().1.steps, 0);
    assert!(store.events("t2", 1, 100).await.unwrap().is_empty());
    // A task forgotten meanwhile is skipped, events and all.
    let mut gone = write(task("t3", TaskState::Running), vec![event(1)], None);
    gone.ord = Some(other + 1_000);
    store.write("me", vec![gone]).await.unwrap();
    assert!(store.task("t3").await.unwrap().is_none());
    assert_eq!(store.count().await.unwrap(), 2);
}

fn seqs(evs: Vec<TaskEvent>) -> Vec<u64> {
    evs.into_iter().map(|e| e.seq).collect()
}

pub(crate) async fn events_are_kept_from_the_logs_first_seq_and_read_in_order(b: &dyn Backend) {
    let store = b.open().await.unwrap();
    let mut t = task("t1", TaskState::Running);
    assert_eq!(store.create(&t, "me").await.unwrap(), 1);
    t.last_seq = 3;
    t.first_seq = 1;
    let lost = store
        .write(
            "me",
            vec![write(t.clone(), (1..=3).map(event).collect(), None)],
        )
        .await
        .unwrap();
    assert!(lost.is_empty(), "{lost:?}");
    // The log dropped its two oldest events meanwhile.
    t.last_seq = 5;
    t.first_seq = 3;
    store
        .write("me", vec![write(t, (4..=5).map(event).collect(), None)])
        .await
        .unwrap();
    assert_eq!(seqs(store.events("t1", 1, 100).await.unwrap()), [3, 4, 5]);
    assert_eq!(seqs(store.events("t1", 4, 1).await.unwrap()), [4]);
    let evs = store.events("t1", 5, 10).await.unwrap();
    assert_eq!(evs[0].task_id, "t1");
    assert_eq!(
        evs[0].kind,
        Some(task_event::Kind::Status(TaskStatus {
            state: TaskState::Running as i32,
            detail: "event 5".into(),
        }))
    );
    assert!(store.events("nobody", 1, 10).await.unwrap().is_empty());
    let (ord, back) = store.task("t1").await.unwrap().unwrap();
    assert_eq!((ord, back.last_seq, back.first_seq), (1, 5, 3));
    assert!(store.task("nobody").await.unwrap().is_none());
}

pub(crate) async fn pages_run_newest_first_and_filter_by_state(b: &dyn Backend) {
    let store = b.open().await.unwrap();
    for (i, state) in [TaskState::Succeeded, TaskState::Running, TaskState::Failed]
        .into_iter()
        .enumerate()
    {
        store
            .create(&task(&format!("t{i}"), state), "me")
            .await
            .unwrap();
    }
    let ids = |rows: Vec<(u64, Task)>| rows.into_iter().map(|(_, t)| t.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.page("", &[], u64::MAX, 10).await.unwrap()),
        ["t2", "t1", "t0"]
    );
    assert_eq!(ids(store.page("", &[], 3, 10).await.unwrap()), ["t1", "t0"]);
    let ended = [TaskState::Succeeded as i32, TaskState::Failed as i32];
    assert_eq!(
        ids(store.page("", &ended, u64::MAX, 1).await.unwrap()),
        ["t2"]
    );
    assert_eq!(
        ids(store.page("", &ended, u64::MAX, 10).await.unwrap()),
        ["t2", "t0"]
    );
    assert_eq!(store.count().await.unwrap(), 3);
}

pub(crate) async fn pages_hold_only_the_tasks_of_one_tenant(b: &dyn Backend) {
    let store = b.open().await.unwrap();
    for i in 0..6 {
        let mut t = task(&format!("t{i}"), TaskState::Running);
        t.tenant = if i % 2 == 0 { "acme" } else { "globex" }.into();
        store.create(&t, "me").await.unwrap();
    }
    let ids = |rows: Vec<(u64, Task)>| rows.into_iter().map(|(_, t)| t.id).collect::<Vec<_>>();
    // A full page of one tenant, and the next page from its last row: none of the other's.
    let first = store.page("acme", &[], u64::MAX, 2).await.unwrap();
    let last_ord = first.last().unwrap().0;
    assert_eq!(ids(first), ["t4", "t2"]);
    assert_eq!(
        ids(store.page("acme", &[], last_ord, 2).await.unwrap()),
        ["t0"]
    );
    assert_eq!(
        ids(store.page("globex", &[], u64::MAX, 10).await.unwrap()),
        ["t5", "t3", "t1"]
    );
    assert!(store.page("", &[], u64::MAX, 10).await.unwrap().is_empty());
    let (_, back) = store.task("t3").await.unwrap().unwrap();
    assert_eq!(back.tenant, "globex");
}

pub(crate) async fn retention_forgets_the_oldest_ended_and_never_a_running_task(b: &dyn Backend) {
    let store = b.open().await.unwrap();
    for i in 0..4 {
        let t = task(&format!("t{i}"), TaskState::Succeeded);
        store.create(&t, "gone").await.unwrap();
        let ended = (i != 1).then_some(1_000 + i64::from(i));
        let t = Task {
            last_seq: 1,
            first_seq: 1,
            ..t
        };
        store
            .write("gone", vec![write(t, vec![event(1)], ended)])
            .await
            .unwrap();
    }
    // t1 has not ended; keep the newest ended one (t3).
    let keep = Retention {
        keep: 1,
        keep_for_ms: u64::MAX,
    };
    assert_eq!(store.prune(keep, 2_000).await.unwrap(), 2);
    assert!(store.task("t0").await.unwrap().is_none());
    assert!(store.events("t0", 1, 10).await.unwrap().is_empty());
    assert!(store.task("t1").await.unwrap().is_some());
    assert!(store.task("t3").await.unwrap().is_some());
    // By age: t3 ended at 1003; 10 ms later with 5 ms kept, it goes.
    let young = Retention {
        keep: 100,
        keep_for_ms: 5,
    };
    assert_eq!(store.prune(young, 1_013).await.unwrap(), 1);
    assert_eq!(store.count().await.unwrap(), 1);
    let orphans = store.orphans("alive").await.unwrap();
    assert_eq!(orphans.len(), 1);
    assert_eq!(orphans[0].task.id, "t1");
}

pub(crate) async fn a_task_left_unfinished_is_an_orphan_with_its_lease(b: &dyn Backend) {
    let store = b.open().await.unwrap();
    store
        .create(&task("t1", TaskState::Running), "gone")
        .await
        .unwrap();
    store
        .create(&task("t2", TaskState::Succeeded), "gone")
        .await
        .unwrap();
    let mut w = write(task("t1", TaskState::Running), vec![], None);
    w.lease = Some(LeaseRef {
        serial: "emulator-5554".into(),
        lease_id: "l1".into(),
    });
    let ended = write(task("t2", TaskState::Succeeded), vec![], Some(5));
    store.write("gone", vec![w, ended]).await.unwrap();
    drop(store);
    let store = b.open().await.unwrap();
    let orphans = store.orphans("alive").await.unwrap();
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    assert_eq!(orphans[0].task.id, "t1");
    let lease = orphans[0].lease.as_ref().unwrap();
    assert_eq!(
        (lease.serial.as_str(), lease.lease_id.as_str()),
        ("emulator-5554", "l1")
    );
}

pub(crate) async fn a_store_of_a_newer_schema_is_refused(b: &dyn Backend) {
    drop(b.open().await.unwrap());
    b.set_schema_version(SCHEMA_VERSION + 1).await;
    let e = match b.open().await {
        Ok(_) => panic!(
            "a store of schema version {} was opened",
            SCHEMA_VERSION + 1
        ),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains(&format!(
            "written by a newer droidmesh (schema version {}",
            SCHEMA_VERSION + 1
        )),
        "{e}"
    );
}

/// A store that lacks a table or a column this build's schema has (dropped by hand, or put
/// back from a partial copy) is refused at start, naming each one missing, rather than taken
/// and left to fail every write while watchers wait.
pub(crate) async fn a_store_missing_a_table_or_column_is_refused_naming_it(b: &dyn Backend) {
    let store = b.open().await.unwrap();
    store
        .create(&task("kept", TaskState::Succeeded), "me")
        .await
        .unwrap();
    drop(store);
    let refused = async || match b.open().await {
        Ok(_) => panic!("a store missing part of its schema was opened"),
        Err(e) => e.to_string(),
    };
    b.execute("ALTER TABLE tasks DROP COLUMN tokens").await;
    let e = refused().await;
    assert!(e.contains("column tasks.tokens is missing"), "{e}");
    assert!(e.contains("damaged"), "{e}");
    b.execute("DROP TABLE events").await;
    let e = refused().await;
    assert!(e.contains("table events is missing"), "{e}");
    assert!(e.contains("column tasks.tokens is missing"), "{e}");
    assert!(
        e.contains(&format!("schema version {SCHEMA_VERSION}")),
        "{e}"
    );
}

pub(crate) async fn tokens_are_summed_per_tenant_from_a_time_on(b: &dyn Backend) {
    use droidmesh_proto::v1::TokenUsage;
    let store = b.open().await.unwrap();
    let used = |id: &str, tenant: &str, created: i64, input: u64, output: u64| Task {
        tenant: tenant.into(),
        created_at_ms: created,
        usage: Some(TokenUsage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: input / 2,
            calls: 1,
        }),
        ..task(id, TaskState::Running)
    };
    let tasks = [
        used("a1", "acme", 1_000, 100, 20),
        used("a2", "acme", 5_000, 300, 50),
        used("g1", "globex", 5_000, 1_000, 0),
        task("a3", TaskState::Running),
    ];
    for t in &tasks {
        store.create(t, "me").await.unwrap();
    }
    // Counted from the records written, not the ones created.
    assert_eq!(store.tokens_since("acme", 0).await.unwrap(), 0);
    let batch = tasks
        .iter()
        .map(|t| write(t.clone(), vec![], None))
        .collect();
    store.write("me", batch).await.unwrap();
    assert_eq!(store.tokens_since("acme", 0).await.unwrap(), 470);
    assert_eq!(store.tokens_since("acme", 1_001).await.unwrap(), 350);
    assert_eq!(store.tokens_since("globex", 0).await.unwrap(), 1_000);
    assert_eq!(store.tokens_since("nobody", 0).await.unwrap(), 0);
    // A later record replaces the count of its task.
    let more = used("a2", "acme", 5_000, 600, 50);
    store
        .write("me", vec![write(more, vec![], Some(9_000))])
        .await
        .unwrap();
    assert_eq!(store.tokens_since("acme", 1_001).await.unwrap(), 650);
    // Counts no store could add up saturate rather than fail.
    for id in ["h1", "h2"] {
        let t = used(id, "hog", 1, u64::MAX, u64::MAX);
        store.create(&t, "me").await.unwrap();
        store
            .write("me", vec![write(t, vec![], None)])
            .await
            .unwrap();
    }
    assert!(store.tokens_since("hog", 0).await.unwrap() >= 1 << 62);
}

/// A request of `kib` KiB that does not compress (a goal of pseudo-random letters).
fn big_request(kib: usize) -> TaskRequest {
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let goal = (0..kib * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + u8::try_from(x % 26).unwrap_or(0))
        })
        .collect();
    TaskRequest {
        goal,
        app_card: "Settings: the Wi-Fi switch is on the first screen".into(),
        ..TaskRequest::default()
    }
}

/// While a task runs the gateway writes its record without the request, which the store was
/// given when the task was created and keeps apart: each write of a step costs the step, not
/// the request again. Every read (the task, a page, an orphan) has the request whole; once the
/// task has ended its record holds the request (compacted) and nothing is kept apart.
pub(crate) async fn a_running_tasks_request_is_written_once(b: &dyn Backend) {
    const KIB: usize = 200;
    const STEPS: u64 = 20;
    let store = b.open().await.unwrap();
    let mut t = task("big", TaskState::Running);
    t.request = Some(big_request(KIB));
    let ord = store.create(&t, "gone").await.unwrap();
    let before = b.log_bytes().await;
    for step in 1..=STEPS {
        // The record changes size as a task runs (its memory, plan, usage), which makes a
        // store write it whole rather than only the pages that changed.
        let mut running = Task {
            steps: u32::try_from(step).unwrap(),
            last_seq: step,
            first_seq: 1,
            memory: "noted. ".repeat(usize::try_from(step).unwrap()),
            ..t.clone()
        };
        running.request = None;
        let mut w = write(running, vec![event(step)], None);
        w.ord = Some(ord);
        store.write("gone", vec![w]).await.unwrap();
    }
    let grew = b.log_bytes().await.saturating_sub(before);
    // Each write rewriting the request would add STEPS x 200 KiB = 4 MB.
    assert!(
        grew < (KIB * 1024) as u64,
        "{STEPS} writes of a running task with a {KIB} KiB request grew the store's log by {grew} bytes"
    );
    let (_, back) = store.task("big").await.unwrap().unwrap();
    assert_eq!(back.steps, 20);
    assert_eq!(
        back.request, t.request,
        "the task read back lost its request"
    );
    let page = store.page("", &[], u64::MAX, 10).await.unwrap();
    assert_eq!(page[0].1.request, t.request, "a page lost the request");
    assert_eq!(seqs(store.events("big", 1, 100).await.unwrap()).len(), 20);
    // Ended (as the gateway ends it: compacted), the record holds the request itself.
    let mut ended = Task {
        state: TaskState::Succeeded as i32,
        ..back.clone()
    };
    crate::record::compact(&mut ended);
    assert!(ended.request.as_ref().unwrap().goal.len() < 4 * 1024);
    store
        .write("gone", vec![write(ended.clone(), vec![], Some(9))])
        .await
        .unwrap();
    let (_, back) = store.task("big").await.unwrap().unwrap();
    assert_eq!(back.request, ended.request);
    // An orphan's record comes with its request too.
    let mut lost = task("lost", TaskState::Running);
    lost.request = Some(big_request(1));
    store.create(&lost, "gone").await.unwrap();
    let orphans = store.orphans("alive").await.unwrap();
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    assert_eq!(orphans[0].task.request, lost.request);
}
