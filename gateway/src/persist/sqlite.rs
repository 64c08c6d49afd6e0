//! The embedded task store: one SQLite file (WAL, `synchronous = NORMAL`: a commit survives the
//! process being killed, not the machine losing power), held by one gateway process at a time
//! (`locking_mode = EXCLUSIVE`). Its schema version is SQLite's `user_version`; a file written
//! by a newer droidmesh is refused rather than read wrongly; so is a damaged one (`PRAGMA
//! quick_check`, the schema's tables and columns), and one that cannot be written is refused
//! saying what failed (`sqlite_fault`).
use std::path::{Path, PathBuf};

use tokio::sync::{mpsc, oneshot};

use droidmesh_proto::v1::{LeaseRef, Task, TaskEvent};
use prost::Message as _;
use rusqlite::{Connection, OptionalExtension as _, params};

use super::{
    Orphan, Retention, StoreError, TaskStore, TaskWrite, decode_event, decode_task, encode_apart,
    sqlite_fault, tokens_of,
};

/// Most ended tasks forgotten in one transaction (a prune that has more to do goes on at its
/// next turn).
const PRUNE_BATCH: i64 = 1_000;

pub struct SqliteStore {
    path: PathBuf,
    /// The connection's thread takes its work from here; `None` once dropped.
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Work for the connection's thread.
enum Job {
    /// Run as it comes (reads; a prune, in its own transaction).
    Now(Box<dyn FnOnce(&mut Connection) + Send>),
    /// Run with the others waiting then, in one transaction; answered once it commits.
    Grouped(Grouped),
}

type Answer = Result<Box<dyn std::any::Any + Send>, StoreError>;

/// A write run in a transaction it shares with the writes queued beside it (group commit:
/// one commit, one wake of the thread, for all of them). It may be run a second time on its
/// own when another of its group failed.
struct Grouped {
    run: Box<dyn Fn(&Connection) -> Answer + Send>,
    reply: oneshot::Sender<Answer>,
}

/// Most writes committed together.
const MAX_GROUP: usize = 256;
/// Work queued for the connection's thread at most; callers wait beyond it.
const MAX_QUEUED: usize = 1_024;
/// WAL pages between two checkpoints (SQLite's default is 1000): fewer checkpoints write a
/// task's hot pages to the database file fewer times. The WAL file grows to about 16 MiB.
const WAL_AUTOCHECKPOINT: u32 = 4_000;

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // The thread ends once its queue is closed and empty; joined so that the file is
        // released (its exclusive lock) when the store is gone.
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl SqliteStore {
    /// Runs `sql` on the store's own connection (tests make it full, or damage it, under a
    /// running gateway).
    #[cfg(test)]
    pub(crate) async fn execute(&self, sql: &str) -> Result<(), StoreError> {
        let (sql, path) = (sql.to_owned(), self.path.clone());
        self.run(move |c| c.execute_batch(&sql).map_err(failed_at(&path)))
            .await
    }

    fn gone(&self) -> StoreError {
        StoreError::Failed {
            store: self.describe(),
            message: "the store's thread has stopped".into(),
            fault: super::Fault::Lasting,
        }
    }

    async fn send(&self, job: Job) -> Result<(), StoreError> {
        match &self.jobs {
            Some(jobs) => jobs.send(job).await.map_err(|_| self.gone()),
            None => Err(self.gone()),
        }
    }

    /// Runs `f` on the connection's thread as it comes.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send(Job::Now(Box::new(move |c| {
            let _ = reply.send(f(c));
        })))
        .await?;
        answer.await.map_err(|_| self.gone())?
    }

    /// Runs `f` on the connection's thread in a transaction with the writes queued beside
    /// it; returns once that transaction has committed.
    async fn commit<T: Send + 'static>(
        &self,
        f: impl Fn(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let run = Box::new(move |c: &Connection| {
            f(c).map(|v| Box::new(v) as Box<dyn std::any::Any + Send>)
        });
        self.send(Job::Grouped(Grouped { run, reply })).await?;
        let value = answer.await.map_err(|_| self.gone())??;
        value
            .downcast::<T>()
            .map(|v| *v)
            .map_err(|_| StoreError::Failed {
                store: self.describe(),
                message: "a write's answer had the wrong type".into(),
                fault: super::Fault::Lasting,
            })
    }
}

/// The connection's thread: takes the jobs queued, runs the immediate ones as they come and
/// the writes together in one transaction, until the store is dropped.
fn serve(mut conn: Connection, mut queue: mpsc::Receiver<Job>, path: &Path) {
    while let Some(first) = queue.blocking_recv() {
        let mut group = Vec::new();
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Now(f) => f(&mut conn),
                Job::Grouped(g) => group.push(g),
            }
            if group.len() < MAX_GROUP {
                next = queue.try_recv().ok();
            }
        }
        if !group.is_empty() {
            commit_group(&mut conn, path, group);
        }
    }
}

/// Commits the writes of `group` together; if one of them fails, each is run again in a
/// transaction of its own, so that one write's failure is not the others'.
fn commit_group(conn: &mut Connection, path: &Path, group: Vec<Grouped>) {
    if group.len() > 1 {
        match in_transaction(conn, path, |c| {
            group
                .iter()
                .map(|g| (g.run)(c))
                .collect::<Result<Vec<_>, _>>()
        }) {
            Ok(answers) => {
                for (g, answer) in group.into_iter().zip(answers) {
                    let _ = g.reply.send(Ok(answer));
                }
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, writes = group.len(), "a grouped write failed; each is tried on its own");
            }
        }
    }
    for g in group {
        let answer = in_transaction(conn, path, |c| (g.run)(c));
        let _ = g.reply.send(answer);
    }
}

/// Runs `f` between BEGIN and COMMIT (statements prepared once), rolled back if it fails.
fn in_transaction<T>(
    conn: &mut Connection,
    path: &Path,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let err = failed_at(path);
    let exec = |c: &Connection, sql: &str| {
        c.prepare_cached(sql)
            .and_then(|mut s| s.execute([]).map(drop))
    };
    exec(conn, "BEGIN").map_err(&err)?;
    let done = f(conn).and_then(|v| exec(conn, "COMMIT").map(|()| v).map_err(&err));
    if done.is_err() && !conn.is_autocommit() {
        let _ = exec(conn, "ROLLBACK");
    }
    done
}

/// The error of an operation on the store at `path`, worded by what failed.
fn failed_at(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| {
        let t = sqlite_fault::trouble(&e, path);
        StoreError::Failed {
            store: format!("sqlite {}", path.display()),
            message: t.words,
            fault: t.fault,
        }
    }
}

/// SQLite integers are signed; seqs and orders fit (they count from 1).
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn uint(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

#[tonic::async_trait]
impl TaskStore for SqliteStore {
    fn describe(&self) -> String {
        format!("sqlite {}", self.path.display())
    }

    async fn create(&self, task: &Task, owner: &str) -> Result<u64, StoreError> {
        let path = self.path.clone();
        let (id, tenant, state, created) = (
            task.id.clone(),
            task.tenant.clone(),
            task.state,
            task.created_at_ms,
        );
        let (record, request) = encode_apart(task);
        let owner = owner.to_owned();
        self.commit(move |c| {
            // `ord` is the rowid: read back without a RETURNING clause (which SQLite runs
            // through a temporary table).
            let err = failed_at(&path);
            c.prepare_cached(
                "INSERT INTO tasks (id, state, owner, created_at_ms, record, tenant)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut s| s.execute(params![id, state, owner, created, record, tenant]))
            .map_err(&err)?;
            let ord = c.last_insert_rowid();
            if let Some(request) = &request {
                c.prepare_cached("INSERT INTO requests (task_ord, request) VALUES (?1, ?2)")
                    .and_then(|mut s| s.execute(params![ord, request]))
                    .map_err(&err)?;
            }
            Ok(uint(ord))
        })
        .await
    }

    async fn write(&self, _owner: &str, batch: Vec<TaskWrite>) -> Result<Vec<String>, StoreError> {
        let path = self.path.clone();
        self.commit(move |tx| {
            let err = failed_at(&path);
            {
                let mut record = tx
                    .prepare_cached(
                        "UPDATE tasks SET state = ?2, ended_at_ms = ?3, lease_serial = ?4,
                         lease_id = ?5, record = ?6, tokens = ?7 WHERE id = ?1 RETURNING ord",
                    )
                    .map_err(&err)?;
                // The same by creation order, the rowid: no index to search, nothing to
                // return.
                let mut record_at = tx
                    .prepare_cached(
                        "UPDATE tasks SET state = ?2, ended_at_ms = ?3, lease_serial = ?4,
                         lease_id = ?5, record = ?6, tokens = ?7 WHERE ord = ?1",
                    )
                    .map_err(&err)?;
                let mut event = tx
                    .prepare_cached(
                        "INSERT OR REPLACE INTO events (task_ord, seq, event) VALUES (?1, ?2, ?3)",
                    )
                    .map_err(&err)?;
                let mut trim = tx
                    .prepare_cached("DELETE FROM events WHERE task_ord = ?1 AND seq < ?2")
                    .map_err(&err)?;
                let mut drop_request = tx
                    .prepare_cached("DELETE FROM requests WHERE task_ord = ?1")
                    .map_err(&err)?;
                for w in &batch {
                    let lease = w.lease.as_ref();
                    let (serial, lease_id) = (
                        lease.map(|l| l.serial.as_str()),
                        lease.map(|l| l.lease_id.as_str()),
                    );
                    let (blob, tokens) = (w.task.encode_to_vec(), int(tokens_of(&w.task)));
                    // A record with its own request replaces the one kept apart.
                    let own_request = w.task.request.is_some();
                    let ord: Option<i64> = match w.ord {
                        Some(ord) => {
                            let changed = record_at
                                .execute(params![
                                    int(ord),
                                    w.task.state,
                                    w.ended_at_ms,
                                    serial,
                                    lease_id,
                                    blob,
                                    tokens,
                                ])
                                .map_err(&err)?;
                            (changed > 0).then_some(int(ord))
                        }
                        None => record
                            .query_row(
                                params![
                                    w.task.id,
                                    w.task.state,
                                    w.ended_at_ms,
                                    serial,
                                    lease_id,
                                    blob,
                                    tokens,
                                ],
                                |r| r.get(0),
                            )
                            .optional()
                            .map_err(&err)?,
                    };
                    // Forgotten by retention meanwhile: nothing to add to.
                    let Some(ord) = ord else { continue };
                    if own_request {
                        drop_request.execute([ord]).map_err(&err)?;
                    }
                    for ev in w.events.iter().filter(|e| e.seq >= w.task.first_seq) {
                        event
                            .execute(params![ord, int(ev.seq), ev.bytes])
                            .map_err(&err)?;
                    }
                    if w.task.first_seq > 1 {
                        trim.execute(params![ord, int(w.task.first_seq)])
                            .map_err(&err)?;
                    }
                }
            }
            Ok(Vec::new())
        })
        .await
    }

    async fn task(&self, id: &str) -> Result<Option<(u64, Task)>, StoreError> {
        let (name, path) = (self.describe(), self.path.clone());
        let id = id.to_owned();
        self.run(move |c| {
            let row: Option<(i64, Vec<u8>, Option<Vec<u8>>)> = c
                .prepare_cached(
                    "SELECT ord, record, request FROM tasks LEFT JOIN requests ON task_ord = ord
                     WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.query_row([&id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                        .optional()
                })
                .map_err(failed_at(&path))?;
            row.map(|(ord, rec, req)| Ok((uint(ord), decode_task(&name, &rec, req.as_deref())?)))
                .transpose()
        })
        .await
    }

    async fn events(&self, id: &str, from: u64, max: usize) -> Result<Vec<TaskEvent>, StoreError> {
        let (name, path) = (self.describe(), self.path.clone());
        let id = id.to_owned();
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        self.run(move |c| {
            let err = failed_at(&path);
            let mut s = c
                .prepare_cached(
                    "SELECT event FROM events
                     WHERE task_ord = (SELECT ord FROM tasks WHERE id = ?1) AND seq >= ?2
                     ORDER BY seq LIMIT ?3",
                )
                .map_err(&err)?;
            let rows = s
                .query_map(params![id, int(from), max], |r| r.get::<_, Vec<u8>>(0))
                .map_err(&err)?;
            let mut out = Vec::new();
            for bytes in rows {
                out.push(decode_event(&name, &id, &bytes.map_err(&err)?)?);
            }
            Ok(out)
        })
        .await
    }

    async fn page(
        &self,
        tenant: &str,
        states: &[i32],
        before: u64,
        size: usize,
    ) -> Result<Vec<(u64, Task)>, StoreError> {
        let (name, path) = (self.describe(), self.path.clone());
        // States are enum numbers checked by the caller; listing them inline keeps one query.
        let filter = if states.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = states.iter().map(i32::to_string).collect();
            format!("AND state IN ({})", list.join(","))
        };
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        let tenant = tenant.to_owned();
        self.run(move |c| {
            let err = failed_at(&path);
            let mut s = c
                .prepare(&format!(
                    "SELECT ord, record, request FROM tasks LEFT JOIN requests ON task_ord = ord
                     WHERE tenant = ?3 AND ord < ?1 {filter} ORDER BY ord DESC LIMIT ?2"
                ))
                .map_err(&err)?;
            let rows = s
                .query_map(params![int(before), size, tenant], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, Vec<u8>>(1)?,
                        r.get::<_, Option<Vec<u8>>>(2)?,
                    ))
                })
                .map_err(&err)?;
            let mut out = Vec::new();
            for row in rows {
                let (ord, rec, req) = row.map_err(&err)?;
                out.push((uint(ord), decode_task(&name, &rec, req.as_deref())?));
            }
            Ok(out)
        })
        .await
    }

    async fn prune(&self, keep: Retention, now_ms: i64) -> Result<u64, StoreError> {
        let path = self.path.clone();
        let cutoff = now_ms.saturating_sub(i64::try_from(keep.keep_for_ms).unwrap_or(i64::MAX));
        let keep = i64::try_from(keep.keep).unwrap_or(i64::MAX);
        self.run(move |c| {
            let err = failed_at(&path);
            let tx = c.transaction().map_err(&err)?;
            let doomed: Vec<i64> = {
                let mut s = tx
                    .prepare_cached(
                        "SELECT ord FROM tasks WHERE ended_at_ms IS NOT NULL AND (
                            ended_at_ms < ?1 OR ord NOT IN (
                                SELECT ord FROM tasks WHERE ended_at_ms IS NOT NULL
                                ORDER BY ended_at_ms DESC, ord DESC LIMIT ?2))
                         LIMIT ?3",
                    )
                    .map_err(&err)?;
                s.query_map(params![cutoff, keep, PRUNE_BATCH], |r| r.get(0))
                    .map_err(&err)?
                    .collect::<Result<_, _>>()
                    .map_err(&err)?
            };
            for ord in &doomed {
                tx.execute("DELETE FROM events WHERE task_ord = ?1", [ord])
                    .map_err(&err)?;
                tx.execute("DELETE FROM requests WHERE task_ord = ?1", [ord])
                    .map_err(&err)?;
                tx.execute("DELETE FROM tasks WHERE ord = ?1", [ord])
                    .map_err(&err)?;
            }
            tx.commit().map_err(&err)?;
            Ok(doomed.len() as u64)
        })
        .await
    }

    async fn orphans(&self, _owner: &str) -> Result<Vec<Orphan>, StoreError> {
        let (name, path) = (self.describe(), self.path.clone());
        self.run(move |c| {
            let err = failed_at(&path);
            let mut s = c
                .prepare(
                    "SELECT record, lease_serial, lease_id, request FROM tasks
                     LEFT JOIN requests ON task_ord = ord WHERE ended_at_ms IS NULL ORDER BY ord",
                )
                .map_err(&err)?;
            let rows = s
                .query_map([], |r| {
                    Ok((
                        r.get::<_, Vec<u8>>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, Option<Vec<u8>>>(3)?,
                    ))
                })
                .map_err(&err)?;
            let mut out = Vec::new();
            for row in rows {
                let (rec, serial, lease_id, req) = row.map_err(&err)?;
                out.push(Orphan {
                    task: decode_task(&name, &rec, req.as_deref())?,
                    lease: serial
                        .zip(lease_id)
                        .map(|(serial, lease_id)| LeaseRef { serial, lease_id }),
                    lost_replica: None,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn count(&self) -> Result<u64, StoreError> {
        let path = self.path.clone();
        self.run(move |c| {
            c.query_row("SELECT count(*) FROM tasks", [], |r| r.get::<_, i64>(0))
                .map(uint)
                .map_err(failed_at(&path))
        })
        .await
    }

    async fn tokens_since(&self, tenant: &str, since_ms: i64) -> Result<u64, StoreError> {
        let path = self.path.clone();
        let tenant = tenant.to_owned();
        self.run(move |c| {
            // TOTAL rather than SUM: a float that cannot overflow.
            c.prepare_cached(
                "SELECT TOTAL(tokens) FROM tasks WHERE tenant = ?1 AND created_at_ms >= ?2",
            )
            .and_then(|mut s| s.query_row(params![tenant, since_ms], |r| r.get::<_, f64>(0)))
            // `as` saturates a float into the integer range.
            .map(|total| total as u64)
            .map_err(failed_at(&path))
        })
        .await
    }
}

#[path = "sqlite_open.rs"]
mod open;

#[cfg(test)]
#[path = "sqlite_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "sqlite_damage_tests.rs"]
mod damage_tests;
