//! Opening the embedded store: its file taken for this process (exclusive locking, WAL), a
//! file that cannot be written refused saying what failed, a damaged one (`PRAGMA
//! quick_check`, the schema's tables and columns) refused as damaged, and its schema brought
//! up to date by the migrations below.
use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::mpsc;

use super::{MAX_QUEUED, SqliteStore, WAL_AUTOCHECKPOINT, serve};
use crate::persist::{SCHEMA_VERSION, StoreError, schema, sqlite_fault};

/// Schema changes, in order: entry `n` brings a store from version `n` to `n + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // 0 → 1
    "CREATE TABLE tasks (
        ord INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        state INTEGER NOT NULL,
        owner TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        ended_at_ms INTEGER,
        lease_serial TEXT,
        lease_id TEXT,
        record BLOB NOT NULL
    );
    CREATE INDEX tasks_by_end ON tasks (ended_at_ms) WHERE ended_at_ms IS NOT NULL;
    CREATE TABLE events (
        task_ord INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        event BLOB NOT NULL,
        PRIMARY KEY (task_ord, seq)
    ) WITHOUT ROWID;",
    // 1 → 2: the tenant that created each task (tasks from before keys: the open tenant),
    // indexed for ListTasks' pages of one tenant.
    "ALTER TABLE tasks ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
    CREATE INDEX tasks_by_tenant ON tasks (tenant, ord);",
    // 2 → 3: the model tokens each task used, summed per tenant and day for its token limit
    // (tasks stored before: 0).
    "ALTER TABLE tasks ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX tasks_by_tenant_created ON tasks (tenant, created_at_ms);",
    // 3 → 4: nothing here (the shared store indexes its unfinished tasks by tenant, to count
    // them across replicas; one process owns an embedded store and counts its own).
    "",
    // 4 → 5: a running task's request, kept apart from its record, which is rewritten as the
    // task runs (in a table of its own: SQLite rewrites a whole row, overflow pages and all,
    // when one of its columns changes size); an ended task's record holds its request again.
    // Records of schema 4 hold their requests and are read as they are.
    "CREATE TABLE requests (
        task_ord INTEGER PRIMARY KEY,
        request BLOB NOT NULL
    );",
];

/// Longest `PRAGMA quick_check` at start; a store too large to check within it is taken
/// unchecked (and the log says so). It reads every page: 39–44 ms for 10,000 tasks in 15 MB,
/// 0.38–0.49 s for 10,000 tasks in 564 MB (`cargo bench -p droidmesh-gateway --bench restart`,
/// release build, pages cached), so about 5 GB before it is cut short.
const QUICK_CHECK_BUDGET: Duration = Duration::from_secs(5);

impl SqliteStore {
    /// Opens (creating it and its directory if need be) the store at `path`, brings its schema
    /// up to date and takes it for this process. A file it cannot write, or a damaged one, is
    /// refused in words that say which and what to do.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let unusable = |why: String| StoreError::Unusable(format!("task store {shown}: {why}"));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                unusable(format!(
                    "cannot create its directory {}: {e}",
                    dir.display()
                ))
            })?;
        }
        // SQLite would open a file it may not write read-only, and fail later in vaguer words.
        if let Some(why) = sqlite_fault::file_unwritable(path) {
            return Err(unusable(format!(
                "it cannot be written: {why}; let the user the gateway runs as write it \
                 (nothing in it is lost: keep the file)"
            )));
        }
        let conn =
            Connection::open(path).map_err(|e| unusable(sqlite_fault::trouble(&e, path).words))?;
        let refuse = |e: rusqlite::Error| unusable(sqlite_fault::trouble(&e, path).words);
        // Another process holding the file is told at once, not after SQLite's 5 s default.
        conn.busy_timeout(Duration::from_millis(200))
            .map_err(refuse)?;
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(refuse)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(refuse)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(unusable(format!(
                "cannot switch it to write-ahead logging (journal mode stays {mode})"
            )));
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(refuse)?;
        let version: u32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(refuse)?;
        if version > SCHEMA_VERSION {
            return Err(unusable(format!(
                "it was written by a newer droidmesh (schema version {version}; this build \
                 knows up to {SCHEMA_VERSION}); run that version, or point gateway.store \
                 elsewhere"
            )));
        }
        if version > 0 {
            check_pages(&conn, path, QUICK_CHECK_BUDGET).map_err(unusable)?;
        }
        let tx = conn.unchecked_transaction().map_err(refuse)?;
        for (from, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(sql).map_err(|e| {
                let words = sqlite_fault::trouble(&e, path).words;
                unusable(format!("migration {from} → {} failed: {words}", from + 1))
            })?;
        }
        let missing = schema::missing(schema::SQLITE, &sqlite_fault::columns(&tx).map_err(refuse)?);
        if !missing.is_empty() {
            return Err(unusable(schema::damaged(
                &missing,
                sqlite_fault::MOVE_IT_AWAY,
            )));
        }
        // Written even when nothing changed, so the exclusive lock is taken now, not at the
        // first task.
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(refuse)?;
        tx.commit().map_err(refuse)?;
        conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT)
            .map_err(refuse)?;
        let (jobs, queue) = mpsc::channel(MAX_QUEUED);
        let at = path.to_owned();
        let thread = std::thread::Builder::new()
            .name("droidmesh-sqlite".into())
            .spawn(move || serve(conn, queue, &at))
            .map_err(|e| unusable(format!("cannot start its thread: {e}")))?;
        Ok(Self {
            path: path.to_owned(),
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }
}

/// `PRAGMA quick_check` of a store at start, within `budget`: a damaged file is refused (the
/// words say so and what to do); one too large to check in time is taken, and the log says
/// it was not fully checked.
fn check_pages(conn: &Connection, path: &Path, budget: Duration) -> Result<(), String> {
    match sqlite_fault::quick_check(conn, budget) {
        Ok(sqlite_fault::Checked::Sound) => Ok(()),
        Ok(sqlite_fault::Checked::Damaged(found)) => Err(format!(
            "it is damaged (SQLite's quick_check found: {}); {}",
            crate::record::cut(&found, 300),
            sqlite_fault::MOVE_IT_AWAY
        )),
        Ok(sqlite_fault::Checked::CutShort) => {
            tracing::warn!(store = %path.display(), budget = ?budget, "the task store is too large to check within its budget at start: it was taken without PRAGMA quick_check finishing");
            Ok(())
        }
        Err(e) => Err(sqlite_fault::trouble(&e, path).words),
    }
}
