use std::collections::HashSet;
use std::sync::Arc;

use super::*;
use crate::persist::StoredEvent;
use crate::persist::conformance::{self, Backend, event, task, write};
use crate::persist::pg_testkit::{PASSWORD, PgServer, require_postgres};
use droidmesh_proto::v1::{TaskState, TaskStatus, task_event};

/// A throwaway server; the store is opened by a replica that never runs a task.
struct Pg(PgServer);

impl Pg {
    fn start(test: &str) -> Option<Self> {
        require_postgres(test).then(|| Self(PgServer::start().unwrap()))
    }

    async fn store(&self, owner: &str, timeout: Duration) -> PostgresStore {
        PostgresStore::open(&self.0.url(), owner, timeout)
            .await
            .unwrap()
    }

    /// A plain connection, for what no store does.
    async fn sql(&self, sql: &str) {
        let (client, conn) = tokio_postgres::connect(&self.0.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client.batch_execute(sql).await.unwrap();
    }
}

#[tonic::async_trait]
impl Backend for Pg {
    async fn open(&self) -> Result<Box<dyn TaskStore>, StoreError> {
        let store = PostgresStore::open(&self.0.url(), "opener", Duration::from_secs(60)).await?;
        Ok(Box::new(store))
    }

    async fn set_schema_version(&self, version: u32) {
        self.sql(&format!("UPDATE droidmesh_schema SET version = {version}"))
            .await;
    }

    async fn log_bytes(&self) -> u64 {
        let (client, conn) = tokio_postgres::connect(&self.0.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        let row = client
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::int8",
                &[],
            )
            .await
            .unwrap();
        u64::try_from(row.get::<_, i64>(0)).unwrap()
    }

    async fn execute(&self, sql: &str) {
        self.sql(sql).await;
    }
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test]
        async fn $name() {
            let Some(pg) = Pg::start(stringify!($name)) else { return };
            conformance::$name(&pg).await;
        }
    )*};
}

conformance!(
    a_write_that_knows_the_creation_order_finds_its_task,
    events_are_kept_from_the_logs_first_seq_and_read_in_order,
    pages_run_newest_first_and_filter_by_state,
    pages_hold_only_the_tasks_of_one_tenant,
    retention_forgets_the_oldest_ended_and_never_a_running_task,
    a_task_left_unfinished_is_an_orphan_with_its_lease,
    a_store_of_a_newer_schema_is_refused,
    tokens_are_summed_per_tenant_from_a_time_on,
    a_running_tasks_request_is_written_once,
    a_store_missing_a_table_or_column_is_refused_naming_it,
);

const MINUTE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn replicas_starting_together_migrate_once() {
    let Some(pg) = Pg::start("replicas_starting_together_migrate_once") else {
        return;
    };
    let url = pg.0.url();
    let opened = futures_join(
        (0..4)
            .map(|i| {
                let url = url.clone();
                tokio::spawn(
                    async move { PostgresStore::open(&url, &format!("r{i}"), MINUTE).await },
                )
            })
            .collect(),
    )
    .await;
    for o in opened {
        o.unwrap();
    }
    let store = pg.store("r0", MINUTE).await;
    assert_eq!(store.count().await.unwrap(), 0);
}

async fn futures_join<T>(
    handles: Vec<tokio::task::JoinHandle<Result<T, StoreError>>>,
) -> Vec<Result<T, StoreError>> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test]
async fn exactly_one_live_replica_claims_each_task_of_a_stopped_one() {
    let Some(pg) = Pg::start("exactly_one_live_replica_claims_each_task_of_a_stopped_one") else {
        return;
    };
    let (a, b) = (pg.store("c1", MINUTE).await, pg.store("c2", MINUTE).await);
    for owner in ["dead", "live", "c1", "c2"] {
        a.heartbeat(owner).await.unwrap();
    }
    for i in 0..40 {
        a.create(&task(&format!("d{i}"), TaskState::Running), "dead")
            .await
            .unwrap();
    }
    a.create(&task("ended", TaskState::Succeeded), "dead")
        .await
        .unwrap();
    a.write(
        "dead",
        vec![write(task("ended", TaskState::Succeeded), vec![], Some(5))],
    )
    .await
    .unwrap();
    a.create(&task("l0", TaskState::Running), "live")
        .await
        .unwrap();
    // Alive, "dead" has no orphans to give.
    assert!(a.orphans("c1").await.unwrap().is_empty());
    pg.sql("UPDATE replicas SET seen_at = now() - interval '1 hour' WHERE owner = 'dead'")
        .await;
    // A stopped replica's own tasks are not its orphans to claim.
    let (x, y) = tokio::join!(a.orphans("c1"), b.orphans("c2"));
    let (x, y) = (x.unwrap(), y.unwrap());
    let mut claimed: Vec<String> = x.iter().chain(&y).map(|o| o.task.id.clone()).collect();
    let unique: HashSet<&String> = claimed.iter().collect();
    assert_eq!(unique.len(), claimed.len(), "claimed twice: {claimed:?}");
    claimed.sort();
    let mut expected: Vec<String> = (0..40).map(|i| format!("d{i}")).collect();
    expected.sort();
    assert_eq!(claimed, expected);
    assert!(
        x.iter()
            .chain(&y)
            .all(|o| o.lost_replica.as_deref() == Some("dead"))
    );
    // Claimed by live replicas, they are nobody's orphans any more.
    assert!(a.orphans("c1").await.unwrap().is_empty());
    assert!(b.orphans("c2").await.unwrap().is_empty());
}

#[tokio::test]
async fn a_replica_taken_for_stopped_cannot_overwrite_its_tasks() {
    let Some(pg) = Pg::start("a_replica_taken_for_stopped_cannot_overwrite_its_tasks") else {
        return;
    };
    let store = pg.store("c1", MINUTE).await;
    let mut t = task("t1", TaskState::Running);
    store.create(&t, "dead").await.unwrap();
    t.first_seq = 1;
    t.last_seq = 2;
    store
        .write(
            "dead",
            vec![write(t.clone(), (1..=2).map(event).collect(), None)],
        )
        .await
        .unwrap();
    // "dead" never renewed a heartbeat: c1 claims the task and ends it.
    let orphans = store.orphans("c1").await.unwrap();
    assert_eq!(orphans.len(), 1);
    let mut failed = t.clone();
    failed.state = TaskState::Failed as i32;
    failed.last_seq = 3;
    let end = StoredEvent {
        seq: 3,
        bytes: b"\x10\x03".to_vec(),
    };
    let lost = store
        .write("c1", vec![write(failed, vec![end.clone()], Some(9))])
        .await
        .unwrap();
    assert!(lost.is_empty());
    // The replica that was taken for stopped comes back with events of its own.
    t.last_seq = 4;
    let lost = store
        .write("dead", vec![write(t, (3..=4).map(event).collect(), None)])
        .await
        .unwrap();
    assert_eq!(lost, ["t1"]);
    let (_, now) = store.task("t1").await.unwrap().unwrap();
    assert_eq!((now.state(), now.last_seq), (TaskState::Failed, 3));
    let seqs: Vec<u64> = store
        .events("t1", 1, 10)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_database_is_refused_naming_it_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgresql://droidmesh:hunter2@127.0.0.1:{port}/tasks");
    // As the gateway opens it: from synchronous code inside the runtime.
    let e = match PostgresStore::open_blocking(&url, "me", MINUTE, None) {
        Ok(_) => panic!("nothing listens on {port}, yet the store opened"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.starts_with(&format!(
            "task store postgresql://droidmesh@127.0.0.1:{port}/tasks: cannot connect"
        )),
        "{e}"
    );
    assert!(e.contains("check that PostgreSQL runs there"), "{e}");
    assert!(!e.contains("hunter2"), "{e}");
}

#[tokio::test]
async fn a_wrong_password_is_refused_without_showing_either() {
    let Some(pg) = Pg::start("a_wrong_password_is_refused_without_showing_either") else {
        return;
    };
    let url = pg.0.url().replace(PASSWORD, "not-the-password");
    let e = match PostgresStore::open(&url, "me", MINUTE).await {
        Ok(_) => panic!("opened with a wrong password"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("password authentication failed"), "{e}");
    assert!(
        !e.contains("not-the-password") && !e.contains(PASSWORD),
        "{e}"
    );
}

/// The writer while the database is down: the task's events wait in memory, watchers see
/// nothing new, and once the database is back everything is written and shown, in order.
#[tokio::test]
async fn events_wait_in_memory_while_the_database_is_down() {
    let Some(mut pg) = Pg::start("events_wait_in_memory_while_the_database_is_down") else {
        return;
    };
    let backend = Arc::new(pg.store("me", MINUTE).await);
    let store = Arc::new(crate::store::Store::durable(
        crate::limits::Retention {
            keep: 10,
            keep_for_ms: u64::MAX,
        },
        crate::entry::Limits {
            max_events: 100,
            max_event_bytes: 1 << 20,
            max_queued: 4,
        },
        backend.clone(),
        "me".into(),
    ));
    crate::writer::spawn(&store);
    let (entry, _control) = store
        .create(task("t1", TaskState::Running), Default::default())
        .await
        .unwrap();
    let push = |n: u64| {
        entry.push(task_event::Kind::Status(TaskStatus {
            state: TaskState::Running as i32,
            detail: format!("step {n}"),
        }))
    };
    let mut seen = entry.subscribe();
    for n in 1..=3 {
        push(n);
    }
    tokio::time::timeout(Duration::from_secs(10), seen.wait_for(|s| *s >= 3))
        .await
        .unwrap()
        .unwrap();
    pg.0.stop().unwrap();
    for n in 4..=5 {
        push(n);
    }
    // Nothing new reaches a watcher while nothing can be written (watched for a second).
    let early = tokio::time::timeout(Duration::from_secs(1), seen.wait_for(|s| *s > 3))
        .await
        .is_ok();
    assert!(!early, "an event was shown before it was stored");
    assert_eq!(entry.events_from(1, 10).len(), 3);
    pg.0.start_again().unwrap();
    tokio::time::timeout(Duration::from_secs(30), seen.wait_for(|s| *s >= 5))
        .await
        .expect("the writer did not catch up within 30 s of the database's return")
        .unwrap();
    let stored: Vec<String> = backend
        .events("t1", 1, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| match e.kind {
            Some(task_event::Kind::Status(s)) => s.detail,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(stored, ["step 1", "step 2", "step 3", "step 4", "step 5"]);
}

/// A watcher on a replica that does not run the task follows it through a database restart:
/// its polls fail for a while, then it gets the events stored since, to the end.
#[tokio::test]
async fn a_watcher_on_another_replica_rides_out_a_database_restart() {
    let Some(mut pg) = Pg::start("a_watcher_on_another_replica_rides_out_a_database_restart")
    else {
        return;
    };
    let runner = pg.store("runner", MINUTE).await;
    let watcher: Arc<dyn TaskStore> = Arc::new(pg.store("watcher", MINUTE).await);
    let mut t = task("t1", TaskState::Running);
    runner.create(&t, "runner").await.unwrap();
    t.first_seq = 1;
    t.last_seq = 2;
    runner
        .write(
            "runner",
            vec![write(t.clone(), (1..=2).map(event).collect(), None)],
        )
        .await
        .unwrap();
    let (_, stored) = watcher.task("t1").await.unwrap().unwrap();
    let mut stream = crate::watch::watch_stored(watcher, stored, 1)
        .await
        .unwrap();
    let next = async |s: &mut crate::watch::EventStream| {
        use tokio_stream::StreamExt as _;
        tokio::time::timeout(Duration::from_secs(30), s.next())
            .await
            .expect("no event within 30 s")
            .expect("the stream ended")
            .expect("the stream failed")
    };
    assert_eq!(next(&mut stream).await.seq, 1);
    assert_eq!(next(&mut stream).await.seq, 2);
    pg.0.stop().unwrap();
    // Polls fail meanwhile (several, at 200 ms each).
    let quiet = tokio::time::timeout(Duration::from_secs(1), next(&mut stream))
        .await
        .is_err();
    assert!(quiet);
    pg.0.start_again().unwrap();
    t.last_seq = 3;
    let done = StoredEvent {
        seq: 3,
        bytes: droidmesh_proto::v1::TaskEvent {
            seq: 3,
            kind: Some(task_event::Kind::Completed(
                droidmesh_proto::v1::TaskCompleted::default(),
            )),
            ..Default::default()
        }
        .encode_to_vec(),
    };
    t.state = TaskState::Succeeded as i32;
    runner
        .write("runner", vec![write(t, vec![done], Some(10))])
        .await
        .unwrap();
    let last = next(&mut stream).await;
    assert_eq!(last.seq, 3);
    assert!(matches!(last.kind, Some(task_event::Kind::Completed(_))));
}

/// Claims do not wait for, nor take, tasks another replica is claiming at that moment: those
/// rows are locked by its transaction, and skipped.
#[tokio::test]
async fn a_claim_skips_the_tasks_another_replica_is_claiming() {
    let Some(pg) = Pg::start("a_claim_skips_the_tasks_another_replica_is_claiming") else {
        return;
    };
    let store = pg.store("c1", MINUTE).await;
    store.heartbeat("c2").await.unwrap();
    for id in ["t1", "t2"] {
        store
            .create(&task(id, TaskState::Running), "dead")
            .await
            .unwrap();
    }
    // Replica c2, in the middle of its claim, holds t1.
    let (mut other, conn) = tokio_postgres::connect(&pg.0.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let tx = other.transaction().await.unwrap();
    tx.execute("SELECT ord FROM tasks WHERE id = 't1' FOR UPDATE", &[])
        .await
        .unwrap();
    let claimed = tokio::time::timeout(Duration::from_secs(5), store.orphans("c1"))
        .await
        .expect("a claim waited for another replica's")
        .unwrap();
    let ids: Vec<&str> = claimed.iter().map(|o| o.task.id.as_str()).collect();
    assert_eq!(ids, ["t2"]);
    tx.execute("UPDATE tasks SET owner = 'c2' WHERE id = 't1'", &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(store.orphans("c1").await.unwrap().is_empty());
}

/// A replica that was taken for stopped (here: its heartbeat made stale) and whose task another
/// replica ended learns it from its next write, and stops the task's run.
#[tokio::test]
async fn a_replica_whose_task_was_taken_over_stops_its_run() {
    let Some(pg) = Pg::start("a_replica_whose_task_was_taken_over_stops_its_run") else {
        return;
    };
    let backend = Arc::new(pg.store("me", MINUTE).await);
    let store = Arc::new(crate::store::Store::durable(
        crate::limits::Retention {
            keep: 10,
            keep_for_ms: u64::MAX,
        },
        crate::entry::Limits {
            max_events: 100,
            max_event_bytes: 1 << 20,
            max_queued: 4,
        },
        backend.clone(),
        "me".into(),
    ));
    crate::writer::spawn(&store);
    let (entry, _control) = store
        .create(task("t1", TaskState::Running), Default::default())
        .await
        .unwrap();
    pg.sql("UPDATE replicas SET seen_at = now() - interval '1 hour' WHERE owner = 'me'")
        .await;
    let other = pg.store("other", MINUTE).await;
    assert_eq!(other.orphans("other").await.unwrap().len(), 1);
    entry.push(task_event::Kind::Status(TaskStatus {
        state: TaskState::Running as i32,
        detail: "still going".into(),
    }));
    let reason = tokio::time::timeout(Duration::from_secs(10), entry.cancelled())
        .await
        .expect("the run was not stopped");
    assert!(reason.contains("another gateway replica"), "{reason}");
}

#[tokio::test]
async fn a_database_of_schema_1_is_migrated_and_keeps_its_tasks_for_the_open_tenant() {
    use prost::Message as _;
    let Some(pg) = Pg::start("a_database_of_schema_1_is_migrated") else {
        return;
    };
    // A database as the first droidmesh with PostgreSQL left it, holding one ended task.
    pg.sql(MIGRATIONS[0]).await;
    // Its record holds the request, as every record did before schema 5.
    let old = Task {
        request: Some(droidmesh_proto::v1::TaskRequest {
            goal: "open Settings".into(),
            ..Default::default()
        }),
        ..task("old", TaskState::Succeeded)
    };
    let record: String = old
        .encode_to_vec()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    pg.sql(&format!(
        "CREATE TABLE droidmesh_schema (version INTEGER NOT NULL);
         INSERT INTO droidmesh_schema (version) VALUES (1);
         INSERT INTO tasks (id, state, owner, created_at_ms, ended_at_ms, record)
         VALUES ('old', {}, 'gone', 5, 6, '\\x{record}');",
        old.state
    ))
    .await;
    let store = pg.store("new", MINUTE).await;
    let page = store.page("", &[], u64::MAX, 10).await.unwrap();
    assert_eq!(
        page.into_iter().map(|(_, t)| t.id).collect::<Vec<_>>(),
        ["old"]
    );
    assert!(
        store
            .page("acme", &[], u64::MAX, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.task("old").await.unwrap().unwrap().1, old);
    // The columns later schemas added are there, with their defaults for old rows.
    assert_eq!(store.tokens_since("", 0).await.unwrap(), 0);
    let (client, conn) = tokio_postgres::connect(&pg.0.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let version: i32 = client
        .query_one("SELECT max(version) FROM droidmesh_schema", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, i32::try_from(SCHEMA_VERSION).unwrap());
    // And a new task is written and read as usual.
    let new = Task {
        request: old.request.clone(),
        ..task("new", TaskState::Running)
    };
    store.create(&new, "new").await.unwrap();
    assert_eq!(store.task("new").await.unwrap().unwrap().1, new);
}

#[tokio::test]
async fn sslmode_require_goes_over_tls_checking_the_servers_certificate() {
    if !require_postgres("sslmode_require_goes_over_tls") {
        return;
    }
    let pg = PgServer::start_tls().unwrap();
    let ca = pg.ca().unwrap();
    let url = format!("{}?sslmode=require", pg.url());
    let store = PostgresStore::open_with(&url, "me", MINUTE, Some(&ca))
        .await
        .unwrap();
    store
        .create(&task("t1", TaskState::Running), "me")
        .await
        .unwrap();
    assert_eq!(store.task("t1").await.unwrap().unwrap().1.id, "t1");
    // The server says the session is encrypted.
    let mut lent = store.pool.get().await.unwrap();
    let row = lent
        .conn()
        .unwrap()
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0), "the connection is not encrypted");
    lent.keep();

    // A certificate from a CA not given (the system's roots do not hold it) is refused,
    // naming the setting that fixes it, and the password is never shown.
    let e = match PostgresStore::open_with(&url, "me", MINUTE, None).await {
        Ok(_) => panic!("a certificate no CA vouches for was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("certificate"), "{e}");
    assert!(e.contains("gateway.store_ca"), "{e}");
    assert!(!e.contains(PASSWORD), "{e}");

    // Without sslmode=require the store connects in cleartext, as before.
    let plain = PostgresStore::open(&pg.url(), "me", MINUTE).await.unwrap();
    assert!(!plain.pool.tls());
}

#[tokio::test]
async fn sslmode_require_against_a_server_without_tls_is_refused() {
    let Some(pg) = Pg::start("sslmode_require_against_a_server_without_tls") else {
        return;
    };
    let url = format!("{}?sslmode=require", pg.0.url());
    let e = match PostgresStore::open_with(&url, "me", MINUTE, None).await {
        Ok(_) => panic!("a cleartext server was accepted with sslmode=require"),
        Err(e) => e.to_string(),
    };
    assert!(e.to_lowercase().contains("tls"), "{e}");
    assert!(!e.contains(PASSWORD), "{e}");
}

/// A task of `tenant` created at `at_ms`, running.
fn tenant_task(id: &str, tenant: &str, at_ms: i64) -> Task {
    Task {
        tenant: tenant.into(),
        created_at_ms: at_ms,
        ..task(id, TaskState::Running)
    }
}

fn over(e: StoreError) -> crate::limits::OverLimit {
    match e {
        StoreError::OverLimit(over) => over,
        other => panic!("not a limit: {other:?}"),
    }
}

/// Two replicas recording tasks of one tenant count each other's: a running task on one holds
/// the tenant's only place on the other until it has ended, and the tasks per minute are
/// counted across both, with the wait until the oldest leaves the minute.
#[tokio::test]
async fn tenant_limits_count_the_tasks_of_every_replica() {
    let Some(pg) = Pg::start("tenant_limits_count_the_tasks_of_every_replica") else {
        return;
    };
    let (a, b) = (pg.store("a", MINUTE).await, pg.store("b", MINUTE).await);
    let one = TenantLimits {
        max_running: 1,
        per_minute: 0,
    };
    let t0 = 1_000_000;
    let mut first = tenant_task("a1", "acme", t0);
    a.create_within(&first, "a", one).await.unwrap();
    let e = over(
        b.create_within(&tenant_task("b1", "acme", t0 + 10), "b", one)
            .await
            .unwrap_err(),
    );
    assert!(e.message.contains("1 tasks running"), "{}", e.message);
    assert_eq!(e.retry_after_secs, 5);
    // Nothing was recorded, and another tenant has its own count.
    assert!(b.task("b1").await.unwrap().is_none());
    b.create_within(&tenant_task("g1", "globex", t0 + 10), "b", one)
        .await
        .unwrap();
    // Once its state is final the first no longer counts as running.
    first.state = TaskState::Succeeded as i32;
    a.write("a", vec![write(first, Vec::new(), Some(t0 + 20))])
        .await
        .unwrap();
    b.create_within(&tenant_task("b1", "acme", t0 + 30), "b", one)
        .await
        .unwrap();

    let two_a_minute = TenantLimits {
        max_running: 0,
        per_minute: 2,
    };
    // acme created a1 at t0 and b1 at t0 + 30: the third within the minute waits for a1 to
    // leave it.
    let e = over(
        a.create_within(&tenant_task("a2", "acme", t0 + 40_000), "a", two_a_minute)
            .await
            .unwrap_err(),
    );
    assert!(
        e.message.contains("2 tasks in the last minute"),
        "{}",
        e.message
    );
    assert_eq!(e.retry_after_secs, 20);
    a.create_within(&tenant_task("a2", "acme", t0 + 60_000), "a", two_a_minute)
        .await
        .unwrap();
}

/// Replicas admitting one tenant's tasks at the same moment admit no more than its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_racing_for_a_tenants_last_places_admit_no_more_than_its_limit() {
    let Some(pg) =
        Pg::start("replicas_racing_for_a_tenants_last_places_admit_no_more_than_its_limit")
    else {
        return;
    };
    let stores: Vec<Arc<PostgresStore>> = vec![
        Arc::new(pg.store("r1", MINUTE).await),
        Arc::new(pg.store("r2", MINUTE).await),
    ];
    let limits = TenantLimits {
        max_running: 3,
        per_minute: 0,
    };
    // Rounds of a tenant each, every request started at once from both replicas.
    for round in 0..5 {
        let tenant = format!("tenant{round}");
        let start = Arc::new(tokio::sync::Barrier::new(32));
        let handles = (0..32)
            .map(|i| {
                let (store, start) = (stores[i % 2].clone(), start.clone());
                let owner = if i % 2 == 0 { "r1" } else { "r2" };
                let t = tenant_task(&format!("{tenant}-{i}"), &tenant, 1_000);
                tokio::spawn(async move {
                    start.wait().await;
                    store.create_within(&t, owner, limits).await
                })
            })
            .collect();
        let results = futures_join(handles).await;
        let admitted = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(admitted, 3, "round {round}: {results:?}");
        for r in results.into_iter().filter_map(Result::err) {
            assert!(over(r).message.contains("3 tasks running"));
        }
    }
    assert_eq!(stores[0].count().await.unwrap(), 15);
}

/// The tables and columns a database is checked for at start are exactly those its
/// migrations make (a column added by a later migration is checked for too).
#[tokio::test]
async fn a_new_database_has_exactly_the_columns_its_start_checks_for() {
    let Some(pg) = Pg::start("a_new_database_has_exactly_the_columns_its_start_checks_for") else {
        return;
    };
    drop(pg.store("me", MINUTE).await);
    let (client, conn) = tokio_postgres::connect(&pg.0.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut found: Vec<(String, String)> = client
        .query(COLUMNS, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    found.sort();
    let mut expected: Vec<(String, String)> = crate::persist::schema::POSTGRES
        .iter()
        .flat_map(|(t, cs)| cs.iter().map(move |c| ((*t).to_owned(), (*c).to_owned())))
        .collect();
    expected.sort();
    assert_eq!(found, expected);
}
