//! The task store's use of its connection pool, against a real PostgreSQL: what a caller is
//! told when every connection is busy or the database does not answer, that a connection cut
//! off mid-operation is not lent again, and that a restart of the database costs no operation.
use super::*;
use crate::persist::pg_pool::{POOL_SIZE, WAIT};
use crate::persist::pg_testkit::{PgServer, require_postgres};

const MINUTE: Duration = Duration::from_secs(60);

async fn started(test: &str) -> Option<(PgServer, PostgresStore)> {
    if !require_postgres(test) {
        return None;
    }
    let pg = PgServer::start().unwrap();
    let store = PostgresStore::open(&pg.url(), "me", MINUTE).await.unwrap();
    Some((pg, store))
}

/// A plain connection to `pg`, its I/O driven by a task of its own.
async fn plain(pg: &PgServer) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

fn failed(e: StoreError) -> (String, Fault) {
    let fault = e.fault();
    match (e.to_string(), fault) {
        (text, Some(fault)) => (text, fault),
        (text, None) => panic!("not a store failure: {text}"),
    }
}

/// All connections lent out: the next caller waits [`WAIT`] (paused time, auto-advanced) and
/// is told so, as a failure that may pass; once one is given back it is served.
#[tokio::test]
async fn a_caller_finding_every_connection_busy_is_told_so_after_the_wait() {
    let Some((pg, store)) = started("a_caller_finding_every_connection_busy").await else {
        return;
    };
    let mut held = Vec::new();
    for _ in 0..POOL_SIZE {
        held.push(store.pool.get().await.unwrap());
    }
    tokio::time::pause();
    let start = tokio::time::Instant::now();
    let e = store.count().await.unwrap_err();
    let waited = start.elapsed();
    tokio::time::resume();
    let (text, fault) = failed(e);
    assert_eq!(
        text,
        format!(
            "task store ({}): all {POOL_SIZE} connections stayed busy for 5s",
            redact_url(&pg.url())
        )
    );
    assert_eq!(fault, Fault::Passing);
    assert!(
        waited >= WAIT && waited < WAIT + Duration::from_secs(1),
        "{waited:?}"
    );
    for lent in held {
        lent.keep();
    }
    assert_eq!(store.count().await.unwrap(), 0);
}

/// An operation the database does not answer (its table locked by another session) ends at
/// the store's deadline, as a failure that may pass; its connection, which still waits for that
/// answer, is closed rather than lent to the next operation, which is served while the lock is
/// still held.
#[tokio::test]
async fn an_operation_without_an_answer_is_cut_off_and_its_connection_not_lent_again() {
    let Some((pg, store)) = started("an_operation_without_an_answer_is_cut_off").await else {
        return;
    };
    let store = std::sync::Arc::new(store);
    let mut other = plain(&pg).await;
    let lock = other.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let start = tokio::time::Instant::now();
    let count = tokio::spawn({
        let store = store.clone();
        async move { store.count().await }
    });
    // Time is paused only once the count waits for the lock: the connection is made, and the
    // query sent, in real time.
    let watcher = plain(&pg).await;
    let waiting = "SELECT count(*) FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND application_name = 'droidmesh-gateway'";
    let seen_by = std::time::Instant::now() + Duration::from_secs(10);
    while watcher
        .query_one(waiting, &[])
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 0
    {
        assert!(
            std::time::Instant::now() < seen_by,
            "the count never waited for the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::pause();
    let e = count.await.unwrap().unwrap_err();
    let waited = start.elapsed();
    tokio::time::resume();
    let (text, fault) = failed(e);
    assert_eq!(
        text,
        format!(
            "task store ({}): no answer within 15s",
            redact_url(&pg.url())
        )
    );
    assert_eq!(fault, Fault::Passing);
    assert!(waited >= DEADLINE, "{waited:?}");
    // The table is still locked: a connection still waiting for the count would hold the
    // heartbeat behind it until the lock goes.
    tokio::time::timeout(Duration::from_secs(10), store.heartbeat("me"))
        .await
        .expect("the heartbeat waited behind the operation that was cut off")
        .unwrap();
    lock.rollback().await.unwrap();
    assert_eq!(store.count().await.unwrap(), 0);
}

/// A connection given back goes to the next caller; one dropped without being given back
/// (its work failed or was cut off) is closed, and the next caller gets another.
#[tokio::test]
async fn a_connection_is_lent_again_only_when_given_back() {
    let Some((_pg, store)) = started("a_connection_is_lent_again_only_when_given_back").await
    else {
        return;
    };
    let backend = async |lent: &mut crate::persist::pg_pool::Lent| -> i32 {
        lent.conn()
            .unwrap()
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0)
    };
    let mut lent = store.pool.get().await.unwrap();
    let first = backend(&mut lent).await;
    lent.keep();
    let mut lent = store.pool.get().await.unwrap();
    assert_eq!(
        backend(&mut lent).await,
        first,
        "a kept connection was not lent again"
    );
    drop(lent);
    let mut lent = store.pool.get().await.unwrap();
    assert_ne!(
        backend(&mut lent).await,
        first,
        "a dropped connection was lent again"
    );
}

/// The database restarts between two operations: the connections the pool held are broken,
/// and the next operation is served on a new one rather than failing.
#[tokio::test]
async fn the_first_operation_after_a_database_restart_succeeds() {
    let Some((mut pg, store)) = started("the_first_operation_after_a_database_restart").await
    else {
        return;
    };
    store.create(&conformance_task("t1"), "me").await.unwrap();
    for round in 0..3 {
        pg.stop().unwrap();
        pg.start_again().unwrap();
        let (_, t) = store
            .task("t1")
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"))
            .unwrap();
        assert_eq!(t.id, "t1");
    }
}

fn conformance_task(id: &str) -> Task {
    crate::persist::conformance::task(id, TaskState::Running)
}
