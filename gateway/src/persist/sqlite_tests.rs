use super::*;
use crate::persist::conformance::{self, Backend};

/// A SQLite file in a temporary directory.
struct Sqlite(tempfile::TempDir);

impl Sqlite {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> PathBuf {
        self.0.path().join("tasks.sqlite")
    }
}

#[tonic::async_trait]
impl Backend for Sqlite {
    async fn open(&self) -> Result<Box<dyn TaskStore>, StoreError> {
        Ok(Box::new(SqliteStore::open(&self.path())?))
    }

    async fn set_schema_version(&self, version: u32) {
        let c = Connection::open(self.path()).unwrap();
        c.pragma_update(None, "user_version", version).unwrap();
    }

    async fn log_bytes(&self) -> u64 {
        // The WAL grows until a checkpoint (thousands of pages away in these tests).
        let wal = self.0.path().join("tasks.sqlite-wal");
        std::fs::metadata(wal).map_or(0, |m| m.len())
    }

    async fn execute(&self, sql: &str) {
        Connection::open(self.path())
            .unwrap()
            .execute_batch(sql)
            .unwrap();
    }
}

fn refusal(path: &Path) -> String {
    match SqliteStore::open(path) {
        Ok(_) => panic!("{} was opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn a_write_that_knows_the_creation_order_finds_its_task() {
    conformance::a_write_that_knows_the_creation_order_finds_its_task(&Sqlite::new()).await;
}

#[tokio::test]
async fn events_are_kept_from_the_logs_first_seq_and_read_in_order() {
    conformance::events_are_kept_from_the_logs_first_seq_and_read_in_order(&Sqlite::new()).await;
}

#[tokio::test]
async fn pages_run_newest_first_and_filter_by_state() {
    conformance::pages_run_newest_first_and_filter_by_state(&Sqlite::new()).await;
}

#[tokio::test]
async fn pages_hold_only_the_tasks_of_one_tenant() {
    conformance::pages_hold_only_the_tasks_of_one_tenant(&Sqlite::new()).await;
}

#[tokio::test]
async fn retention_forgets_the_oldest_ended_and_never_a_running_task() {
    conformance::retention_forgets_the_oldest_ended_and_never_a_running_task(&Sqlite::new()).await;
}

#[tokio::test]
async fn a_task_left_unfinished_is_an_orphan_with_its_lease() {
    conformance::a_task_left_unfinished_is_an_orphan_with_its_lease(&Sqlite::new()).await;
}

#[tokio::test]
async fn tokens_are_summed_per_tenant_from_a_time_on() {
    conformance::tokens_are_summed_per_tenant_from_a_time_on(&Sqlite::new()).await;
}

#[tokio::test]
async fn a_running_tasks_request_is_written_once() {
    conformance::a_running_tasks_request_is_written_once(&Sqlite::new()).await;
}

#[tokio::test]
async fn a_store_missing_a_table_or_column_is_refused_naming_it() {
    conformance::a_store_missing_a_table_or_column_is_refused_naming_it(&Sqlite::new()).await;
}

#[tokio::test]
async fn a_store_of_a_newer_schema_is_refused() {
    conformance::a_store_of_a_newer_schema_is_refused(&Sqlite::new()).await;
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
fn a_store_belongs_to_one_process_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.sqlite");
    let first = SqliteStore::open(&path).unwrap();
    let e = refusal(&path);
    assert!(e.contains("locked by another process"), "{e}");
    assert!(e.contains("another gateway on the same file"), "{e}");
    drop(first);
    assert!(SqliteStore::open(&path).is_ok());
}

#[tokio::test]
async fn a_store_of_schema_1_keeps_its_tasks_for_the_open_tenant() {
    use prost::Message as _;
    let s = Sqlite::new();
    {
        let c = Connection::open(s.path()).unwrap();
        c.execute_batch(open::MIGRATIONS[0]).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        // Its record holds the request, as every record did before schema 5.
        let t = droidmesh_proto::v1::Task {
            request: Some(droidmesh_proto::v1::TaskRequest {
                goal: "open Settings".into(),
                ..Default::default()
            }),
            ..conformance::task("old", droidmesh_proto::v1::TaskState::Succeeded)
        };
        c.execute(
            "INSERT INTO tasks (id, state, owner, created_at_ms, record) VALUES (?1, ?2, 'x', 1, ?3)",
            params![t.id, t.state, t.encode_to_vec()],
        )
        .unwrap();
    }
    let store = s.open().await.unwrap();
    let page = store.page("", &[], u64::MAX, 10).await.unwrap();
    assert_eq!(
        page.into_iter()
            .map(|(_, t)| (t.id, t.request.map(|r| r.goal)))
            .collect::<Vec<_>>(),
        [("old".to_owned(), Some("open Settings".to_owned()))]
    );
    assert!(
        store
            .page("acme", &[], u64::MAX, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn writes_queued_together_commit_together_and_one_that_fails_fails_alone() {
    use droidmesh_proto::v1::TaskState;
    let s = Sqlite::new();
    let store = std::sync::Arc::new(SqliteStore::open(&s.path()).unwrap());
    let first = conformance::task("first", TaskState::Running);
    store.create(&first, "me").await.unwrap();
    // Holds the connection's thread while the next writes queue up behind it, so they run
    // as one group.
    let (held, hold) = std::sync::mpsc::channel::<()>();
    let busy = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .run(move |_| {
                    let _ = hold.recv_timeout(std::time::Duration::from_secs(10));
                    Ok(())
                })
                .await
        })
    };
    let writes: Vec<_> = ["a", "first", "b"]
        .into_iter()
        .map(|id| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .create(&conformance::task(id, TaskState::Pending), "me")
                    .await
            })
        })
        .collect();
    // Every write is queued before the thread is let go.
    let queued = || MAX_QUEUED - store.jobs.as_ref().unwrap().capacity();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while queued() < 3 {
        assert!(std::time::Instant::now() < deadline, "{} queued", queued());
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    held.send(()).unwrap();
    busy.await.unwrap().unwrap();
    let mut answers = Vec::new();
    for w in writes {
        answers.push(w.await.unwrap());
    }
    assert!(answers[0].is_ok(), "{answers:?}");
    let dup = answers[1].as_ref().unwrap_err().to_string();
    assert!(dup.contains("UNIQUE"), "{dup}");
    assert!(answers[2].is_ok(), "{answers:?}");
    for id in ["a", "b", "first"] {
        assert!(
            store.task(id).await.unwrap().is_some(),
            "{id} is not stored"
        );
    }
    assert_eq!(store.count().await.unwrap(), 3);
}

/// The tables and columns a store is checked for at start are exactly those its migrations
/// make (a column added by a later migration is checked for too).
#[tokio::test]
async fn a_new_store_has_exactly_the_columns_its_start_checks_for() {
    let s = Sqlite::new();
    drop(s.open().await.unwrap());
    let c = Connection::open(s.path()).unwrap();
    let mut found = super::sqlite_fault::columns(&c).unwrap();
    found.retain(|(t, _)| !t.starts_with("sqlite_"));
    found.sort();
    let mut expected: Vec<(String, String)> = crate::persist::schema::SQLITE
        .iter()
        .flat_map(|(t, cs)| cs.iter().map(move |c| ((*t).to_owned(), (*c).to_owned())))
        .collect();
    expected.sort();
    assert_eq!(found, expected);
}
