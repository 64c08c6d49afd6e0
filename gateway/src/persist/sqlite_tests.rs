use super::*;
use crate::persist::StoredEvent;
use droidmesh_proto::v1::{TaskState, TaskStatus, task_event};

fn task(id: &str, state: TaskState) -> Task {
    Task {
        id: id.into(),
        state: state as i32,
        created_at_ms: 1,
        ..Task::default()
    }
}

fn event(seq: u64) -> StoredEvent {
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

fn write(task: Task, events: Vec<StoredEvent>, ended_at_ms: Option<i64>) -> TaskWrite {
    TaskWrite {
        task,
        events,
        lease: None,
        ended_at_ms,
    }
}

fn open(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(&dir.path().join("tasks.sqlite")).unwrap()
}

fn refusal(path: &Path) -> String {
    match SqliteStore::open(path) {
        Ok(_) => panic!("{} was opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn events_are_kept_from_the_logs_first_seq_and_read_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let mut t = task("t1", TaskState::Running);
    assert_eq!(store.create(&t, "me").await.unwrap(), 1);
    t.last_seq = 3;
    t.first_seq = 1;
    store
        .write(vec![write(t.clone(), (1..=3).map(event).collect(), None)])
        .await
        .unwrap();
    // The log dropped its two oldest events meanwhile.
    t.last_seq = 5;
    t.first_seq = 3;
    store
        .write(vec![write(t, (4..=5).map(event).collect(), None)])
        .await
        .unwrap();
    let seqs = |evs: Vec<TaskEvent>| evs.into_iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(seqs(store.events("t1", 1, 100).await.unwrap()), [3, 4, 5]);
    assert_eq!(seqs(store.events("t1", 4, 1).await.unwrap()), [4]);
    let evs = store.events("t1", 5, 10).await.unwrap();
    assert_eq!(evs[0].task_id, "t1");
    assert!(store.events("nobody", 1, 10).await.unwrap().is_empty());
    let (ord, back) = store.task("t1").await.unwrap().unwrap();
    assert_eq!((ord, back.last_seq, back.first_seq), (1, 5, 3));
}

#[tokio::test]
async fn pages_run_newest_first_and_filter_by_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
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
        ids(store.page(&[], u64::MAX, 10).await.unwrap()),
        ["t2", "t1", "t0"]
    );
    assert_eq!(ids(store.page(&[], 3, 10).await.unwrap()), ["t1", "t0"]);
    let ended = [TaskState::Succeeded as i32, TaskState::Failed as i32];
    assert_eq!(ids(store.page(&ended, u64::MAX, 1).await.unwrap()), ["t2"]);
    assert_eq!(store.count().await.unwrap(), 3);
}

#[tokio::test]
async fn retention_forgets_the_oldest_ended_and_never_a_running_task() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    for i in 0..4 {
        let t = task(&format!("t{i}"), TaskState::Succeeded);
        store.create(&t, "me").await.unwrap();
        let ended = (i != 1).then_some(1_000 + i64::from(i));
        let t = Task {
            last_seq: 1,
            first_seq: 1,
            ..t
        };
        store
            .write(vec![write(t, vec![event(1)], ended)])
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
    let orphans = store.orphans("me").await.unwrap();
    assert_eq!(orphans.len(), 1);
    assert_eq!(orphans[0].task.id, "t1");
}

#[tokio::test]
async fn a_task_left_unfinished_is_an_orphan_with_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    store
        .create(&task("t1", TaskState::Running), "me")
        .await
        .unwrap();
    let mut w = write(task("t1", TaskState::Running), vec![], None);
    w.lease = Some(LeaseRef {
        serial: "emulator-5554".into(),
        lease_id: "l1".into(),
    });
    store.write(vec![w]).await.unwrap();
    drop(store);
    let store = open(&dir);
    let orphans = store.orphans("someone else").await.unwrap();
    assert_eq!(orphans.len(), 1);
    assert_eq!(orphans[0].lease.as_ref().unwrap().lease_id, "l1");
}

#[test]
fn a_damaged_file_is_refused_naming_it_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.sqlite");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let e = refusal(&path);
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains("not a SQLite database or it is damaged"), "{e}");
    assert!(e.contains("move it away"), "{e}");
}

#[test]
fn a_store_of_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.sqlite");
    drop(SqliteStore::open(&path).unwrap());
    let c = Connection::open(&path).unwrap();
    c.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(c);
    let e = refusal(&path);
    assert!(
        e.contains(&format!(
            "written by a newer droidmesh (schema version {}",
            SCHEMA_VERSION + 1
        )),
        "{e}"
    );
}

#[test]
fn a_store_belongs_to_one_process_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.sqlite");
    let first = SqliteStore::open(&path).unwrap();
    let e = refusal(&path);
    assert!(e.contains("in use by another gateway process"), "{e}");
    drop(first);
    assert!(SqliteStore::open(&path).is_ok());
}
