//! The shared task store: PostgreSQL, one database for several gateway replicas. Each replica
//! is a row in `replicas` whose `seen_at` it renews (the database's clock, so replicas' clocks
//! do not matter); a task not ended whose owner has not renewed for the replica timeout is an
//! orphan, and the replica that claims it (one `UPDATE ... SET owner`, rows locked with `SKIP
//! LOCKED`, so exactly one does) ends it. A record is written only by its owner, so a replica
//! declared stopped cannot overwrite what another wrote since. The schema version is the row of
//! `droidmesh_schema`; migrations run in one transaction under an advisory lock, so replicas
//! starting together migrate once; a database written by a newer droidmesh is refused, and so
//! is one that lacks a table or a column of the current schema.
use std::collections::HashMap;
use std::time::Duration;

use droidmesh_proto::v1::{LeaseRef, Task, TaskEvent, TaskState};
use prost::Message as _;

use super::pg_pool::{Pool, pg_error, pg_fault, redact_url};
use super::pg_tls::MakeRustls;
use super::{
    Fault, Orphan, OverLimit, Retention, SCHEMA_VERSION, StoreError, TaskStore, TaskWrite,
    TenantLimits, decode_event, decode_task, encode_apart, schema, tokens_of,
};

/// Schema changes, in order: entry `n` brings a database from version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[
    // 0 → 1
    "CREATE TABLE tasks (
        ord BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        state INTEGER NOT NULL,
        owner TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        ended_at_ms BIGINT,
        lease_serial TEXT,
        lease_id TEXT,
        record BYTEA NOT NULL
    );
    CREATE INDEX tasks_by_end ON tasks (ended_at_ms) WHERE ended_at_ms IS NOT NULL;
    CREATE INDEX tasks_unfinished ON tasks (owner) WHERE ended_at_ms IS NULL;
    CREATE TABLE events (
        task_ord BIGINT NOT NULL,
        seq BIGINT NOT NULL,
        event BYTEA NOT NULL,
        PRIMARY KEY (task_ord, seq)
    );
    CREATE TABLE replicas (
        owner TEXT PRIMARY KEY,
        seen_at TIMESTAMPTZ NOT NULL
    );",
    // 1 → 2: the tenant that created each task (tasks from before keys: the open tenant),
    // indexed for ListTasks' pages of one tenant.
    "ALTER TABLE tasks ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    CREATE INDEX tasks_by_tenant ON tasks (tenant, ord);",
    // 2 → 3: the model tokens each task used, summed per tenant and day for its token limit
    // (tasks stored before: 0).
    "ALTER TABLE tasks ADD COLUMN tokens BIGINT NOT NULL DEFAULT 0;
    CREATE INDEX tasks_by_tenant_created ON tasks (tenant, created_at_ms);",
    // 3 → 4: each tenant's tasks not ended, counted for its limit on running tasks.
    "CREATE INDEX tasks_unfinished_by_tenant ON tasks (tenant) WHERE ended_at_ms IS NULL;",
    // 4 → 5: a running task's request, kept apart from its record (which is rewritten as the
    // task runs); an ended task's record holds its request again. Records of schema 4 hold
    // their requests and are read as they are.
    "ALTER TABLE tasks ADD COLUMN request BYTEA;",
];
const _: () = assert!(MIGRATIONS.len() == SCHEMA_VERSION as usize);

/// Key of the advisory lock that lets one replica at a time migrate.
const MIGRATION_LOCK: i64 = 0x6472_6f69_646d_7368;
/// Longest one operation takes, waiting for a connection included.
const DEADLINE: Duration = Duration::from_secs(15);
/// The window of the limit on tasks created per minute.
const MINUTE_MS: i64 = 60_000;
/// Most ended tasks forgotten, and most orphans claimed, in one transaction.
const BATCH: i64 = 1_000;

const CREATE: &str = "INSERT INTO tasks (id, state, owner, created_at_ms, record, tenant, request)
    VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ord";
/// A record with its own request (`own_request`) replaces the request kept apart.
const UPDATE: &str = "UPDATE tasks t SET state = u.state, ended_at_ms = u.ended_at_ms,
        lease_serial = u.lease_serial, lease_id = u.lease_id, record = u.record,
        tokens = u.tokens,
        request = CASE WHEN u.own_request THEN NULL ELSE t.request END
    FROM UNNEST($1::text[], $2::int4[], $3::int8[], $4::text[], $5::text[], $6::bytea[],
            $8::int8[], $9::bool[])
        AS u(id, state, ended_at_ms, lease_serial, lease_id, record, tokens, own_request)
    WHERE t.id = u.id AND t.owner = $7
    RETURNING t.id, t.ord";
const INSERT_EVENTS: &str = "INSERT INTO events (task_ord, seq, event)
    SELECT * FROM UNNEST($1::int8[], $2::int8[], $3::bytea[])
    ON CONFLICT (task_ord, seq) DO UPDATE SET event = EXCLUDED.event";
const TRIM: &str = "DELETE FROM events e USING UNNEST($1::int8[], $2::int8[]) AS d(ord, first_seq)
    WHERE e.task_ord = d.ord AND e.seq < d.first_seq";
const TAKEN: &str = "SELECT id FROM tasks WHERE id = ANY($1::text[]) AND owner <> $2";
const TASK: &str = "SELECT ord, record, request FROM tasks WHERE id = $1";
const EVENTS: &str = "SELECT event FROM events
    WHERE task_ord = (SELECT ord FROM tasks WHERE id = $1) AND seq >= $2
    ORDER BY seq LIMIT $3";
const PAGE: &str = "SELECT ord, record, request FROM tasks
    WHERE tenant = $4 AND ord < $1 AND (cardinality($2::int4[]) = 0 OR state = ANY($2::int4[]))
    ORDER BY ord DESC LIMIT $3";
const PRUNE: &str = "WITH doomed AS (
        SELECT ord FROM tasks WHERE ended_at_ms IS NOT NULL AND (
            ended_at_ms < $1 OR ord NOT IN (
                SELECT ord FROM tasks WHERE ended_at_ms IS NOT NULL
                ORDER BY ended_at_ms DESC, ord DESC LIMIT $2))
        LIMIT $3
    ), gone AS (DELETE FROM events WHERE task_ord IN (SELECT ord FROM doomed))
    DELETE FROM tasks WHERE ord IN (SELECT ord FROM doomed)";
const ORPHANS: &str = "WITH doomed AS (
        SELECT t.ord, t.owner FROM tasks t LEFT JOIN replicas r ON r.owner = t.owner
        WHERE t.ended_at_ms IS NULL AND t.owner <> $1
          AND (r.owner IS NULL OR r.seen_at < now() - $2::float8 * interval '1 second')
        ORDER BY t.ord LIMIT $3
        FOR UPDATE OF t SKIP LOCKED
    )
    UPDATE tasks t SET owner = $1 FROM doomed d WHERE t.ord = d.ord AND t.owner = d.owner
    RETURNING t.record, t.lease_serial, t.lease_id, d.owner, t.request";
const HEARTBEAT: &str = "INSERT INTO replicas (owner, seen_at) VALUES ($1, now())
    ON CONFLICT (owner) DO UPDATE SET seen_at = now()";
/// Rows of replicas gone for long (a missing row reads as a stopped replica, like a stale one).
const FORGET_REPLICAS: &str =
    "DELETE FROM replicas WHERE seen_at < now() - $1::float8 * interval '1 second'";
/// Holds the tenant's lock until the transaction ends: replicas recording tasks of one
/// tenant count and insert one after another.
const TENANT_LOCK: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended('droidmesh tenant ' || $1, 0))";
/// The tenant's tasks not ended (`$2`: the final states), its tasks created after `$3`, and
/// the oldest of those.
const TENANT_USE: &str = "SELECT
        (SELECT count(*) FROM tasks
            WHERE tenant = $1 AND ended_at_ms IS NULL AND state <> ALL($2::int4[])),
        count(*), min(created_at_ms)
    FROM tasks WHERE tenant = $1 AND created_at_ms > $3";
const COUNT: &str = "SELECT count(*) FROM tasks";
/// Every (table, column) of the schema the store's statements use.
const COLUMNS: &str = "SELECT table_name::text, column_name::text FROM information_schema.columns
    WHERE table_schema = current_schema()";
const TOKENS: &str = "SELECT LEAST(COALESCE(SUM(tokens), 0), 9223372036854775807)::int8 FROM tasks
    WHERE tenant = $1 AND created_at_ms >= $2";

/// Runs `$body` with `$c`, a pooled connection (`&mut deadpool_postgres::ClientWrapper`),
/// within [`DEADLINE`]: a `Result<T, StoreError>`. A connection found closed (the database
/// restarted) is replaced and `$body` run once more on the new one; a connection whose
/// operation failed or was cut off is not used again. (A macro rather than a function taking an
/// async closure, whose future could not be proved `Send`.)
macro_rules! with_conn {
    ($store:expr, $c:ident => $body:block) => {{
        let store: &PostgresStore = $store;
        let work = async {
            let mut tries = 0;
            loop {
                tries += 1;
                let mut lent = store
                    .pool
                    .get()
                    .await
                    .map_err(|e| store.failed(&e, e.fault()))?;
                let Some($c) = lent.conn() else {
                    return Err(store.failed("the pool lent no connection", Fault::Passing));
                };
                let result: Result<_, tokio_postgres::Error> = async { $body }.await;
                match result {
                    Ok(v) => {
                        lent.keep();
                        return Ok(v);
                    }
                    Err(e) if e.is_closed() && tries < 2 => continue,
                    Err(e) => return Err(store.failed(pg_error(&e), pg_fault(&e))),
                }
            }
        };
        tokio::time::timeout(DEADLINE, work)
            .await
            .unwrap_or_else(|_| {
                Err(store.failed(format!("no answer within {DEADLINE:?}"), Fault::Passing))
            })
    }};
}

pub struct PostgresStore {
    /// The URL without its password.
    shown: String,
    pool: Pool,
    replica_timeout: Duration,
}

impl PostgresStore {
    /// Connects to the database at `url`, brings its schema up to date and records `owner` as
    /// a live replica. Refuses a database it cannot reach or that a newer droidmesh wrote.
    pub async fn open(
        url: &str,
        owner: &str,
        replica_timeout: Duration,
    ) -> Result<Self, StoreError> {
        Self::open_with(url, owner, replica_timeout, None).await
    }

    /// [`PostgresStore::open`]; with `sslmode=require` in the URL, over TLS, the server's
    /// certificate checked against the CA certificates in `ca` (else the system's roots).
    pub async fn open_with(
        url: &str,
        owner: &str,
        replica_timeout: Duration,
        ca: Option<&std::path::Path>,
    ) -> Result<Self, StoreError> {
        let shown = redact_url(url);
        let unusable = |why: String| StoreError::Unusable(format!("task store {shown}: {why}"));
        let config: tokio_postgres::Config = url.trim().parse().map_err(|e| {
            unusable(format!(
                "it is not a PostgreSQL URL ({e}); write postgres://USER:PASSWORD@HOST:PORT/DATABASE"
            ))
        })?;
        let tls = match config.get_ssl_mode() {
            tokio_postgres::config::SslMode::Require => Some(
                droidmesh_runtime::tls::client_config_for("gateway.store_ca", ca, &[])
                    .map(MakeRustls)
                    .map_err(|e| unusable(e.to_string()))?,
            ),
            _ => None,
        };
        let store = Self {
            shown: shown.clone(),
            pool: Pool::new(config, tls).map_err(|e| unusable(e.to_string()))?,
            replica_timeout,
        };
        // The schema is checked on a connection of the pool that is then closed, not kept: it
        // was made by the runtime that opens the store, which may end (`open_blocking`).
        let mut lent = store.pool.get().await.map_err(|e| {
            let hint = if store.pool.tls() && e.to_string().contains("certificate") {
                "; gateway.store_ca names the CA that signed the server's certificate"
            } else {
                ""
            };
            unusable(format!(
                "{e}{hint}; check that PostgreSQL runs there and lets this user in, or point \
                 gateway.store elsewhere"
            ))
        })?;
        let Some(client) = lent.conn() else {
            return Err(unusable("the pool lent no connection".into()));
        };
        let migrate = async {
            let tx = client.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
                .await?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS droidmesh_schema (version INTEGER NOT NULL)",
            )
            .await?;
            let version: Option<i32> = tx
                .query_one("SELECT max(version) FROM droidmesh_schema", &[])
                .await?
                .get(0);
            let version = u32::try_from(version.unwrap_or(0)).unwrap_or(0);
            if version > SCHEMA_VERSION {
                return Ok(Err(format!(
                    "it was written by a newer droidmesh (schema version {version}; this build \
                     knows up to {SCHEMA_VERSION}); run that version, or point gateway.store \
                     elsewhere"
                )));
            }
            for (from, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
                if let Err(e) = tx.batch_execute(sql).await {
                    return Ok(Err(format!(
                        "migration {from} → {} failed: {}",
                        from + 1,
                        pg_error(&e)
                    )));
                }
            }
            if version < SCHEMA_VERSION {
                let v = i32::try_from(SCHEMA_VERSION).unwrap_or(i32::MAX);
                tx.execute("DELETE FROM droidmesh_schema", &[]).await?;
                tx.execute("INSERT INTO droidmesh_schema (version) VALUES ($1)", &[&v])
                    .await?;
            }
            let found: Vec<(String, String)> = tx
                .query(COLUMNS, &[])
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            let missing = schema::missing(schema::POSTGRES, &found);
            if !missing.is_empty() {
                return Ok(Err(schema::damaged(
                    &missing,
                    "restore the database from a backup, or point gateway.store at an empty one",
                )));
            }
            tx.execute(HEARTBEAT, &[&owner]).await?;
            tx.commit().await.map(Ok)
        };
        match tokio::time::timeout(DEADLINE, migrate).await {
            Err(_) => Err(unusable(format!(
                "it did not answer within {DEADLINE:?} while its schema was checked"
            ))),
            Ok(Err(e)) => Err(unusable(format!(
                "cannot check or migrate its schema: {}",
                pg_error(&e)
            ))),
            Ok(Ok(Err(why))) => Err(unusable(why)),
            Ok(Ok(Ok(()))) => {
                drop(lent);
                Ok(store)
            }
        }
    }

    /// [`PostgresStore::open`] for synchronous callers (the gateway's service is built
    /// synchronously): on a thread of its own with a runtime of its own. The store's
    /// connections are made later, by the runtime that uses them.
    pub fn open_blocking(
        url: &str,
        owner: &str,
        replica_timeout: Duration,
        ca: Option<&std::path::Path>,
    ) -> Result<Self, StoreError> {
        let shown = redact_url(url);
        std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| {
                        StoreError::Unusable(format!(
                            "task store {shown}: cannot start a runtime to open it: {e}"
                        ))
                    })?
                    .block_on(Self::open_with(url, owner, replica_timeout, ca))
            })
            .join()
            .unwrap_or_else(|_| {
                Err(StoreError::Unusable(format!(
                    "task store {shown}: the thread that opened it failed"
                )))
            })
        })
    }

    fn failed(&self, message: impl ToString, fault: Fault) -> StoreError {
        StoreError::Failed {
            store: self.shown.clone(),
            message: message.to_string(),
            fault,
        }
    }

    async fn rows_of_tasks(
        &self,
        sql: &'static str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<(u64, Task)>, StoreError> {
        let rows = with_conn!(self, c => {
            let s = c.prepare_cached(sql).await?;
            c.query(&s, params).await
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let (ord, record, request): (i64, &[u8], Option<&[u8]>) =
                (row.get(0), row.get(1), row.get(2));
            out.push((uint(ord), decode_task(&self.shown, record, request)?));
        }
        Ok(out)
    }
}

/// PostgreSQL integers are signed; seqs and orders fit (they count from 1).
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn uint(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Records `task` (encoded as `record` and `request`, [`encode_apart`]) for `owner` with the
/// prepared [`CREATE`]; its creation order.
async fn insert(
    client: &impl tokio_postgres::GenericClient,
    create: &tokio_postgres::Statement,
    task: &Task,
    owner: &str,
    (record, request): &(Vec<u8>, Option<Vec<u8>>),
) -> Result<u64, tokio_postgres::Error> {
    let row = client
        .query_one(
            create,
            &[
                &task.id,
                &task.state,
                &owner,
                &task.created_at_ms,
                &record,
                &task.tenant,
                &request,
            ],
        )
        .await?;
    Ok(uint(row.get(0)))
}

#[tonic::async_trait]
impl TaskStore for PostgresStore {
    fn describe(&self) -> String {
        self.shown.clone()
    }

    fn replica_timeout(&self) -> Option<Duration> {
        Some(self.replica_timeout)
    }

    async fn heartbeat(&self, owner: &str) -> Result<(), StoreError> {
        let forget_after = (self.replica_timeout * 4).max(Duration::from_secs(60));
        with_conn!(self, c => {
            let (beat, forget) = (
                c.prepare_cached(HEARTBEAT).await?,
                c.prepare_cached(FORGET_REPLICAS).await?,
            );
            c.execute(&beat, &[&owner]).await?;
            c
                .execute(&forget, &[&forget_after.as_secs_f64()])
                .await
        })
        .map(|_| ())
    }

    async fn create(&self, task: &Task, owner: &str) -> Result<u64, StoreError> {
        let encoded = encode_apart(task);
        with_conn!(self, c => {
            let s = c.prepare_cached(CREATE).await?;
            insert(&**c, &s, task, owner, &encoded).await
        })
    }

    async fn create_within(
        &self,
        task: &Task,
        owner: &str,
        limits: TenantLimits,
    ) -> Result<u64, StoreError> {
        if !limits.any() {
            return self.create(task, owner).await;
        }
        let encoded = encode_apart(task);
        let finals = [
            TaskState::Succeeded as i32,
            TaskState::Failed as i32,
            TaskState::Cancelled as i32,
        ];
        let since = task.created_at_ms.saturating_sub(MINUTE_MS);
        let admitted = with_conn!(self, c => {
            let (lock, used, create) = (
                c.prepare_cached(TENANT_LOCK).await?,
                c.prepare_cached(TENANT_USE).await?,
                c.prepare_cached(CREATE).await?,
            );
            let tx = c.transaction().await?;
            tx.execute(&lock, &[&task.tenant]).await?;
            // Counted after the lock is held: in READ COMMITTED each statement sees what was
            // committed before it began, so every task recorded under the lock is seen.
            let row = tx.query_one(&used, &[&task.tenant, &finals.as_slice(), &since]).await?;
            let (running, recent, oldest): (i64, i64, Option<i64>) =
                (row.get(0), row.get(1), row.get(2));
            if limits.max_running > 0 && running >= i64::from(limits.max_running) {
                return Ok(Err(OverLimit::running(uint(running))));
            }
            if limits.per_minute > 0 && recent >= i64::from(limits.per_minute) {
                let leaves = oldest.unwrap_or(task.created_at_ms) + MINUTE_MS;
                let wait = uint(leaves.saturating_sub(task.created_at_ms));
                return Ok(Err(OverLimit::per_minute(
                    uint(recent),
                    Duration::from_millis(wait),
                )));
            }
            let ord = insert(&*tx, &create, task, owner, &encoded).await?;
            tx.commit().await?;
            Ok(Ok(ord))
        })?;
        admitted.map_err(StoreError::OverLimit)
    }

    async fn write(&self, owner: &str, batch: Vec<TaskWrite>) -> Result<Vec<String>, StoreError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = batch.iter().map(|w| w.task.id.as_str()).collect();
        let states: Vec<i32> = batch.iter().map(|w| w.task.state).collect();
        let ended: Vec<Option<i64>> = batch.iter().map(|w| w.ended_at_ms).collect();
        let serials: Vec<Option<&str>> = batch
            .iter()
            .map(|w| w.lease.as_ref().map(|l| l.serial.as_str()))
            .collect();
        let lease_ids: Vec<Option<&str>> = batch
            .iter()
            .map(|w| w.lease.as_ref().map(|l| l.lease_id.as_str()))
            .collect();
        let records: Vec<Vec<u8>> = batch.iter().map(|w| w.task.encode_to_vec()).collect();
        let tokens: Vec<i64> = batch.iter().map(|w| int(tokens_of(&w.task))).collect();
        let own_requests: Vec<bool> = batch.iter().map(|w| w.task.request.is_some()).collect();
        with_conn!(self, c => {
            let (update, insert, trim, taken) = (
                c.prepare_cached(UPDATE).await?,
                c.prepare_cached(INSERT_EVENTS).await?,
                c.prepare_cached(TRIM).await?,
                c.prepare_cached(TAKEN).await?,
            );
            let tx = c.transaction().await?;
            let ords: HashMap<String, i64> = tx
                .query(
                    &update,
                    &[
                        &ids,
                        &states,
                        &ended,
                        &serials,
                        &lease_ids,
                        &records,
                        &owner,
                        &tokens,
                        &own_requests,
                    ],
                )
                .await?
                .into_iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            let (mut ev_ords, mut ev_seqs, mut ev_bytes) = (Vec::new(), Vec::new(), Vec::new());
            let (mut trim_ords, mut trim_from) = (Vec::new(), Vec::new());
            let mut missing = Vec::new();
            for w in &batch {
                // Not written: forgotten by retention meanwhile, or taken over by another
                // replica (asked below).
                let Some(&ord) = ords.get(&w.task.id) else {
                    missing.push(w.task.id.as_str());
                    continue;
                };
                for ev in w.events.iter().filter(|e| e.seq >= w.task.first_seq) {
                    ev_ords.push(ord);
                    ev_seqs.push(int(ev.seq));
                    ev_bytes.push(ev.bytes.as_slice());
                }
                if w.task.first_seq > 1 {
                    trim_ords.push(ord);
                    trim_from.push(int(w.task.first_seq));
                }
            }
            if !ev_ords.is_empty() {
                tx.execute(&insert, &[&ev_ords, &ev_seqs, &ev_bytes])
                    .await?;
            }
            if !trim_ords.is_empty() {
                tx.execute(&trim, &[&trim_ords, &trim_from]).await?;
            }
            let lost: Vec<String> = if missing.is_empty() {
                Vec::new()
            } else {
                tx.query(&taken, &[&missing, &owner])
                    .await?
                    .into_iter()
                    .map(|r| r.get(0))
                    .collect()
            };
            tx.commit().await?;
            Ok(lost)
        })
    }

    async fn task(&self, id: &str) -> Result<Option<(u64, Task)>, StoreError> {
        Ok(self.rows_of_tasks(TASK, &[&id]).await?.pop())
    }

    async fn events(&self, id: &str, from: u64, max: usize) -> Result<Vec<TaskEvent>, StoreError> {
        let (from, max) = (int(from), i64::try_from(max).unwrap_or(i64::MAX));
        let rows = with_conn!(self, c => {
            let s = c.prepare_cached(EVENTS).await?;
            c.query(&s, &[&id, &from, &max]).await
        })?;
        rows.iter()
            .map(|r| decode_event(&self.shown, id, r.get(0)))
            .collect()
    }

    async fn page(
        &self,
        tenant: &str,
        states: &[i32],
        before: u64,
        size: usize,
    ) -> Result<Vec<(u64, Task)>, StoreError> {
        let (before, size) = (int(before), i64::try_from(size).unwrap_or(i64::MAX));
        self.rows_of_tasks(PAGE, &[&before, &states, &size, &tenant])
            .await
    }

    async fn prune(&self, keep: Retention, now_ms: i64) -> Result<u64, StoreError> {
        let cutoff = now_ms.saturating_sub(i64::try_from(keep.keep_for_ms).unwrap_or(i64::MAX));
        let keep = i64::try_from(keep.keep).unwrap_or(i64::MAX);
        with_conn!(self, c => {
            let s = c.prepare_cached(PRUNE).await?;
            c.execute(&s, &[&cutoff, &keep, &BATCH]).await
        })
    }

    async fn orphans(&self, owner: &str) -> Result<Vec<Orphan>, StoreError> {
        let timeout = self.replica_timeout.as_secs_f64();
        let rows = with_conn!(self, c => {
            let s = c.prepare_cached(ORPHANS).await?;
            c.query(&s, &[&owner, &timeout, &BATCH]).await
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let (serial, lease_id): (Option<String>, Option<String>) = (row.get(1), row.get(2));
            out.push(Orphan {
                task: decode_task(&self.shown, row.get(0), row.get(4))?,
                lease: serial
                    .zip(lease_id)
                    .map(|(serial, lease_id)| LeaseRef { serial, lease_id }),
                lost_replica: Some(row.get(3)),
            });
        }
        Ok(out)
    }

    async fn count(&self) -> Result<u64, StoreError> {
        with_conn!(self, c => {
            let s = c.prepare_cached(COUNT).await?;
            Ok(uint(c.query_one(&s, &[]).await?.get(0)))
        })
    }

    async fn tokens_since(&self, tenant: &str, since_ms: i64) -> Result<u64, StoreError> {
        with_conn!(self, c => {
            let s = c.prepare_cached(TOKENS).await?;
            Ok(uint(c.query_one(&s, &[&tenant, &since_ms]).await?.get(0)))
        })
    }
}

#[cfg(test)]
#[path = "postgres_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "postgres_pool_tests.rs"]
mod pool_tests;
